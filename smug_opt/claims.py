"""What a solve's result may claim about the objective: how close to the optimum an
OPTIMAL objective is (:func:`objective_tolerance`), the lower bound a solver's bound
certifies (:func:`certified_bound`) and whether a verified solution meets a bound
(:func:`meets_bound`). Shared by the solve loop and the race."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from smug_opt.ir import Problem

__all__ = ["BOUND_RELATIVE_ERROR", "OBJECTIVE_TOLERANCE", "certified_bound", "meets_bound",
           "objective_scale", "objective_tolerance"]

OBJECTIVE_TOLERANCE = 1e-6
"""Objective tolerance, relative to the objective's scale ``max(1, Σ_j |c_j|·max|x_j|)``,
when the objective is not integral: floating-point MILP solvers neglect objective
differences below about this (their optimality and integrality tolerances), so OPTIMAL
then means within it, and ``bound`` is widened by it. With an integral objective (counts
of cells) OPTIMAL is exact."""

BOUND_RELATIVE_ERROR = 1e-9
"""How far, relative to the objective's scale (:func:`objective_scale`), a floating-point
solver's bound may lie above the true optimum of its own model (its optimality and
feasibility tolerances, costs of 1e15 next to 1): a float backend's bound is lowered by
this before an integral objective's bound is rounded up. Costs whose objective scale
reaches 1e6 therefore cost a float backend exact OPTIMAL claims (``certify=True`` or z3
restore them)."""


def objective_scale(problem: Problem) -> float:
    """``max(1, Σ_j |c_j|·max(|lb_j|, |ub_j|))``: how large the objective can get."""
    reach = np.maximum(np.abs(problem.lb), np.abs(problem.ub))
    return max(1.0, float(np.abs(problem.objective) @ reach))


def objective_tolerance(problem: Problem) -> float:
    """How far from the optimum an OPTIMAL objective may be: 0 for an integral objective,
    else :data:`OBJECTIVE_TOLERANCE` times the objective's scale."""
    if problem.integral_objective:
        return 0.0
    return OBJECTIVE_TOLERANCE * objective_scale(problem)


def certified_bound(bound: float, integral: bool, tolerance: float, noise: float) -> float | None:
    """The solver's lower bound as one the result can promise: rounded up for an integral
    objective after allowing for a float solver's ``noise`` (at least 1e-6), else widened
    by ``tolerance`` (which exceeds the noise)."""
    if not math.isfinite(bound):
        return None
    if integral:
        return float(math.ceil(bound - max(noise, 1e-6)))
    return bound - max(tolerance, noise)


def meets_bound(objective: Fraction, bound: float, tolerance: float, *, exact_bound: bool,
                determined_by_binaries: bool) -> bool:
    """Whether a verified solution of exact ``objective`` meets ``bound``: a float backend's
    within twice the objective ``tolerance``; an exact backend's (``exact_bound``: its exact
    optimum rounded down to float64) exactly, or, where the binaries fix every variable
    (``determined_by_binaries``: the verified objective is then exactly the value of the
    solver's own exact model), within the two ulps that rounding the bound down and the
    objective to nearest leave."""
    if not exact_bound:
        return float(objective) <= bound + 2 * tolerance
    if objective <= Fraction(bound):
        return True
    return determined_by_binaries and float(objective) <= math.nextafter(
        math.nextafter(bound, math.inf), math.inf)
