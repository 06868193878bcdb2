"""The strengthening step: a 0/1 Problem in, stronger part problems plus a postsolve map out.

Pieces (each switchable, see :class:`Pieces`):

- ``fixings``: cells every feasible point sets alike (exact tables, exact knapsack
  counts), and dominated cells: one that helps no row and costs >= 0 is fixed off (one
  that hurts no row and costs < 0 on). Some optimal solution survives every fixing.
- ``cuts``: cardinality cuts ``Σ_{a_j>0} M_j >= m`` (``m`` the fewest positive cells that
  can satisfy the row, given the fixings), lifted exactly over the rest of the support on
  rows small enough to tabulate.
- ``tables``: exact 0/1 pattern tables of rows with at most
  :data:`~smug_opt.strengthen.rows.MAX_TABLE_SUPPORT` cells, rows of one support
  intersected; they drive the lifting, the fixings and the implied rows.
- ``implied``: rows removed when others imply them: trivially satisfied rows, rows implied
  by the other rows of their support, and whole supports whose table the cuts plus a few
  no-good clauses describe exactly (their strict rows then leave the problem: no numerics).
- ``integer_rows``: the strict rows of a support that the cuts and clauses do not
  describe are replaced, one by one, by exact integer equivalents
  (:mod:`smug_opt.strengthen.integer_rows`): no strict real row is then left on it.
- ``components``: independent groups of cells become separate problems.

Every cut has integer coefficients and is checked against exact tables or exact knapsack
sums, so none removes a feasible point that the fixings keep; the optimum is unchanged.

The pieces share one working state (``_Work``): the fixings propagate to a fixpoint that
the cuts, the implied rows and the components then read. What strengthening takes and
gives (:class:`Pieces`, :class:`Part`, :class:`Strengthened`) is in
:mod:`smug_opt.strengthen.outcome`.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from smug_opt.ir import Problem, Sense
from smug_opt.strengthen.batched import MAX_CLAUSES, Derived, single_row_groups
from smug_opt.strengthen.cuts import clause, describes, lifted_cardinality
from smug_opt.strengthen.integer_rows import integer_row
from smug_opt.strengthen.outcome import Part, Pieces, Strengthened
from smug_opt.strengthen.rows import MAX_TABLE_SUPPORT, knapsack, normal_rows, pattern_bits, tables
from smug_opt.strengthen.split import split_parts

__all__ = ["AUTO_SHARE", "MAX_CLAUSES", "Part", "Pieces", "Strengthened", "strengthen",
           "worth_strengthening"]

_FIXPOINT_ROUNDS = 20

AUTO_SHARE = 0.1
"""``solve``'s default strengthens a 0/1 problem when at least this share of its rows are
strict and homogeneous (``a·x > 0`` or ``< 0``): their relaxation ``a·x >= 0`` holds for
the empty mask, so a solver's bound says nothing (bias-free conv stems at γ = 0), while the
exact cuts lift it (benchmarks/RESULTS.md, "Strengthening")."""


def worth_strengthening(problem: Problem) -> bool:
    """Whether ``solve``'s default (``strengthen=None``) strengthens ``problem``."""
    if problem.num_relus or problem.num_rows == 0 or not bool(problem.binary.all()):
        return False
    strict = (problem.senses == Sense.LT) | (problem.senses == Sense.GT)
    return bool(np.count_nonzero(strict & (problem.rhs == 0)) >= AUTO_SHARE * problem.num_rows)


def strengthen(problem: Problem, pieces: Pieces | None = None) -> Strengthened:
    """Strengthen a problem over 0/1 variables (others are handed on unchanged)."""
    pieces = pieces or Pieces()
    start = time.perf_counter()
    if problem.num_relus or not bool(problem.binary.all()):
        return _unchanged(problem, pieces, "not applied: the problem has continuous variables",
                          start)
    work = _Work(problem, pieces)
    if not work.propagate():
        return _unchanged(problem, pieces, f"not applied: {work.infeasible}; solved as stated",
                          start)
    work.derive()
    if not work.decided_rows_hold():
        return _unchanged(problem, pieces, f"not applied: {work.infeasible}; solved as stated",
                          start)
    work.stats["rows_removed"] = int(work.removed.sum())
    parts = work.parts()
    stats = {**work.stats, "pieces": list(pieces.enabled()), "parts": len(parts),
             "largest_part": max((p.columns.size for p in parts), default=0),
             "seconds": time.perf_counter() - start}
    return Strengthened(problem, tuple(parts), work.fixed.copy(), True, stats)


def _unchanged(problem: Problem, pieces: Pieces, note: str, start: float) -> Strengthened:
    part = Part(problem, np.arange(problem.num_vars), np.zeros(0, dtype=np.int64))
    return Strengthened(problem, (part,), np.full(problem.num_vars, -1, dtype=np.int8), False,
                        {"pieces": list(pieces.enabled()), "note": note, "parts": 1,
                         "seconds": time.perf_counter() - start})


