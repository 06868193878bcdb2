"""Optima that are exact by construction: a verified objective that meets a lower bound
read off the problem itself, in exact arithmetic, needs no solver's word.

Two such bounds: the variables' boxes (``Σ_j min(c_j·lb_j, c_j·ub_j)``: a count of cells
cannot go below 0), and, for a count of cells (nonnegative integer costs on binaries), a
cardinality row ``Σ_{j∈S} x_j >= k`` (the stress encoder adds one when its enumeration
proved that no mask of fewer than ``k`` cells keeps the label: ``min_cells``). A start
(e.g. the encoder's greedy mask) that meets such a bound is optimal before any solver runs
(:func:`optimal_start`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from smug_opt import exact
from smug_opt.backend import Status
from smug_opt.exact import float_down
from smug_opt.ir import Problem, Sense
from smug_opt.result import Proof, SolveResult, Timings, relative_gap
from smug_opt.verification import verify

__all__ = ["ConstructionBound", "construction_bound", "exact_by_construction", "optimal_start"]


@dataclass(frozen=True)
class ConstructionBound:
    """An exact lower bound on the objective of every solution, and where it comes from."""

    value: Fraction
    why: str
    row: int | None = None
    """The cardinality row it comes from, None for the variables' boxes."""


def construction_bound(problem: Problem) -> ConstructionBound:
    """The best lower bound the problem states outright (see module doc)."""
    c, lb, ub = problem.objective, problem.lb, problem.ub
    best = ConstructionBound(sum((min(Fraction(c[j]) * Fraction(lb[j]), Fraction(c[j]) * Fraction(ub[j]))
                                  for j in np.flatnonzero(c).tolist()), Fraction(0)),
                             "no solution's objective is below its variables' bounds")
    if problem.integral_objective and bool(np.all(c >= 0)):
        for i, k, cols in _cardinality_rows(problem):
            value = k * Fraction(int(c[cols].min()))
            if value > best.value:
                known = (" (the encoder's enumeration with error bounds: min_cells)"
                         if problem.metadata.get("min_cells") == k else "")
                best = ConstructionBound(value, f"row {i} keeps at least {k} of its cells{known}", i)
    return best


def _cardinality_rows(problem: Problem) -> list[tuple[int, int, np.ndarray]]:
    """``(i, k, S)`` for each row ``i`` that says ``Σ_{j∈S} x_j >= k`` over binaries (all its
    coefficients equal), ``k`` the least integer it allows."""
    A, out = problem.A, []
    binary = problem.binary
    for i in range(problem.num_rows):
        lo, hi = A.indptr[i], A.indptr[i + 1]
        data, cols = A.data[lo:hi], A.indices[lo:hi]
        if data.size == 0 or not np.all(data == data[0]) or not np.all(binary[cols]):
            continue
        sense, a, rhs = Sense(problem.senses[i]), Fraction(data[0]), Fraction(problem.rhs[i])
        if a < 0:  # -Σx <= -k is Σx >= k
            a, rhs = -a, -rhs
            sense = {Sense.LE: Sense.GE, Sense.LT: Sense.GT, Sense.GE: Sense.LE,
                     Sense.GT: Sense.LT, Sense.EQ: Sense.EQ}[sense]
        if a == 0 or sense not in (Sense.GE, Sense.GT, Sense.EQ):
            continue
        need = rhs / a
        k = math.floor(need) + 1 if sense is Sense.GT else math.ceil(need)
        if k > 0:
            out.append((i, k, cols))
    return out


def exact_by_construction(problem: Problem, result: SolveResult) -> SolveResult:
    """``result`` as an exact OPTIMAL when its verified solution meets
    :func:`construction_bound`; otherwise, when that bound comes from a cardinality row, a
    FEASIBLE or NO_SOLUTION result whose bound is lower (or missing) gets it, with a note
    saying where it comes from (a solver may stop before its own bound reaches a row it was
    given); otherwise unchanged."""
    if result.proof == "exact" or result.status not in (Status.OPTIMAL, Status.FEASIBLE,
                                                        Status.NO_SOLUTION):
        return result
    bound = construction_bound(problem)
    objective = result.objective
    if result.x is not None and objective is not None and _near(objective, bound):
        value = _verified_objective(problem, result)
        if value is None:  # the objective reads values that x holds rounded: verify again
            v = verify(problem, result.x)
            value = v.objective if v.ok else None
        if value == bound.value:
            note = f"optimal by construction: {bound.why}"
            low = float_down(bound.value)
            return result.with_note(note, status=Status.OPTIMAL, proof=Proof.EXACT, bound=low,
                                    gap=relative_gap(objective, low))
    if result.status is Status.OPTIMAL:
        return result
    return _with_row_bound(result, bound)


def _with_row_bound(result: SolveResult, bound: ConstructionBound) -> SolveResult:
    """``result`` with its bound raised to ``bound`` where that comes from a cardinality row
    and is higher (the gap recomputed, the message saying why)."""
    low = float_down(bound.value)
    if bound.row is None or (result.bound is not None and result.bound >= low):
        return result
    note = f"bound {low:g} by construction: {bound.why}"
    return result.with_note(note, bound=low, gap=relative_gap(result.objective, low))


def optimal_start(problem: Problem, start: np.ndarray, backend: str) -> SolveResult | None:
    """An exact OPTIMAL result for ``start`` when it holds exactly and its objective meets
    :func:`construction_bound` (no solver needed: ``backend`` names who was asked); else
    None. The exact check runs only when the float objective is already at the bound."""
    t0 = time.monotonic()
    bound = construction_bound(problem)
    if not _near(float(problem.objective @ start), bound):
        return None
    v = verify(problem, start)
    if not v.ok or v.objective != bound.value:
        return None
    low = float_down(bound.value)
    objective = float(v.objective)
    seconds = time.monotonic() - t0
    return SolveResult(
        status=Status.OPTIMAL, x=v.x, objective=objective, bound=low,
        gap=relative_gap(objective, low), backend=backend,
        solver="none: the start meets a bound the problem states", verified=True,
        verification=v.summary(),
        message=f"optimal by construction, before solving: the start meets it ({bound.why})",
        times=Timings(verify=seconds, total=seconds), time_limit=None, proof=Proof.EXACT)


def _near(objective: float | None, bound: ConstructionBound) -> bool:
    return objective is not None and abs(objective - float(bound.value)) <= 1e-9 * max(1.0, abs(objective))


def _verified_objective(problem: Problem, result: SolveResult) -> Fraction | None:
    """The exact objective of a verified result's solution when it reads no ReLU output
    (those ``x`` holds rounded from their exact values), else None."""
    if result.verified is not True:
        return None
    cols = np.flatnonzero(problem.objective)
    if np.isin(cols, problem.relu_out).any():
        return None
    x = np.asarray(result.x, dtype=np.float64)
    mant, exps = exact.from_floats(x[cols])
    return exact.to_fraction(exact.dot(problem.objective[cols], list(zip(mant, exps, strict=True))))
