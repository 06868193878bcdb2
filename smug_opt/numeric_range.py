"""Inputs a floating-point solver cannot represent faithfully, detected before solving.

Every float in a problem is the exact rational it is; the exact backend (z3) and the
exact check read it so. A float solver works to tolerances of about 1e-7 relative to a
row's largest coefficient and 1e-9 of the objective's scale (see :mod:`smug_opt.solving`), and
the bridges rewrite what it cannot take (scaling by powers of two, dropping coefficients
under 1e-7 of their row's largest with their mass moved to the bounds). Past the
thresholds below, a float backend's OPTIMAL or INFEASIBLE rests on that approximation:

* ``subnormal``: a non-zero coefficient, right-hand side, cost, bound or ReLU constant
  below ``2**-1022`` in magnitude (it has fewer than 53 significant bits);
* ``row-range``: a row whose largest and smallest non-zero coefficients differ by more
  than :data:`ROW_RANGE_LIMIT` (the small ones reach the solver only as moved bounds);
* ``cost-scale``: an objective whose scale ``Σ|c_j|·max|x_j|`` exceeds
  :data:`COST_SCALE_LIMIT` (a float solver's bound is then uncertain by more than 1e-3).

:func:`smug_opt.solve` records them in ``SolveResult.numeric_issues`` and, on a backend
that is not exact, certifies the claim (:mod:`smug_opt.certify`) when a subnormal or the
cost scale is involved, unless ``certify=False`` is passed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from smug_opt.ir import Problem

__all__ = ["COST_SCALE_LIMIT", "ROW_RANGE_LIMIT", "SMALLEST_NORMAL", "NumericIssue", "numeric_issues"]

SMALLEST_NORMAL = 2.0**-1022
ROW_RANGE_LIMIT = 1e7
COST_SCALE_LIMIT = 1e6


@dataclass(frozen=True)
class NumericIssue:
    """One way a problem leaves the float-faithful range; ``certify``: whether a float
    backend's claim on it is certified by default."""

    kind: str  # "subnormal", "row-range" or "cost-scale"
    detail: str
    certify: bool

    def __str__(self) -> str:
        return f"{self.kind}: {self.detail}"


def numeric_issues(problem: Problem) -> tuple[NumericIssue, ...]:
    """Every way ``problem`` leaves the float-faithful range (empty: none)."""
    issues: list[NumericIssue] = []
    relu_in = problem.relu_in
    for what, values in (("coefficient", problem.A.data), ("right-hand side", problem.rhs),
                         ("cost", problem.objective), ("bound", np.concatenate([problem.lb, problem.ub])),
                         ("ReLU coefficient", relu_in.data if relu_in is not None else np.zeros(0)),
                         ("ReLU constant", problem.relu_const)):
        tiny = (values != 0) & (np.abs(values) < SMALLEST_NORMAL)
        if tiny.any():
            issues.append(NumericIssue("subnormal", f"{int(tiny.sum())} subnormal {what}(s), e.g. "
                                                    f"{float(values[tiny][0])!r}", certify=True))
    ranges = _row_ranges(problem)
    wide = np.flatnonzero(ranges > ROW_RANGE_LIMIT)
    if wide.size:
        i = int(wide[np.argmax(ranges[wide])])
        issues.append(NumericIssue("row-range", f"{wide.size} row(s) with coefficients spanning more "
                                                f"than {ROW_RANGE_LIMIT:g} (row {i}: {ranges[i]:.3g})",
                                   certify=False))
    reach = np.maximum(np.abs(problem.lb), np.abs(problem.ub))
    scale = float(np.abs(problem.objective) @ reach)
    if scale > COST_SCALE_LIMIT:
        issues.append(NumericIssue("cost-scale", f"the objective reaches {scale:.3g} (limit "
                                                 f"{COST_SCALE_LIMIT:g})", certify=True))
    return tuple(issues)


def _row_ranges(problem: Problem) -> np.ndarray:
    A = problem.A
    ranges = np.ones(A.shape[0])
    data = np.abs(A.data)
    nz = np.diff(A.indptr) > 0
    if data.size:
        starts = A.indptr[:-1][nz]
        top = np.maximum.reduceat(data, starts)
        low = np.minimum.reduceat(np.where(data > 0, data, np.inf), starts)
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            ranges[nz] = np.where(np.isfinite(low), top / low, 1.0)
    return ranges