@dataclass
class _Group:
    """Rows sharing one support of at most MAX_TABLE_SUPPORT cells, with their tables."""

    cells: np.ndarray
    rows: list[int]
    row_tables: np.ndarray  # (len(rows), 2**size)
    table: np.ndarray  # their intersection


class _Work:
    """The state of one strengthening run."""

    def __init__(self, problem: Problem, pieces: Pieces) -> None:
        self.problem = problem
        self.pieces = pieces
        self.rows = normal_rows(problem)
        n, m = problem.num_vars, problem.num_rows
        self.fixed = np.full(n, -1, dtype=np.int8)
        self.stamp = np.full(n, -1, dtype=np.int64)
        self.fixes = 0  # calls of _fix that fixed a cell
        self.removed = np.zeros(m, dtype=bool)
        self.cuts: list[tuple[np.ndarray, np.ndarray, int]] = []  # (cells, int coefs, bound)
        self.infeasible = ""
        self.stats: dict[str, int] = {"cuts": 0, "clauses": 0, "integer_rows": 0, "rows_removed": 0,
                                      "fixed_on": 0, "fixed_off": 0, "tables": 0}
        nnz = np.diff(self.rows.A.indptr)
        tabulated = (nnz <= MAX_TABLE_SUPPORT) & (nnz > 0) if pieces.tables else np.zeros(m, bool)
        self.groups = self._groups(np.flatnonzero(tabulated), nnz)
        self.wide = np.flatnonzero(~tabulated & ~self.rows.equality & (nnz > 0))
        self.stats["tables"] = len(self.groups)
        if pieces.fixings:
            self._dominance()

    def _groups(self, indices: np.ndarray, nnz: np.ndarray) -> list[_Group]:
        by_support: dict[tuple[int, ...], list[int]] = {}
        row_tables: dict[int, np.ndarray] = {}
        for size in np.unique(nnz[indices]).tolist():
            same = indices[nnz[indices] == size]
            for i, table in zip(same.tolist(), tables(self.rows, same, size), strict=True):
                by_support.setdefault(tuple(self.rows.row(i)[0].tolist()), []).append(i)
                row_tables[i] = table
        groups = []
        for cells, rows in by_support.items():
            stacked = np.array([row_tables[i] for i in rows])
            groups.append(_Group(np.array(cells, dtype=np.int64), rows, stacked,
                                 np.logical_and.reduce(stacked, axis=0)))
        return groups

    # ---------------------------------------------------------------- fixings
    def _fix(self, cells: np.ndarray, value: int) -> bool:
        new = cells[self.fixed[cells] == -1]
        if new.size:
            self.fixed[new] = value
            self.stamp[new] = self.fixes  # when each cell was fixed: what propagate re-reads
            self.fixes += 1
            self.stats["fixed_on" if value else "fixed_off"] += int(new.size)
        return bool(new.size)

    def _dominance(self) -> None:
        """Fix cells that no row needs (cost >= 0: off) or no row minds (cost < 0: on)."""
        coo = self.rows.A.tocoo()
        in_eq = self.rows.equality[coo.row]
        helps = np.zeros(self.problem.num_vars, dtype=bool)
        hurts = np.zeros(self.problem.num_vars, dtype=bool)
        helps[coo.col[(coo.data > 0) | in_eq]] = True
        hurts[coo.col[(coo.data < 0) | in_eq]] = True
        c = self.problem.objective
        self._fix(np.flatnonzero(~helps & (c >= 0)), 0)
        self._fix(np.flatnonzero(~hurts & helps & (c < 0)), 1)

    def _live(self, group: _Group) -> tuple[np.ndarray, np.ndarray]:
        """The pattern matrix of the group's support and which patterns are allowed and
        consistent with the fixings."""
        size = group.cells.size
        bits = pattern_bits(size)
        state = self.fixed[group.cells]
        if (state == -1).all():  # array methods: np.all's wrapper costs more on small arrays
            return bits, np.ones(bits.shape[0], dtype=bool)
        weight = 1 << np.arange(size)  # pattern p sets position k to bit k of p
        mask, on = int(weight[state != -1].sum()), int(weight[state == 1].sum())
        return bits, (_patterns(size) & mask) == on

    def propagate(self) -> bool:
        """Fix cells until nothing changes; False (with a reason) if a row cannot hold.

        A group or wide row none of whose cells was fixed since it was last read is
        skipped: reading it again would fix nothing new (the same fixings, in the same
        order, as reading every one every round)."""
        seen_group = np.full(len(self.groups), -1, dtype=np.int64)
        seen_wide = np.full(self.wide.size, -1, dtype=np.int64)
        for _ in range(_FIXPOINT_ROUNDS):
            changed = False
            for g, group in enumerate(self.groups):
                if seen_group[g] >= 0 and self.stamp[group.cells].max() < seen_group[g]:
                    continue
                seen_group[g] = self.fixes
                bits, consistent = self._live(group)
                live = bits[group.table & consistent]
                if live.shape[0] == 0:
                    self.infeasible = f"no 0/1 pattern satisfies row {group.rows[0]}'s support"
                    return False
                if self.pieces.fixings:
                    changed |= self._fix(group.cells[(live == 1).all(axis=0)], 1)
                    changed |= self._fix(group.cells[(live == 0).all(axis=0)], 0)
            for w, i in enumerate(self.wide.tolist()):
                cols, coefs = self.rows.row(i)
                if seen_wide[w] >= 0 and self.stamp[cols].max() < seen_wide[w]:
                    continue
                seen_wide[w] = self.fixes
                facts = knapsack(cols, coefs, self.rows.rhs[i], bool(self.rows.strict[i]),
                                 self.fixed)
                if facts.count is None:
                    self.infeasible = f"row {i} cannot hold"
                    return False
                if self.pieces.fixings:
                    changed |= self._fix(facts.forced_on, 1)
                    changed |= self._fix(facts.forced_off, 0)
            if not changed:
                return True
        return True

    # ------------------------------------------------------- cuts and rows
    def _remove(self, rows: Sequence[int]) -> None:
        self.removed[list(rows)] = True

    def derive(self) -> None:
        """Cuts, clauses and implied rows from the final fixings (groups of one row batched:
        :mod:`smug_opt.strengthen.batched`, with the cuts and implied rows on)."""
        batched = (single_row_groups(self.groups, self.rows, self.fixed)
                   if self.pieces.cuts and self.pieces.implied else {})
        for g, group in enumerate(self.groups):
            found = batched.get(g)
            if found is None:
                self._derive_group(group)
            else:
                self._take(group, found)
        for i in self.wide.tolist():
            cols, coefs = self.rows.row(i)
            facts = knapsack(cols, coefs, self.rows.rhs[i], bool(self.rows.strict[i]), self.fixed)
            if facts.trivial and self.pieces.implied:
                self._remove([i])
            elif self.pieces.cuts and facts.count:
                cells = facts.positive
                self._add_cut(cells, np.ones(cells.size, dtype=np.int64), facts.count)

    def _add_cut(self, cells: np.ndarray, coef: np.ndarray, bound: int, kind: str = "cuts") -> None:
        keep = coef != 0
        self.cuts.append((cells[keep], coef[keep], bound))
        self.stats[kind] += 1

    def _take(self, group: _Group, found: Derived) -> None:
        """A single-row group's batched derivation, recorded as :meth:`_derive_group` would."""
        for coef, bound in found.cuts:
            self._add_cut(group.cells, coef, bound)
        for coef, bound in found.clauses:
            self._add_cut(group.cells, coef, bound, "clauses")
        if found.described:
            self._remove(group.rows)
        elif self.pieces.integer_rows:
            bits, consistent = self._live(group)
            self._replace_by_integer_row(group, 0, bits, consistent,
                                         np.flatnonzero(self.fixed[group.cells] == -1))

    def _derive_group(self, group: _Group) -> None:
        bits, consistent = self._live(group)
        allowed = group.table & consistent
        live = bits[allowed]
        free = np.flatnonzero(self.fixed[group.cells] == -1)
        if free.size == 0:
            return  # every row of the group is decided by the fixings (and holds)
        cuts: list[tuple[np.ndarray, int]] = []
        if self.pieces.cuts:
            for i in group.rows:
                sign = self.rows.row(i)[1]  # the group's cells are the row's, in order
                base = free[sign[free] > 0]
                rest = free[sign[free] <= 0]
                lifted = lifted_cardinality(live, base, rest[np.argsort(sign[rest], kind="stable")])
                if lifted is not None:
                    cuts.append(lifted)
            whole = lifted_cardinality(live, free, np.zeros(0, dtype=np.int64))
            if whole is not None:
                cuts.append(whole)
            cuts = list({(tuple(c.tolist()), b): (c, b) for c, b in cuts}.values())
        for coef, bound in cuts:
            self._add_cut(group.cells, coef, bound)
        kept = self._implied(group, cuts, bits, allowed, consistent, free) \
            if self.pieces.implied else list(range(len(group.rows)))
        if self.pieces.integer_rows:
            for r in kept:
                self._replace_by_integer_row(group, r, bits, consistent, free)

    def _implied(self, group: _Group, cuts: list[tuple[np.ndarray, int]], bits: np.ndarray,
                 allowed: np.ndarray, consistent: np.ndarray, free: np.ndarray) -> list[int]:
        """Remove the group's rows that the cuts plus a few clauses, or its other rows,
        imply; the positions (in ``group.rows``) of the rows kept."""
        described = describes(cuts, bits) & consistent
        extra = np.flatnonzero(described & ~allowed)
        if extra.size <= MAX_CLAUSES:
            for p in extra.tolist():
                coef, bound = clause(bits[p], free)
                self._add_cut(group.cells, coef, bound, "clauses")
            self._remove(group.rows)
            return []
        kept = list(range(len(group.rows)))
        for r in range(len(group.rows)):
            others = [k for k in kept if k != r]
            rest = (np.logical_and.reduce(group.row_tables[others], axis=0) if others
                    else np.ones(bits.shape[0], dtype=bool)) & consistent
            if not (rest & ~group.row_tables[r]).any():
                kept.remove(r)
                self._remove([group.rows[r]])
        return kept

    def _replace_by_integer_row(self, group: _Group, r: int, bits: np.ndarray,
                                consistent: np.ndarray, free: np.ndarray) -> None:
        """Row ``r`` of ``group`` out, its exact integer equivalent (given the fixings) in."""
        found = integer_row(self.rows.row(group.rows[r])[1], bits, group.row_tables[r], consistent)
        if found is None:
            return
        w, t = found
        on = self.fixed[group.cells] == 1
        coef = np.zeros(w.size, dtype=np.int64)
        coef[free] = w[free]
        self._add_cut(group.cells, coef, t - int(w[on].sum()), "integer_rows")
        self._remove([group.rows[r]])

    def decided_rows_hold(self) -> bool:
        """Rows whose cells are all fixed must hold (exactly); else the problem is infeasible."""
        A = self.rows.A
        free_count = (A != 0).astype(np.int8) @ (self.fixed == -1).astype(np.int8)
        for i in np.flatnonzero((free_count == 0) & ~self.removed).tolist():
            cols, coefs = self.rows.row(i)
            total = sum((Fraction(float(a)) for a, j in zip(coefs, cols, strict=True)
                         if self.fixed[j] == 1), Fraction(0)) - Fraction(float(self.rows.rhs[i]))
            ok = (total == 0 if self.rows.equality[i]
                  else total > 0 if self.rows.strict[i] else total >= 0)
            if not ok:
                self.infeasible = f"the fixings violate row {i}"
                return False
            self.removed[i] = True
        return True

    # ------------------------------------------------------------------ parts
    def parts(self) -> list[Part]:
        free = self.fixed == -1
        kept = np.flatnonzero(~self.removed)
        constraint_cols = [self.rows.row(i)[0] for i in kept.tolist()]
        constraint_cols += [cells for cells, _, _ in self.cuts]
        n = self.problem.num_vars
        used = np.zeros(n, dtype=bool)
        for cols in constraint_cols:
            used[cols] = True
        # a free cell no constraint reads takes its cheaper value
        loose = np.flatnonzero(free & ~used)
        self.fixed[loose] = (self.problem.objective[loose] < 0).astype(np.int8)
        self.stats["unconstrained"] = int(loose.size)
        free = self.fixed == -1
        if not free.any():
            return []
        labels = (_components(constraint_cols, free, n) if self.pieces.components
                  else np.where(free, 0, -1))
        row_label = np.array([_label(labels, cols) for cols in constraint_cols[:kept.size]],
                             dtype=np.int64)
        cut_label = np.array([_label(labels, cols) for cols in constraint_cols[kept.size:]],
                             dtype=np.int64)
        return split_parts(self.problem, self.fixed, kept, self.cuts, labels, row_label, cut_label)


