"""Exact linear constraints as integer vectors over one positive denominator.

A :class:`Row` ``(coefs, den, rhs, sense)`` means ``sum(coefs[j] x_j) / den  sense  rhs``: the
left-hand side is Python ints over one denominator, so combining rows costs integer
multiply-adds, not Fraction normalisations, and comparing two left-hand sides is a
cross-multiplication; nothing is rounded. Rows stated with ``OBJ`` share the objective's
coefficients instead of copying them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction

__all__ = [
    "EQ",
    "GE",
    "LE",
    "SENSE_CODES",
    "Row",
    "combine",
    "first_difference",
    "row_from_values",
    "with_lhs_of",
]

LE, EQ, GE = -1, 0, 1
SENSE_CODES = {"L": LE, "E": EQ, "G": GE}
_SENSE_LETTERS = {v: k for k, v in SENSE_CODES.items()}


@dataclass(frozen=True, slots=True)
class Row:
    """``coefs·x / den  sense  rhs`` (``den > 0``, no zero in ``coefs``; never mutated)."""

    coefs: Mapping[int, int]
    den: int
    rhs: Fraction
    sense: int

    @property
    def letter(self) -> str:
        return _SENSE_LETTERS[self.sense]

    def coefficient(self, j: int) -> Fraction:
        return Fraction(self.coefs.get(j, 0), self.den)

    def is_falsehood(self) -> bool:
        """``0 >= b`` with b > 0, ``0 <= b`` with b < 0 or ``0 = b`` with b != 0."""
        if self.coefs:
            return False
        return (self.sense <= 0 and self.rhs < 0) or (self.sense >= 0 and self.rhs > 0)

    def is_tautology(self) -> bool:
        """``0 >= b`` with b <= 0, ``0 <= b`` with b >= 0 or ``0 = 0``."""
        if self.coefs:
            return False
        return ((self.sense == GE and self.rhs <= 0) or (self.sense == LE and self.rhs >= 0)
                or (self.sense == EQ and self.rhs == 0))

    def same_lhs(self, other: Row) -> bool:
        """The left-hand sides are the same linear form (exactly)."""
        return first_difference(self, other) is None

    def dominates(self, other: Row) -> bool:
        """VIPR's domination: a falsehood dominates anything; otherwise the same left-hand
        side and a right-hand side at least as strong in ``other``'s direction."""
        if self.is_falsehood():
            return True
        if not self.same_lhs(other):
            return False
        if other.sense == GE:
            return self.sense != LE and self.rhs >= other.rhs
        if other.sense == LE:
            return self.sense != GE and self.rhs <= other.rhs
        return self.sense == EQ and self.rhs == other.rhs

    def same_as(self, other: Row) -> bool:
        """The same constraint: sense, left-hand side and right-hand side."""
        return self.sense == other.sense and self.rhs == other.rhs and self.same_lhs(other)

    def value_at(self, point: Mapping[int, Fraction]) -> Fraction:
        """The left-hand side at ``point`` (absent variables are 0)."""
        total = Fraction(0)
        for j, a in self.coefs.items():
            v = point.get(j)
            if v:
                total += a * v
        return total / self.den

    def holds_at(self, point: Mapping[int, Fraction], *, strictly: bool = False) -> bool:
        """The constraint holds at ``point`` (``strictly``: as ``<`` or ``>``)."""
        lhs = self.value_at(point)
        if self.sense == EQ:
            return lhs == self.rhs
        gap = (lhs - self.rhs) * self.sense
        return gap > 0 if strictly else gap >= 0


MAX_BITS = 1 << 16
"""The longest common denominator a row or a combination may need (a float64 needs about
1,100 bits, a product of two about 2,200): computing a longer one is refused, not done."""


def bounded_lcm(values: Iterable[int]) -> int | None:
    """The least common multiple of ``values``, or None once it passes :data:`MAX_BITS`
    (checked step by step, so a hostile list costs no more than the cap)."""
    acc = 1
    for v in values:
        if acc % v:
            acc = acc // math.gcd(acc, v) * v
            if acc.bit_length() > MAX_BITS:
                return None
    return acc


def row_from_values(coefs: Iterable[tuple[int, int, int]], rhs: Fraction, sense: int) -> Row:
    """A row from coefficients ``(j, numerator, denominator)`` (zeros dropped) over their
    least common denominator; ValueError when that is over :data:`MAX_BITS` long."""
    items = [t for t in coefs if t[1]]
    den = bounded_lcm(d for _, _, d in items)
    if den is None or rhs.denominator.bit_length() > MAX_BITS:
        raise ValueError(f"a constraint needs a common denominator of over {MAX_BITS:,} bits")
    return Row({j: p * (den // d) for j, p, d in items}, den, rhs, sense)


def with_lhs_of(form: Row, rhs: Fraction, sense: int) -> Row:
    """The constraint ``form's left-hand side  sense  rhs`` (for ``OBJ`` rows and claims)."""
    return Row(form.coefs, form.den, rhs, sense)


def combine(terms: list[tuple[int, int, Row]]) -> tuple[dict[int, int], int, Fraction] | None:
    """``sum(p/q · row)`` over ``(p, q, row)`` (q > 0) as ``(coefs, den, rhs)`` (zeros
    dropped), or None when a common denominator would pass :data:`MAX_BITS`; the caller
    checks the signs and decides the sense. Integer arithmetic only: one common
    denominator for the left-hand sides, one for the right-hand sides."""
    if not terms:
        return {}, 1, Fraction(0)
    den = bounded_lcm(q * row.den for _, q, row in terms)
    rhs_parts = [(p * row.rhs.numerator, q * row.rhs.denominator) for p, q, row in terms]
    rhs_den = bounded_lcm(d for _, d in rhs_parts)
    if den is None or rhs_den is None:
        return None
    rhs = Fraction(sum(n * (rhs_den // d) for n, d in rhs_parts), rhs_den)
    acc: dict[int, int] = {}
    get = acc.get
    for p, q, row in terms:
        factor = p * (den // (q * row.den))
        for j, a in row.coefs.items():
            acc[j] = get(j, 0) + factor * a
    return {j: a for j, a in acc.items() if a}, den, rhs


def first_difference(a: Row, b: Row) -> int | None:
    """The smallest variable index whose coefficient differs between ``a`` and ``b``."""
    if a.coefs is b.coefs and a.den == b.den:
        return None
    differing = list(a.coefs.keys() ^ b.coefs.keys())
    differing += [j for j, x in a.coefs.items() if j in b.coefs and x * b.den != b.coefs[j] * a.den]
    return min(differing) if differing else None
