"""Binaries a single row forces, as ``rnd`` derivations, propagated until nothing changes
(at the root, and at each branch-and-bound node from the binary it fixed).

Write a row as ``a·x >= β`` (an ``L`` row negated; an ``E`` row both ways). When the most
the other variables can contribute (each at the bound its sign favours: the bound rows
or earlier fixings) leaves ``β`` out of reach unless binary ``x_m`` is 1 (``a_m > 0``) or
0 (``a_m < 0``), the row divided by ``|a_m|``, with each other variable cancelled by its
bound row, is ``x_m >= f`` with ``f > 0`` (or ``x_m <= f`` with ``f < 1``), and rounding
gives ``x_m >= 1`` (``x_m <= 0``). The LP relaxation sees these only fractionally.
"""

from __future__ import annotations

import math
from collections import deque
from fractions import Fraction

from smug_opt.certificate.milp import ExactMilp, ExactRow
from smug_opt.certificate.vipr import Derivations

__all__ = ["Bounds", "forced_binaries", "propagate", "rows_of_columns"]

_MAX_VISITS = 20
"""Times each row may be re-examined in one propagation (a guard, not a tuning knob)."""

Bounds = list[tuple[int, Fraction]]
"""Per variable: (index of the constraint stating the bound, its value)."""


def rows_of_columns(milp: ExactMilp) -> list[list[int]]:
    """Per variable, the problem rows a fixing can come from (lone equalities excluded)."""
    rows_of: list[list[int]] = [[] for _ in range(milp.num_vars)]
    for index in range(milp.num_bound_rows, len(milp.rows)):
        row = milp.rows[index]
        if row.sense == "E" and len(row.cols) < 2:
            continue  # an equality alone cannot be rounded (VIPR rounds <= and >= only)
        for j in row.cols:
            rows_of[j].append(index)
    return rows_of


def forced_binaries(milp: ExactMilp, derivations: Derivations,
                    rows_of: list[list[int]]) -> list[tuple[int, ExactRow]]:
    """Derive every fixing the rows imply at the root into ``derivations``; the fixing
    rows (``x_j >= 1`` or ``x_j <= 0``) by index."""
    n = milp.num_vars
    lower = [(2 * j, milp.rows[2 * j].rhs) for j in range(n)]
    upper = [(2 * j + 1, milp.rows[2 * j + 1].rhs) for j in range(n)]
    queue = sorted({index for rows in rows_of for index in rows})
    return propagate(milp, derivations, lower, upper, queue, rows_of)


def propagate(milp: ExactMilp, derivations: Derivations, lower: Bounds, upper: Bounds,
              queue: list[int], rows_of: list[list[int]]) -> list[tuple[int, ExactRow]]:
    """Examine the rows in ``queue`` (and, as binaries get fixed, the rows they appear in):
    each fixing found is derived, recorded in ``lower``/``upper`` and returned."""
    pending = deque(queue)
    waiting = set(queue)
    visits: dict[int, int] = {}
    fixings: list[tuple[int, ExactRow]] = []
    while pending:
        index = pending.popleft()
        waiting.discard(index)
        visits[index] = visits.get(index, 0) + 1
        if visits[index] > _MAX_VISITS:
            continue
        for sign in {"G": (1,), "L": (-1,), "E": (1, -1)}[milp.rows[index].sense]:
            found = _fix_row(milp, index, sign, lower, upper, derivations)
            fixings += found
            for _, fixing in found:
                for other in rows_of[fixing.cols[0]]:
                    if other not in waiting:
                        pending.append(other)
                        waiting.add(other)
    return fixings


def _fix_row(milp: ExactMilp, index: int, sign: int, lower: Bounds, upper: Bounds,
             derivations: Derivations) -> list[tuple[int, ExactRow]]:
    row = milp.rows[index]
    R, row_nums = row.integer_form
    nums = [sign * v for v in row_nums]  # the row as Σ (nums_k / R)·x_k >= goal
    goal = sign * row.rhs
    favoured = [upper[j] if v > 0 else lower[j] for j, v in zip(row.cols, nums, strict=True)]
    # activities in integers over R·B (B: the bounds' common denominator; a fixed binary's
    # bound, 0 or 1, keeps it): exact, without a Fraction operation per term
    B = math.lcm(*(bound.denominator for _, bound in favoured))
    term = [v * bound.numerator * (B // bound.denominator)
            for v, (_, bound) in zip(nums, favoured, strict=True)]
    most = sum(term)
    goal_num, goal_den = goal.numerator * R * B, goal.denominator  # activity < goal: a·goal_den < goal_num
    found: list[tuple[int, ExactRow]] = []
    for m, (j_m, v_m) in enumerate(zip(row.cols, nums, strict=True)):
        low, high = lower[j_m][1], upper[j_m][1]
        if not milp.integer[j_m] or (low.numerator, low.denominator) == (high.numerator, high.denominator):
            continue  # (fixed: compared as integer pairs, ~10x faster than Fraction equality)
        others = most - term[m]
        if v_m > 0 and others * goal_den < goal_num:  # x_m >= (β − others)/a_m > 0
            sense, rhs, value = "G", Fraction(1), 1
        elif v_m < 0 and (others + v_m * B) * goal_den < goal_num:  # x_m <= (others − β)/|a_m| < 1
            sense, rhs, value = "L", Fraction(0), 0
        else:
            continue
        # the row divided by a_m (> 0: a >= combination; < 0: a <= one), each other term
        # cancelled by its bound row
        multipliers = {index: Fraction(sign * R, v_m)}
        for k, v in enumerate(nums):
            if k != m:
                multipliers[favoured[k][0]] = Fraction(-v, v_m)
        fixing = ExactRow(f"f{j_m}", sense, rhs, (j_m,), (Fraction(1),))
        fixed_index = derivations.combine(fixing.name, sense, rhs, [(j_m, Fraction(1))], multipliers,
                                          rounded=True)
        if value == 1:
            lower[j_m] = (fixed_index, Fraction(1))
        else:
            upper[j_m] = (fixed_index, Fraction(0))
        found.append((fixed_index, fixing))
        # the row's favoured activity changes with the new bound of x_m
        favoured[m] = upper[j_m] if v_m > 0 else lower[j_m]
        term[m] = v_m * favoured[m][1].numerator * B
        most = others + term[m]
    return found
