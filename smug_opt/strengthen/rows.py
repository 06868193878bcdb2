"""Rows read exactly: sign-normalised ``>=``/``>``/``==`` rows, their 0/1 pattern tables, and
exact knapsack counts for rows too wide to tabulate.

A row ``a·x <= r`` (or ``<``) is negated to ``-a·x >= -r`` (negation is exact in floats).
A *table* lists, for a row whose support ``S`` has at most :data:`MAX_TABLE_SUPPORT` cells,
which of the ``2**|S|`` 0/1 patterns satisfy it, decided exactly: a float evaluation with
a rigorous error bound first, exact rational arithmetic for the patterns it cannot decide.
Pattern ``p`` sets cell ``S[k]`` to bit ``k`` of ``p``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import scipy.sparse as sp

from smug_opt import exact
from smug_opt.exact import TINY, UNIT_ROUNDOFF
from smug_opt.ir import Problem, Sense

__all__ = [
    "MAX_TABLE_SUPPORT", "Knapsack", "NormalRows", "knapsack", "normal_rows", "pattern_bits", "tables",
]

MAX_TABLE_SUPPORT = 12
"""Rows with at most this many cells get an exact pattern table (4,096 patterns)."""

_CHUNK = 4096


@dataclass(frozen=True)
class NormalRows:
    """``A[i]·x  (>= | > | ==)  rhs[i]``: the problem's rows with ``<=``/``<`` negated."""

    A: sp.csr_matrix
    rhs: np.ndarray
    strict: np.ndarray  # bool per row
    equality: np.ndarray  # bool per row

    def row(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """Columns and coefficients of row ``i``."""
        lo, hi = self.A.indptr[i], self.A.indptr[i + 1]
        return self.A.indices[lo:hi], self.A.data[lo:hi]


def normal_rows(problem: Problem) -> NormalRows:
    """The rows of ``problem`` as ``>=``, ``>`` or ``==`` rows (exact sign flips)."""
    senses = problem.senses
    flip = np.where((senses == Sense.LE) | (senses == Sense.LT), -1.0, 1.0)
    A = sp.csr_matrix(sp.diags(flip) @ problem.A)
    A.sort_indices()
    return NormalRows(A=A, rhs=flip * problem.rhs,
                      strict=(senses == Sense.LT) | (senses == Sense.GT),
                      equality=senses == Sense.EQ)


@functools.cache
def pattern_bits(size: int) -> np.ndarray:
    """``(2**size, size)`` 0/1 matrix (read-only): row ``p`` holds the bits of ``p``, lowest first."""
    bits = ((np.arange(2**size)[:, None] >> np.arange(size)[None, :]) & 1).astype(np.int8)
    bits.setflags(write=False)
    return bits


def _holds(difference: float | Fraction, strict: bool, equality: bool) -> bool:
    if equality:
        return difference == 0
    return difference > 0 if strict else difference >= 0


def tables(rows: NormalRows, indices: np.ndarray, size: int) -> np.ndarray:
    """Exact tables of ``rows`` ``indices`` (each with ``size`` cells): bool ``(len, 2**size)``."""
    bits = pattern_bits(size).astype(np.float64)
    out = np.zeros((indices.size, 2**size), dtype=bool)
    for start in range(0, indices.size, _CHUNK):
        chunk = indices[start:start + _CHUNK]
        starts = rows.A.indptr[chunk]
        coefs = rows.A.data[starts[:, None] + np.arange(size)[None, :]]
        rhs = rows.rhs[chunk]
        diff = coefs @ bits.T - rhs[:, None]
        error = (size + 3) * UNIT_ROUNDOFF * (np.abs(coefs).sum(axis=1) + np.abs(rhs)) + (size + 2) * TINY
        certain = np.abs(diff) > 2.0 * error[:, None]
        strict = rows.strict[chunk][:, None]
        eq = rows.equality[chunk][:, None]
        holds = np.where(strict, diff > 0, diff >= 0) & ~eq
        block = certain & holds
        for r, p in zip(*np.nonzero(~certain), strict=True):
            i = int(chunk[r])
            exact = sum((Fraction(float(a)) for a, b in zip(coefs[r], bits[p], strict=True) if b),
                        Fraction(0)) - Fraction(float(rows.rhs[i]))
            block[r, p] = _holds(exact, bool(rows.strict[i]), bool(rows.equality[i]))
        out[start:start + chunk.size] = block
    return out


@dataclass(frozen=True)
class Knapsack:
    """Exact facts about one ``>=``/``>`` row over 0/1 cells, given cells fixed on/off.

    ``count``: the fewest free positive cells that can satisfy the row (None: it cannot
    hold at all); ``forced_on`` / ``forced_off``: free cells the row cannot do without /
    cannot afford; ``trivial``: it holds whatever the free cells are.
    """

    count: int | None
    positive: np.ndarray
    forced_on: np.ndarray
    forced_off: np.ndarray
    trivial: bool


def _integers(values: np.ndarray) -> list[int]:
    """``values`` (float64) as Python integers sharing one power-of-two scale (exact)."""
    ms, es = exact.from_floats(values)
    low = min((e for m, e in zip(ms, es, strict=True) if m), default=0)
    return [m << (e - low) if m else 0 for m, e in zip(ms, es, strict=True)]


def knapsack(cols: np.ndarray, coefs: np.ndarray, rhs: float, strict: bool,
             fixed: np.ndarray) -> Knapsack:
    """Exact :class:`Knapsack` facts of the row ``coefs·x[cols] (> if strict else >=) rhs``;
    ``fixed[j]`` is -1 (free), 0 or 1."""
    state = fixed[cols]
    *values, right = _integers(np.append(coefs, rhs))
    need = right - sum(v for v, s in zip(values, state.tolist(), strict=True) if s == 1)
    free = np.flatnonzero(state == -1)
    pos = [int(k) for k in free if coefs[k] > 0]
    neg = [int(k) for k in free if coefs[k] < 0]
    empty = np.zeros(0, dtype=np.int64)

    def ok(total: int) -> bool:
        return total > need if strict else total >= need

    top = sum(values[k] for k in pos)
    if not ok(top):
        return Knapsack(None, cols[pos], empty, empty, False)
    if ok(sum(values[k] for k in neg)):
        return Knapsack(0, cols[pos], empty, empty, True)
    order = sorted(pos, key=lambda k: -values[k])
    count, total = 0, 0
    while not ok(total):
        total += values[order[count]]
        count += 1
    forced_on = []
    for k in order:  # the largest first: once one can be spared, every smaller one can
        if ok(top - values[k]):
            break
        forced_on.append(k)
    forced_off = []
    for k in sorted(neg, key=lambda k: values[k]):  # the most negative first
        if ok(top + values[k]):
            break
        forced_off.append(k)
    return Knapsack(count, cols[pos], cols[np.array(forced_on, dtype=np.int64)],
                    cols[np.array(forced_off, dtype=np.int64)], False)
