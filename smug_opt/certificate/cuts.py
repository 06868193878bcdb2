"""Cardinality cuts as ``rnd`` derivations: what lifts the LP bound of rows like ``a·M > 0``.

A row over binaries ``a·x >= β`` with ``β > 0`` (an ``L`` row negated) needs some of its
positive-coefficient binaries set: divided by the largest coefficient ``a_max``, with
``x >= 0`` added to fill each coefficient up to 1 (positive ones) or cancel it (negative
ones), it gives ``Σ_{a_j>0} x_j >= β / a_max``, and rounding (integer coefficients on
binaries) ``>= ceil(β / a_max)``. The LP relaxation of the tightened strict rows is solved
by near-empty masks; with these cuts it is not.
"""

from __future__ import annotations

import math
from fractions import Fraction

from smug_opt.certificate.milp import ExactMilp, ExactRow
from smug_opt.certificate.vipr import Derivations

__all__ = ["cardinality_cuts"]


def cardinality_cuts(milp: ExactMilp, derivations: Derivations) -> list[tuple[int, ExactRow]]:
    """Derive one cut per qualifying problem row into ``derivations``; the cuts by index."""
    cuts: list[tuple[int, ExactRow]] = []
    first = milp.num_bound_rows
    for index in range(first, len(milp.rows)):
        row = milp.rows[index]
        if row.sense == "E" or not all(milp.integer[j] for j in row.cols):
            continue
        sign = 1 if row.sense == "G" else -1
        coefs = [sign * a for a in row.coefs]
        goal = sign * row.rhs
        largest = max(coefs, default=Fraction(0))
        if goal <= 0 or largest <= 0:
            continue
        multipliers = {index: Fraction(sign) / largest}
        for j, a in zip(row.cols, coefs, strict=True):
            lift = -a / largest if a < 0 else 1 - a / largest
            if lift:
                multipliers[2 * j] = lift
        support = tuple(j for j, a in zip(row.cols, coefs, strict=True) if a > 0)
        rhs = Fraction(math.ceil(goal / largest))
        cut = ExactRow(f"c{index - first}", "G", rhs, support, (Fraction(1),) * len(support))
        cut_index = derivations.combine(cut.name, "G", rhs, zip(cut.cols, cut.coefs, strict=True),
                                        multipliers, rounded=True)
        cuts.append((cut_index, cut))
    return cuts
