"""Outward rounding for float64 bound arithmetic: results that stay rigorous.

numpy rounds to nearest, so a computed bound may sit on the wrong side of the exact one.
Every helper here returns a value moved outward past a bound on the rounding error of the
operations that produced it (a result of one operation on exact floats errs by at most
``UNIT_ROUNDOFF·|result|``, plus ``TINY`` below the normal range; sums of ``n`` terms as
:func:`smug_opt.exact.dot_error_bound`).
"""

from __future__ import annotations

from typing import cast

import numpy as np

from smug_opt.exact import TINY, UNIT_ROUNDOFF, dot_error_bound

__all__ = ["ACCUMULATED", "down", "lower_chord", "slack", "up", "upper_chord"]

ACCUMULATED = 1.0 + 2.0**-20
"""Factor on a nonnegative error total accumulated in float64 by at most 2**20 additions
(each moves it down by at most a relative UNIT_ROUNDOFF), so that it bounds the exact total."""


def down(x: np.ndarray, ops: int = 1) -> np.ndarray:
    """A lower bound on the exact value of ``x``, the result of ``ops`` float64 operations
    (products, quotients, or additions of two terms) on exact operands, each rounding relative
    to the magnitude ``|x|`` of the result."""
    return x - 2.0 * ops * UNIT_ROUNDOFF * np.abs(x) - ops * TINY


def up(x: np.ndarray, ops: int = 1) -> np.ndarray:
    """An upper bound on the exact value of ``x`` (as :func:`down`)."""
    return x + 2.0 * ops * UNIT_ROUNDOFF * np.abs(x) + ops * TINY


def slack(terms: int, magnitude: np.ndarray) -> np.ndarray:
    """A bound on the rounding error of sums of at most ``terms`` products whose absolute
    values total ``magnitude`` (computed in float64: the factor 2 of
    :func:`~smug_opt.exact.dot_error_bound` covers its own rounding)."""
    return cast(np.ndarray, dot_error_bound(int(terms), magnitude))  # an array for an array


def upper_chord(x1: np.ndarray, y1: np.ndarray, x2: np.ndarray, y2: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
    """Slope and intercept ``(s, b)`` of a line ``s·x + b`` on or above the segment from
    ``(x1, y1)`` to ``(x2, y2)`` over ``[x1, x2]`` (``x1 < x2``), exactly: the slope is rounded
    up past the chord's, the intercept up past ``y1 − s·x1``. Above a convex function whose
    values at ``x1``, ``x2`` are at most ``y1``, ``y2``, it is an upper relaxation there."""
    with np.errstate(all="ignore"):
        slope = up((y2 - y1) / (x2 - x1), ops=3)
        product = slope * x1
        intercept = y1 - product
        intercept = intercept + 2.0 * UNIT_ROUNDOFF * (np.abs(y1) + 2.0 * np.abs(product)) + 2 * TINY
    return slope, intercept


def lower_chord(x1: np.ndarray, y1: np.ndarray, x2: np.ndarray, y2: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
    """A line on or below the segment (as :func:`upper_chord`, mirrored)."""
    slope, intercept = upper_chord(x1, -np.asarray(y1), x2, -np.asarray(y2))
    return -slope, -intercept
