"""Checking a certificate file against a ``.smug`` problem file, end to end."""

from __future__ import annotations

import os
from pathlib import Path

from smug_opt.check_certificate.problem_milp import expected_milp, match_problem
from smug_opt.check_certificate.tokens import TokenStream
from smug_opt.check_certificate.verifier import DEFAULT_MAX_WORK, Proven, verify
from smug_opt.check_certificate.vipr_reader import read_header

__all__ = ["DEFAULT_MAX_BYTES", "check_certificate"]

DEFAULT_MAX_BYTES = 256 * 2**20
"""The largest certificate read (its derivations stay in memory: three to ten times its size)."""


def check_certificate(problem_path: str | os.PathLike[str], certificate_path: str | os.PathLike[str],
                      *, max_bytes: int = DEFAULT_MAX_BYTES, max_work: int = DEFAULT_MAX_WORK
                      ) -> Proven:
    """What the VIPR certificate proves about the problem, verified in exact arithmetic.

    The MILP is derived from the ``.smug`` itself and must be the one the certificate
    states. Raises :class:`CertificateRejected` naming the first failure when the
    certificate proves nothing, ``ValueError``/``FileNotFoundError`` for unreadable files.
    """
    from smug_opt.problem_file import load_problem

    problem_file = Path(problem_path)
    expected = expected_milp(load_problem(problem_file))
    certificate = Path(certificate_path)
    if not certificate.is_file():
        raise FileNotFoundError(f"no certificate file at {certificate}")
    stream = TokenStream(certificate, max_bytes=max_bytes)
    header = read_header(stream)
    match_problem(header, expected, problem_file.name)
    return verify(header, stream, strict=expected.strict, max_work=max_work)
