"""Node propagation for the safe search: rows over binaries, the objective cutoff and the
dual proofs of pruned nodes fix binaries (or close a node) before its LP, every deduction
rigorous.

* **Rows over binaries** (:class:`~smug_opt.safe_search.covers.KnapsackRow`, ``Σ a·x ⊳ b``;
  the problem's rows, cover cuts, and the cutoff ``−c·x >= −(U − 1)`` when every costed
  variable is binary and the objective integral, ``−c·x > −U`` otherwise): the most the
  row's activity can reach within the node's bounds, ``M``, is bounded above with its
  float64 rounding error added; if that fails ``⊳ b`` no point of the node satisfies the
  row, and if it fails once a free binary's ``|a_t|`` is taken off, that binary takes the
  side its ``a_t`` favours.
* **Dual proofs** (the multipliers of LPs that pruned a node): any multipliers bound
  ``c·x`` rigorously over any box (:func:`~smug_opt.bounds.lp.box_bound`, valid for every
  point satisfying the rows they were taken from, which stay valid), so a kept proof
  closes another node whose box it bounds above the cutoff, and fixes a free binary when
  its reduced cost ``|r_j|`` added to that bound (rounded down) would (as reduced-cost
  fixing does with the node's own LP).

Deductions repeat until none is new, within :data:`MAX_PASSES` passes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from fractions import Fraction

import numpy as np

from smug_opt.bounds.lp import DualParts, box_bound
from smug_opt.exact import dot_error_bound, float_down
from smug_opt.ir import Problem
from smug_opt.safe_search.covers import KnapsackRow

__all__ = ["MAX_PASSES", "DualProofs", "RowPropagator", "cutoff_rows", "propagate"]

MAX_PASSES = 20
"""Rounds of deductions per node (each over every row and proof at once)."""


def cutoff_rows(problem: Problem, incumbent: Fraction) -> list[KnapsackRow]:
    """``−c·x >= −(U − 1)`` (integral objective; ``−c·x > −U`` otherwise) for the incumbent's
    objective ``U`` when every costed variable is binary: every improving solution satisfies it."""
    c = np.asarray(problem.objective, dtype=np.float64)
    cols = np.flatnonzero(c)
    if not cols.size or not np.all(problem.binary[cols]):
        return []
    if problem.integral_objective:
        return [KnapsackRow(cols, -c[cols], float_down(1 - incumbent), False)]
    return [KnapsackRow(cols, -c[cols], float_down(-incumbent), True)]


class RowPropagator:
    """Fixes binaries of a box by rows over binaries (see the module doc), all rows at once."""

    def __init__(self, rows: Sequence[KnapsackRow]) -> None:
        self.rows: list[KnapsackRow] = []
        self.add(rows)

    def add(self, rows: Sequence[KnapsackRow]) -> None:
        """Propagate ``rows`` too (each valid for every solution)."""
        self.rows += rows
        sizes = np.array([r.cols.size for r in self.rows], dtype=np.int64)
        self.row_of = np.repeat(np.arange(len(self.rows)), sizes)
        self.cols = np.concatenate([r.cols for r in self.rows]).astype(np.int64) if self.rows else sizes
        self.a = np.concatenate([r.a for r in self.rows]).astype(np.float64) if self.rows else np.zeros(0)
        self.b = np.array([r.b for r in self.rows], dtype=np.float64)
        self.strict = np.array([r.strict for r in self.rows], dtype=bool)
        self.error = dot_error_bound(sizes, np.bincount(self.row_of, np.abs(self.a), len(self.rows)))
        self.magnitude = np.abs(self.a)
        self.positive = self.a > 0

    def deduce(self, lb: np.ndarray, ub: np.ndarray) -> tuple[bool, np.ndarray, np.ndarray]:
        """One pass over every row: (whether some row fails at every point of the box, the
        columns forced to 1, the columns forced to 0). ``lb``, ``ub``: 0/1 on the rows' columns."""
        none = np.zeros(0, dtype=np.int64)
        if not self.b.size:
            return False, none, none
        lo, hi = lb[self.cols], ub[self.cols]
        terms = np.where(self.positive, self.a * hi, self.a * lo)  # exact: the bounds are 0 or 1
        most = np.bincount(self.row_of, terms, self.b.size) + self.error  # >= the exact M
        if np.any(np.where(self.strict, most <= self.b, most < self.b)):
            return True, none, none
        without = most[self.row_of] - self.magnitude
        without = without + 2.0 * np.spacing(np.abs(without))  # >= the exact M − |a_t|
        b = self.b[self.row_of]
        forced = (lo != hi) & (self.a != 0) & np.where(self.strict[self.row_of], without <= b, without < b)
        return False, self.cols[forced & self.positive], self.cols[forced & ~self.positive]


