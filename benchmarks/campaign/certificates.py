"""The campaign's certificates: for every OPTIMAL or INFEASIBLE answer, the VIPR certificate
(:func:`smug_opt.certificate.write_certificate`) checked by ``smug-opt check-certificate``
in a process of its own, and judged against the exact truth.

Outcomes: ``accepted`` (the checker proves the claim, and the claim is the truth),
``rejected`` (the checker refused a certificate the writer produced: a defect either side),
``accepted-wrong`` (the checker proved something the truth contradicts: a defect of the
checker), ``none`` (the writer could not prove the claim in time, or found the solution
not exactly feasible: no certificate, honest). Rejected certificates are kept beside their
``.smug`` in the campaign's ``certificates/`` folder; the others are deleted.
"""

from __future__ import annotations

import subprocess
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any

from smug_opt import Problem, SolveResult, save_problem
from smug_opt.certificate import CLAIMS, CertificateError, write_certificate

__all__ = ["certificate_outcome"]

CHECK_SECONDS = 600.0
"""The checker runs within its own byte and work budgets; this only stops a hung process."""


def certificate_outcome(problem: Problem, r: SolveResult, optimum: Fraction | None, folder: Path,
                        name: str, seconds: float) -> dict[str, Any]:
    """Write, check and judge the certificate of ``r``'s claim (see the module docstring);
    the fields to add to the campaign's record (none for a result that claims nothing)."""
    claim = r.status.name
    if claim not in CLAIMS:
        return {}
    folder.mkdir(parents=True, exist_ok=True)
    smug, vipr = folder / f"{name}.smug", folder / f"{name}.vipr"
    save_problem(problem, smug)
    try:
        cert = write_certificate(problem, claim, r.x, vipr, seconds=seconds, source=smug.name)
    except CertificateError as exc:
        smug.unlink()
        return {"certificate": "none", "certificate_why": str(exc)[:200]}
    check = subprocess.run([sys.executable, "-m", "smug_opt", "check-certificate", str(smug), str(vipr)],
                           capture_output=True, text=True, timeout=CHECK_SECONDS)
    rec: dict[str, Any] = {"certificate_seconds": round(cert.seconds, 3), "certificate_nodes": cert.nodes,
                           "checker": (check.stdout + check.stderr).strip()[:300]}
    if check.returncode != 0:
        rec["certificate"] = "rejected"
        return rec
    truth = "INFEASIBLE" if optimum is None else optimum
    said = "INFEASIBLE" if cert.optimum is None else cert.optimum
    rec["certificate"] = "accepted" if said == truth else "accepted-wrong"
    if rec["certificate"] == "accepted":
        smug.unlink()
        vipr.unlink()
    return rec
