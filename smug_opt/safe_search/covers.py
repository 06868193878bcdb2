"""Cover cuts from single rows over binaries, each checked valid in exact arithmetic.

A row over binaries only, written as ``Σ a_t x_t ⊳ b`` (``⊳`` is ``>=`` or ``>``; a ``<=``
row is negated, an equality gives both), becomes ``Σ w_t z_t ⊳ β`` with ``w = |a|``,
``z_t = x_t`` where ``a_t > 0`` and ``z_t = 1 − x_t`` where ``a_t < 0``, and ``β = b −
Σ_{a_t<0} a_t``. For a set ``S`` of its items, if every point with at most ``k − 1`` items
of ``S`` on has activity at most ``W − w(S) + top_{k−1}(w_S)`` (all items outside ``S`` on,
the ``k − 1`` heaviest of ``S``) and that fails ``⊳ β``, then every feasible point has
``Σ_{t∈S} z_t >= k``: a cut with coefficients ±1 and an integer right-hand side, exact in
float64. ``S`` is chosen against a float LP point (the items least on there); the claim
"``W − w(S) + top_{k−1}(w_S)`` fails ``⊳ β``" is decided with :class:`fractions.Fraction`
on the row's float64 data (:func:`cover_holds`), so no rounding enters a cut's validity.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from smug_opt.ir import Problem, Sense

__all__ = ["MAX_COVER", "CoverSeparator", "Cut", "KnapsackRow", "cover_holds", "knapsack_rows"]

MAX_COVER = 48
"""Cover sets are grown from a row's items least on at the LP point up to this many (the
separation's arrays are rows × sets × items)."""


@dataclass(frozen=True)
class Cut:
    """``coefs · x[cols] >= rhs``, valid for every solution (integers: exact in float64)."""

    cols: np.ndarray
    coefs: np.ndarray
    rhs: float

    def violation(self, x: np.ndarray) -> float:
        return self.rhs - float(self.coefs @ x[self.cols])


@dataclass(frozen=True)
class KnapsackRow:
    """One side of a row over binaries: ``Σ a·x[cols] >= b`` (``strict``: ``>``)."""

    cols: np.ndarray
    a: np.ndarray
    b: float
    strict: bool


def knapsack_rows(problem: Problem) -> list[KnapsackRow]:
    """Every row side of ``problem`` whose support is binaries only, as a ``>=``/``>`` row."""
    A = problem.A.tocsr()
    binary = np.asarray(problem.binary, dtype=bool)
    rows = []
    for i in range(problem.num_rows):
        span = slice(A.indptr[i], A.indptr[i + 1])
        cols, a = A.indices[span], A.data[span]
        if cols.size == 0 or not binary[cols].all():
            continue
        sense, b = Sense(int(problem.senses[i])), float(problem.rhs[i])
        if sense in (Sense.GE, Sense.GT, Sense.EQ):
            rows.append(KnapsackRow(cols, a, b, sense is Sense.GT))
        if sense in (Sense.LE, Sense.LT, Sense.EQ):
            rows.append(KnapsackRow(cols, -a, -b, sense is Sense.LT))
    return rows


def cover_holds(row: KnapsackRow, items: np.ndarray, need: int) -> bool:
    """Whether ``Σ_{t in items} z_t >= need`` holds at every binary point satisfying ``row``
    (``items``: positions in ``row.cols``), decided exactly: the most the row's activity
    can be with at most ``need − 1`` of ``items`` on fails the row."""
    if need <= 0:
        return True
    if need > len(items):
        return False  # such a cut would call the row infeasible: never claimed here
    w = [abs(Fraction(float(v))) for v in row.a]
    beta = Fraction(row.b) - sum((Fraction(float(v)) for v in row.a if v < 0), Fraction(0))
    chosen = set(int(t) for t in items)
    outside = sum((w[t] for t in range(len(w)) if t not in chosen), Fraction(0))
    heaviest = sorted((w[t] for t in chosen), reverse=True)[:need - 1]
    most = outside + sum(heaviest, Fraction(0))
    return most <= beta if row.strict else most < beta


