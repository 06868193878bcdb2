"""How far a problem's float64 coefficients take its values from the network's exact ones.

The whole-network encoder writes each layer's values as ``coef·x + const`` over the
problem's variables, computing ``coef`` and ``const`` in float64 (``W`` times a residual
sum's coefficients, ``α·W``, shifted constants, a max chain's differences). The problem then
means those floats exactly, which are not the exact products of the network's weights: its
values differ from the network's by a few units in the last place of the *magnitudes*
involved, which cancellation can make far larger than the values themselves. Bounds proven
for the network hold for the problem only once widened by a rigorous bound on that
difference, its *deviation*: each helper here bounds one operation's share of it over the
variables' box ``|x| <= reach`` (error bounds as :func:`smug_opt.exact.dot_error_bound`,
whose factor 2 of room covers the float64 evaluation of the bound itself).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from smug_opt.bounds.rounding import down, up
from smug_opt.encode.masked import nonzero_pattern
from smug_opt.exact import TINY, dot_error_bound

__all__ = ["carried", "constant_shift_deviation", "product_deviation", "sum_deviation", "widen"]


def product_deviation(M: sp.csr_matrix, C: sp.csr_matrix, reach: np.ndarray,
                      c: np.ndarray | None = None, b: np.ndarray | None = None) -> np.ndarray:
    """Per row, a bound on ``|(fl(M@C) − M·C)·x + fl(M@c + b) − (M·c + b)|`` over
    ``|x| <= reach`` (``c``, ``b``: constants, None for none). Exact where it is: a column of
    ``C`` holding a single ±1 gives products and one-term sums that do not round, so
    selecting variables (a layer reading ReLU outputs) deviates by nothing."""
    M, C = sp.csr_matrix(M), sp.csc_matrix(C)
    abs_M = abs(M)
    terms = np.diff(M.indptr)
    per_column = np.diff(C.indptr)
    single_unit = np.zeros(C.shape[1], dtype=bool)
    ones = per_column == 1
    single_unit[ones] = np.abs(C.data[C.indptr[:-1][ones]]) == 1.0
    rough = np.where(single_unit, 0.0, reach[:C.shape[1]])
    deviation = np.zeros(M.shape[0])
    pattern = nonzero_pattern(M)
    if rough.any():
        magnitude = abs_M @ (abs(C) @ rough)
        rough_terms = np.minimum(terms, int(per_column[~single_unit].max(initial=0)))
        reached = nonzero_pattern(C) @ (rough > 0).astype(np.float64)
        touched = pattern @ reached > 0  # counts: never underflow
        deviation = np.where(touched, dot_error_bound(rough_terms, magnitude)
                             + (rough_terms + 1) * TINY * float(rough.sum()), 0.0)
    if c is not None and np.any(c != 0):
        reached = abs_M @ np.abs(c)
        bias = np.zeros(M.shape[0]) if b is None else np.abs(b)
        touched = pattern @ (c != 0).astype(np.float64) > 0
        deviation = deviation + np.where(touched, dot_error_bound(terms + 1, reached + bias), 0.0)
    return np.asarray(deviation, dtype=np.float64)


def sum_deviation(A: sp.csr_matrix, B: sp.csr_matrix, a: np.ndarray, b: np.ndarray,
                  reach: np.ndarray) -> np.ndarray:
    """Per row, a bound on the rounding of ``fl(A + B)·x + fl(a + b)`` (``A``, ``B`` of one
    shape): only entries where both sides are nonzero round."""
    A, B = sp.csr_matrix(A), sp.csr_matrix(B)
    both = nonzero_pattern(A).multiply(nonzero_pattern(B))
    magnitude = np.asarray((abs(A) + abs(B)).multiply(both) @ reach[:A.shape[1]]).reshape(-1)
    shared = (a != 0) & (b != 0)
    total = magnitude + np.where(shared, np.abs(a) + np.abs(b), 0.0)
    touched = (np.asarray(both.sum(axis=1)).reshape(-1) > 0) | shared  # counts: never underflow
    return np.where(touched, dot_error_bound(1, total) + TINY * float(reach.sum()), 0.0)


def constant_shift_deviation(const: np.ndarray, shift: float) -> np.ndarray:
    """Per row, a bound on ``|fl(const − shift) − (const − shift)|``."""
    return np.where(const != 0, dot_error_bound(1, np.abs(const) + abs(shift)), 0.0)


def carried(M: sp.csr_matrix, deviation: np.ndarray | None) -> np.ndarray | None:
    """``|M|·deviation`` rounded up: how a linear map carries its input's deviation (None: 0)."""
    if deviation is None or not np.any(deviation):
        return None
    M = sp.csr_matrix(M)
    total = abs(M) @ deviation
    return np.asarray(total + dot_error_bound(np.diff(M.indptr), total), dtype=np.float64)


def widen(lo: np.ndarray, hi: np.ndarray, deviation: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``[lo − deviation, hi + deviation]`` rounded outward (unchanged where it is 0)."""
    moved = deviation > 0
    return (np.where(moved, down(lo - deviation), lo), np.where(moved, up(hi + deviation), hi))
