"""VIPR certificates for OPTIMAL and INFEASIBLE claims, checkable without smug-opt's solvers.

:func:`write_certificate` states the problem as the MILP of ``docs/certificates.md``, adds
forced binaries (:mod:`~smug_opt.certificate.fixings`), cardinality cuts
(:mod:`~smug_opt.certificate.cuts`) and a certified branch-and-bound
(:mod:`~smug_opt.certificate.search`) proving the claim, and writes a VIPR 1.0 file that
an exact checker (``smug-opt check-certificate``) verifies from the ``.smug`` alone.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np

from smug_opt.certificate.cuts import cardinality_cuts
from smug_opt.certificate.fixings import forced_binaries, rows_of_columns
from smug_opt.certificate.milp import CertificateError, complete_solution, exact_milp, violated_row
from smug_opt.certificate.search import prove
from smug_opt.certificate.vipr import Derivations, number, write_vipr
from smug_opt.ir import Problem

__all__ = ["CLAIMS", "Certificate", "CertificateError", "write_certificate"]

CLAIMS = ("OPTIMAL", "INFEASIBLE")
"""The claims a certificate proves."""


@dataclass(frozen=True)
class Certificate:
    """A written certificate: where, what it proves, and what proving took."""

    path: Path
    claim: str
    optimum: Fraction | None  # None for INFEASIBLE
    nodes: int  # branch-and-bound nodes (1: the root LP closed it)
    fixings: int
    cuts: int
    derivations: int
    seconds: float

    def summary(self) -> str:
        what = "infeasibility" if self.optimum is None else f"optimum {number(self.optimum)}"
        return (f"{what}: {self.derivations} derivations ({self.fixings} fixings, {self.cuts} cuts, "
                f"{self.nodes} branch-and-bound node{'s' * (self.nodes != 1)}) in {self.seconds:.2f}s")


def write_certificate(problem: Problem, claim: str, x: np.ndarray | None,
                      path: str | os.PathLike[str], *, seconds: float, source: str = "") -> Certificate:
    """Prove ``claim`` (``"OPTIMAL"`` with its solution ``x``, or ``"INFEASIBLE"``) about
    ``problem`` within ``seconds`` and write the VIPR certificate to ``path``.

    Raises :class:`CertificateError` (nothing written) when the solution (its ReLU outputs
    recomputed exactly) does not satisfy the stated MILP exactly, or the proof does not
    finish in time. ``source`` (e.g. the ``.smug`` file) is named in a comment.
    """
    start = time.monotonic()
    if claim not in CLAIMS:
        raise CertificateError(f"certificates prove {' or '.join(CLAIMS)} claims, not {claim!r}")
    milp = exact_milp(problem)
    optimum = solution = None
    if claim == "OPTIMAL":
        if x is None:
            raise CertificateError("an OPTIMAL claim needs its solution")
        solution = complete_solution(problem, x)
        bad = violated_row(milp, solution)
        if bad is not None:
            raise CertificateError(f"the solution violates {bad} of the stated MILP exactly")
        optimum = sum((c * solution.get(j, 0) for j, c in milp.objective.items()), Fraction(0))
    derivations = Derivations(len(milp.rows))
    rows_of = rows_of_columns(milp)
    fixings = forced_binaries(milp, derivations, rows_of)
    cuts = cardinality_cuts(milp, derivations)
    first = milp.num_bound_rows
    rows = [(first + i, milp.rows[first + i]) for i in range(len(milp.rows) - first)] + cuts
    fixed = {row.cols[0]: (1 if row.sense == "G" else 0, index) for index, row in fixings}
    stats = prove(milp, rows, derivations, optimum, fixed=fixed, rows_of=rows_of,
                  seconds=max(seconds - (time.monotonic() - start), 0.0))
    comments = [f"smug-opt certificate: {claim}" + (f" of {source}" if source else ""),
                "MILP stated as docs/certificates.md describes"]
    write_vipr(path, milp, comments=comments, optimum=optimum, solution=solution, derivations=derivations)
    return Certificate(Path(path), claim, optimum, stats.nodes, len(fixings), len(cuts),
                       len(derivations.lines), time.monotonic() - start)