def _cover(row: KnapsackRow, items: np.ndarray, need: int) -> Cut:
    signs = np.where(row.a[items] > 0, 1.0, -1.0)
    return Cut(row.cols[items], signs, float(need - int((signs < 0).sum())))


class CoverSeparator:
    """Separates cover cuts from ``rows`` at LP points, all rows at once (padded arrays)."""

    def __init__(self, rows: list[KnapsackRow]) -> None:
        rows = [r for r in rows if not _cardinality(r)]
        self.rows = rows
        width = max((r.cols.size for r in rows), default=0)
        self.weights = np.zeros((len(rows), width))
        self.present = np.zeros((len(rows), width), dtype=bool)
        self.cols = np.zeros((len(rows), width), dtype=np.int64)
        self.negative = np.zeros((len(rows), width), dtype=bool)
        for i, r in enumerate(rows):
            self.weights[i, :r.cols.size] = np.abs(r.a)
            self.present[i, :r.cols.size] = True
            self.cols[i, :r.cols.size] = r.cols
            self.negative[i, :r.cols.size] = r.a < 0
        self.beta = np.array([r.b - float(r.a[r.a < 0].sum()) for r in rows])
        self.strict = np.array([r.strict for r in rows], dtype=bool)

    def separate(self, x: np.ndarray, min_violation: float = 1e-6) -> list[Cut]:
        """Per row, the most violated cover cut at ``x`` among the nested sets of its items
        least on there (ties: heaviest first), kept only when :func:`cover_holds` proves it."""
        if not self.rows:
            return []
        count, width = self.weights.shape
        at = x[self.cols]
        z = np.where(self.present, np.where(self.negative, 1.0 - at, at), 2.0)  # padding: last, weightless
        order = _row_order(z, self.weights)
        total = self.weights.sum(axis=1, keepdims=True)
        size = min(width, MAX_COVER)  # sets of the items least on, up to this many
        order = order[:, :size]
        w = np.take_along_axis(self.weights, order, axis=1)
        zo = np.take_along_axis(z, order, axis=1)
        present = np.take_along_axis(self.present, order, axis=1)
        outside = total - np.cumsum(w, axis=1)  # [row, set size - 1]
        in_set = np.tri(size, dtype=bool)[None, :, :]
        prefix = np.where(in_set, w[:, None, :], 0.0)  # [row, set size - 1, item]
        heaviest = -np.sort(-prefix, axis=2)
        reach = outside[:, :, None] + np.concatenate(
            [np.zeros((count, size, 1)), np.cumsum(heaviest, axis=2)], axis=2)  # [row, set size - 1, k]
        beta = self.beta[:, None, None]
        holds = np.where(self.strict[:, None, None], reach > beta, reach >= beta)
        need = np.argmax(holds, axis=2)
        usable = holds.any(axis=2) & present & (need >= 1)
        violation = np.where(usable, need - np.cumsum(np.where(present, zo, 0.0), axis=1), -np.inf)
        cuts = []
        for i in np.flatnonzero(violation.max(axis=1) > min_violation).tolist():
            chosen = int(np.argmax(violation[i])) + 1
            items, k = order[i, :chosen], int(need[i, chosen - 1])
            row = self.rows[i]
            while k >= 1 and not cover_holds(row, items, k):  # float64 misjudged a near-tie
                k -= 1
            if k >= 1 and k - float(zo[i, :chosen].sum()) > min_violation:
                cuts.append(_cover(row, items, k))
        return cuts


def _cardinality(row: KnapsackRow) -> bool:
    """Whether ``row`` is ``±Σ x >= integer`` (not strict): its covers are implied by the row itself."""
    return not row.strict and bool(np.all(np.abs(row.a) == 1.0)) and float(row.b).is_integer()


def _row_order(z: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Per row, the items by ``z`` ascending, ties by weight descending."""
    rows = np.repeat(np.arange(z.shape[0]), z.shape[1])
    flat = np.lexsort((-weights.ravel(), z.ravel(), rows))
    return (flat - rows * z.shape[1]).reshape(z.shape)
