"""Binaries a single row forces, as ``rnd`` derivations, propagated until nothing changes.

Write a row as ``a·x >= β`` (an ``L`` row negated; an ``E`` row both ways). When the most
the other variables can contribute (each at the bound its sign favours: the bound rows
or earlier fixings) leaves ``β`` out of reach unless binary ``x_m`` is 1 (``a_m > 0``) or
0 (``a_m < 0``), the row divided by ``|a_m|``, with each other variable cancelled by its
bound row, is ``x_m >= f`` with ``f > 0`` (or ``x_m <= f`` with ``f < 1``), and rounding
gives ``x_m >= 1`` (``x_m <= 0``). The LP relaxation sees these only fractionally.
"""

from __future__ import annotations

from fractions import Fraction

from smug_opt.certificate.milp import ExactMilp, ExactRow
from smug_opt.certificate.vipr import Derivations

__all__ = ["forced_binaries"]

_MAX_PASSES = 20


def forced_binaries(milp: ExactMilp, derivations: Derivations) -> list[tuple[int, ExactRow]]:
    """Derive every fixing found into ``derivations``; the fixing rows by index."""
    n = milp.num_vars
    lower = [(2 * j, milp.rows[2 * j].rhs) for j in range(n)]  # (constraint index, value)
    upper = [(2 * j + 1, milp.rows[2 * j + 1].rhs) for j in range(n)]
    fixings: list[tuple[int, ExactRow]] = []
    first = milp.num_bound_rows
    for _ in range(_MAX_PASSES):
        found = len(fixings)
        for index in range(first, len(milp.rows)):
            row = milp.rows[index]
            if row.sense == "E" and len(row.cols) < 2:
                continue  # an equality alone cannot be rounded (VIPR rounds <= and >= only)
            for sign in {"G": (1,), "L": (-1,), "E": (1, -1)}[row.sense]:
                fixings += _fix_row(milp, index, sign, lower, upper, derivations)
        if len(fixings) == found:
            break
    return fixings


def _fix_row(milp: ExactMilp, index: int, sign: int, lower: list[tuple[int, Fraction]],
             upper: list[tuple[int, Fraction]], derivations: Derivations) -> list[tuple[int, ExactRow]]:
    row = milp.rows[index]
    coefs = [sign * a for a in row.coefs]
    goal = sign * row.rhs
    favoured = [upper[j] if a > 0 else lower[j] for j, a in zip(row.cols, coefs, strict=True)]
    most = sum((a * bound for a, (_, bound) in zip(coefs, favoured, strict=True)), Fraction(0))
    found: list[tuple[int, ExactRow]] = []
    for m, (j_m, a_m) in enumerate(zip(row.cols, coefs, strict=True)):
        if not milp.integer[j_m] or lower[j_m][1] == upper[j_m][1]:
            continue
        others = most - a_m * favoured[m][1]
        if a_m > 0 and others < goal:  # x_m >= (β − others)/a_m > 0
            scale, sense, rhs, value = 1 / a_m, "G", Fraction(1), 1
        elif a_m < 0 and others + a_m < goal:  # x_m <= (others − β)/|a_m| < 1
            scale, sense, rhs, value = 1 / a_m, "L", Fraction(0), 0
        else:
            continue
        # scale > 0: a >= combination; scale < 0: a <= one (each bound row cancels its term)
        multipliers = {index: sign * scale}
        for k, a in enumerate(coefs):
            if k != m:
                multipliers[favoured[k][0]] = -a * scale
        fixing = ExactRow(f"f{j_m}", sense, rhs, (j_m,), (Fraction(1),))
        fixed_index = derivations.combine(fixing.name, sense, rhs, [(j_m, Fraction(1))], multipliers,
                                          rounded=True)
        if value == 1:
            lower[j_m] = (fixed_index, Fraction(1))
        else:
            upper[j_m] = (fixed_index, Fraction(0))
        found.append((fixed_index, fixing))
        # the row's favoured activity changes with the new bound of x_m
        favoured[m] = upper[j_m] if a_m > 0 else lower[j_m]
        most = others + a_m * favoured[m][1]
    return found