@functools.cache
def _patterns(size: int) -> np.ndarray:
    """The pattern numbers ``0 .. 2**size - 1`` (read-only)."""
    patterns = np.arange(2**size)
    patterns.setflags(write=False)
    return patterns


def _label(labels: np.ndarray, cols: np.ndarray) -> int:
    own = labels[cols]
    own = own[own >= 0]
    return int(own[0]) if own.size else -1


def _components(constraint_cols: list[np.ndarray], free: np.ndarray, n: int) -> np.ndarray:
    """A component label per free cell (-1 for fixed cells): cells sharing a constraint
    are in one component."""
    rows = np.concatenate([np.full(c.size, k) for k, c in enumerate(constraint_cols)]
                          + [np.zeros(0, dtype=np.int64)])
    cols = np.concatenate([*constraint_cols, np.zeros(0, dtype=np.int64)])
    on_free = free[cols]
    incidence = sp.csr_matrix((np.ones(int(on_free.sum())), (rows[on_free], cols[on_free])),
                              shape=(len(constraint_cols), n))
    _, labels = connected_components(incidence.T @ incidence, directed=False)
    out = np.where(free, labels, -1)
    # renumber to 0.. over free cells only
    _, dense = np.unique(out[free], return_inverse=True)
    out[free] = dense
    return out