class DualProofs:
    """The kept dual proofs (at most ``capacity``, the oldest replaced first) over ``n``
    columns, in arrays allocated once (a ring: adding one copies only its own parts)."""

    def __init__(self, n: int, capacity: int) -> None:
        self.capacity = max(capacity, 0)
        self.row_sum = np.zeros(self.capacity)
        self.row_abs = np.zeros(self.capacity)
        self.rows = np.zeros(self.capacity, dtype=np.int64)
        self.r = np.zeros((self.capacity, n))
        self.r_err = np.zeros((self.capacity, n))
        self.count = 0
        self.next = 0

    def __len__(self) -> int:
        return self.count

    def add(self, parts: DualParts) -> None:
        if self.capacity == 0 or not np.all(np.isfinite(parts.r)) or not math.isfinite(parts.row_sum):
            return
        k = self.next
        self.row_sum[k], self.row_abs[k], self.rows[k] = parts.row_sum, parts.row_abs, parts.rows
        self.r[k], self.r_err[k] = parts.r, parts.r_err
        self.next = (k + 1) % self.capacity
        self.count = min(self.count + 1, self.capacity)

    def bounds(self, lb: np.ndarray, ub: np.ndarray) -> np.ndarray:
        """Each kept proof's rigorous lower bound on ``c·x`` over the box (and the rows)."""
        n = self.count
        return box_bound(DualParts(self.row_sum[:n], self.row_abs[:n], self.rows[:n],  # type: ignore[arg-type]
                                   self.r[:n], self.r_err[:n]), lb, ub)

    def deduce(self, lb: np.ndarray, ub: np.ndarray, binaries: np.ndarray,
               prunes: Callable[[np.ndarray], np.ndarray]) -> tuple[bool, np.ndarray, np.ndarray]:
        """(whether a proof closes the box, binaries forced to 1, binaries forced to 0);
        ``prunes`` decides bounds exactly, elementwise."""
        none = np.zeros(0, dtype=np.int64)
        if not len(self):
            return False, none, none
        f = self.bounds(lb, ub)
        if prunes(f).any():
            return True, none, none
        r = self.r[:self.count, binaries]
        free = (lb[binaries] != ub[binaries]) & np.any(r != 0, axis=0)
        raised = np.nextafter(f[:, None] + np.abs(r[:, free]), -np.inf)  # the real bound, side flipped
        k, j = np.nonzero(prunes(raised))
        columns, signs = binaries[free][j], r[:, free][k, j]
        return False, columns[signs < 0], columns[signs > 0]


def propagate(lb: np.ndarray, ub: np.ndarray, deducers: Sequence[Callable[[np.ndarray, np.ndarray],
              tuple[bool, np.ndarray, np.ndarray]]]) -> bool:
    """Narrow ``lb``, ``ub`` (in place) by ``deducers`` until none finds more; False when
    the box holds no solution (a deducer closed it, or a binary was forced both ways)."""
    settled = np.count_nonzero(lb == ub)
    for _ in range(MAX_PASSES):
        before = settled
        for deduce in deducers:
            dead, ones, zeros = deduce(lb, ub)
            lb[ones], ub[zeros] = 1.0, 0.0
            if dead or np.any(lb[ones] > ub[ones]) or np.any(lb[zeros] > ub[zeros]):
                return False
        settled = np.count_nonzero(lb == ub)
        if settled == before:
            return True
    return True
