"""Exact arithmetic on float64 data: every float is a dyadic rational ``m·2**e``.

Sums and products of dyadic rationals stay dyadic, so a value is kept as a pair of Python
integers ``(m, e)`` meaning ``m·2**e``: no gcd, no rounding, fast enough for whole rows.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

__all__ = ["TINY", "UNIT_ROUNDOFF", "Dyadic", "compare", "dot", "dot_error_bound", "dot_split", "float_down",
           "from_float", "from_floats", "sign", "to_float", "to_fraction"]

UNIT_ROUNDOFF = 2.0**-53
"""float64's unit roundoff: one rounding moves a normal result by at most this, relatively."""

TINY = 2.0**-1060
"""An absolute allowance per operation for results below the normal range (an underflowing
operation errs by at most 2**-1075, the half of the smallest subnormal; 2**-1060 leaves room
for the sums of up to 2**15 such errors in one term)."""


def dot_error_bound(terms: np.ndarray | int, magnitude: np.ndarray | float) -> np.ndarray | float:
    """A rigorous bound on the rounding error of a float64 dot product of ``terms`` terms
    whose absolute products sum to ``magnitude`` (any summation order), with a factor 2 of
    room: ``2(n+3)·u·magnitude + (n+1)·TINY``."""
    return 2.0 * (np.asarray(terms) + 3) * UNIT_ROUNDOFF * magnitude + (np.asarray(terms) + 1) * TINY

Dyadic = tuple[int, int]
"""``(m, e)``: the exact value ``m * 2**e``."""

ZERO: Dyadic = (0, 0)


def from_floats(values: np.ndarray) -> tuple[list[int], list[int]]:
    """Mantissas and exponents of float64 values, exactly: ``values[i] == m[i]·2**e[i]``."""
    mant, exp = np.frexp(np.asarray(values, dtype=np.float64))
    m = np.ldexp(mant, 53).astype(np.int64)
    e = exp.astype(np.int64) - 53
    return m.tolist(), e.tolist()


def from_float(value: float) -> Dyadic:
    """The exact dyadic value of one float."""
    ms, es = from_floats(np.array([value]))
    return ms[0], es[0]


def _sum(terms: list[Dyadic]) -> Dyadic:
    terms = [t for t in terms if t[0] != 0]
    if not terms:
        return ZERO
    emin = min(e for _, e in terms)
    return sum(m << (e - emin) for m, e in terms), emin


def dot(coefficients: np.ndarray, values: list[Dyadic], const: float = 0.0) -> Dyadic:
    """``Σ coefficients[i]·values[i] + const`` exactly (``coefficients`` are float64)."""
    cm, ce = from_floats(coefficients)
    return dot_split(cm, ce, values, from_float(const))


def dot_split(mantissas: list[int], exponents: list[int], values: list[Dyadic],
              const: Dyadic = ZERO) -> Dyadic:
    """:func:`dot` over coefficients already split by :func:`from_floats` (a matrix's
    entries converted once, not row by row)."""
    terms = [(a * m, b + e) for a, b, (m, e) in zip(mantissas, exponents, values, strict=True) if m != 0]
    terms.append(const)
    return _sum(terms)


def compare(value: Dyadic, other: Dyadic) -> int:
    """The sign of ``value - other``: -1, 0 or 1."""
    return sign(_sum([value, (-other[0], other[1])]))


def sign(value: Dyadic) -> int:
    """-1, 0 or 1."""
    return (value[0] > 0) - (value[0] < 0)


def to_fraction(value: Dyadic) -> Fraction:
    m, e = value
    return Fraction(m * (1 << e)) if e >= 0 else Fraction(m, 1 << -e)


def to_float(value: Dyadic) -> float:
    """The float nearest to the exact value (correctly rounded)."""
    return float(to_fraction(value))


def float_down(value: Fraction) -> float:
    """The largest float64 not above ``value`` (a bound stated as a float must not rise)."""
    f = float(value)
    return f if Fraction(f) <= value else math.nextafter(f, -math.inf)
