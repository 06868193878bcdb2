"""Cardinality cuts as ``rnd`` derivations: what lifts the LP bound of rows like ``a·M > 0``.

A row over binaries ``a·x >= β`` with ``β > 0`` (an ``L`` row negated) needs at least ``k``
of its positive-coefficient binaries set, ``k`` the fewest of its largest coefficients
that reach ``β``. With ``t`` the ``k``-th largest: the row divided by ``t``, minus
``(a_j/t − 1)·(x_j <= 1)`` for the ``k − 1`` larger ones, plus ``(1 − a_j/t)·(x_j >= 0)``
(or ``−a_j/t`` for negative ``a_j``) for the others, is ``Σ_{a_j>0} x_j >= k − 1 + ε`` with
``ε = (β − Σ_{top k−1} a_j) / t > 0``; rounding (integer coefficients on binaries) gives
``>= k``. The LP relaxation of the tightened strict rows is solved by near-empty masks;
with these cuts it is not.
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
        R, row_nums = row.integer_form
        nums = [sign * v for v in row_nums]  # the row as Σ (nums_j / R)·x_j >= goal, in integers
        goal = sign * row.rhs
        goal_R = goal * R
        ranked = sorted((v for v in nums if v > 0), reverse=True)
        if goal <= 0 or sum(ranked) < goal_R:
            continue  # no cut, or no point satisfies the row (the LP finds that)
        k, reached = 0, 0
        while reached < goal_R:
            reached += ranked[k]
            k += 1
        t = ranked[k - 1]
        larger = sum(ranked[:k - 1])
        multipliers = {index: Fraction(sign * R, t)}
        for j, v in zip(row.cols, nums, strict=True):
            if v > t:
                multipliers[2 * j + 1] = Fraction(t - v, t)  # (a_j/t − 1)·(x_j <= 1) subtracted
            elif v != t:
                multipliers[2 * j] = Fraction(-v, t) if v < 0 else Fraction(t - v, t)
        support = tuple(j for j, v in zip(row.cols, nums, strict=True) if v > 0)
        rhs = Fraction(math.ceil((goal_R - larger) / t) + (k - 1))
        cut = ExactRow(f"c{index - first}", "G", rhs, support, (Fraction(1),) * len(support))
        cut_index = derivations.combine(cut.name, "G", rhs, zip(cut.cols, cut.coefs, strict=True),
                                        multipliers, rounded=True)
        cuts.append((cut_index, cut))
    return cuts
