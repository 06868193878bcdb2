"""An independent checker of VIPR certificates for ``.smug`` problems.

It reads the problem and the certificate itself, derives the MILP the certificate must be
about (``docs/certificates.md``), and verifies every derivation in exact rational arithmetic
within a byte and a work budget. It shares no code with the path that writes certificates
beyond reading the ``.smug`` file.
"""

from smug_opt.check_certificate.check import DEFAULT_MAX_BYTES, check_certificate
from smug_opt.check_certificate.verifier import DEFAULT_MAX_WORK, CertificateRejected, Proven

__all__ = ["DEFAULT_MAX_BYTES", "DEFAULT_MAX_WORK", "CertificateRejected", "Proven",
           "check_certificate"]
