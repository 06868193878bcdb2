"""The strengthened rows split into independent part problems, all at once.

A part is one component of free cells with the rows and cuts that read it; cells fixed on
that its rows read are carried as variables with a row ``x >= 1``, cells fixed off drop
out. Every constraint's entries are sorted by part once and each part's matrix is cut out
of them (building each part through :class:`~smug_opt.ir.ProblemBuilder` cost ~10 ms of
scipy overhead a part: 1.1 s of a 1.7 s strengthening with 101 parts on paper-scale
k500-s1).
"""

from __future__ import annotations

import numpy as np

from smug_opt.frozen import freeze
from smug_opt.ir import Problem
from smug_opt.problem_arrays import Sense
from smug_opt.strengthen.outcome import Part, PartMatrix

__all__ = ["split_parts"]

Cut = tuple[np.ndarray, np.ndarray, int]  # (cells, integer coefficients, bound): Σ coefs·x >= bound


def split_parts(problem: Problem, fixed: np.ndarray, kept: np.ndarray, cuts: list[Cut],
                labels: np.ndarray, row_label: np.ndarray, cut_label: np.ndarray) -> list[Part]:
    """One :class:`Part` per label ``>= 0`` of ``labels`` (a part number per free cell, -1
    for fixed ones), holding the rows ``kept`` of ``problem`` and the ``cuts`` whose label
    (``row_label``, ``cut_label``) is its own, in that order, then the carried cells' rows;
    fewest matrix entries first (ties by label). Each part's problem is built on first use
    (:class:`PartMatrix`)."""
    kept_rows = problem.A[kept].tocoo()
    cut_sizes = np.array([c.size for c, _, _ in cuts], dtype=np.int64)
    entry_row = np.concatenate([kept_rows.row, kept.size + np.repeat(np.arange(len(cuts)), cut_sizes)])
    entry_col = np.concatenate([kept_rows.col, *(c for c, _, _ in cuts)]).astype(np.int64)
    entry_val = np.concatenate([kept_rows.data, *(np.asarray(v, dtype=np.float64) for _, v, _ in cuts)])
    senses = np.concatenate([problem.senses[kept], np.full(len(cuts), Sense.GE, dtype=problem.senses.dtype)])
    rhs = np.concatenate([problem.rhs[kept], np.array([float(b) for _, _, b in cuts], dtype=np.float64)])
    constraint_label = np.concatenate([row_label, cut_label])
    # constraints by part (stable: kept rows before cuts, each in order), entries by constraint
    order = np.argsort(constraint_label, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    entries = np.lexsort((entry_col, rank[entry_row]))
    entry_row, entry_col, entry_val = rank[entry_row[entries]], entry_col[entries], entry_val[entries]
    sorted_label = constraint_label[order]
    # a free cell's place among its part's columns (columns in increasing order)
    free = np.flatnonzero(labels >= 0)
    by_part = free[np.argsort(labels[free], kind="stable")]
    place = np.full(problem.num_vars, -1, dtype=np.int64)
    counts = np.bincount(labels[free], minlength=int(labels.max(initial=-1)) + 1)
    starts = np.concatenate([[0], np.cumsum(counts)])
    place[by_part] = np.arange(by_part.size) - np.repeat(starts[:-1], counts)
    parts, sizes = [], []
    for label in range(counts.size):
        columns = by_part[starts[label]:starts[label + 1]]
        first, last = np.searchsorted(sorted_label, [label, label + 1])
        lo, hi = np.searchsorted(entry_row, [first, last])
        rows, cols, vals = entry_row[lo:hi] - first, entry_col[lo:hi], entry_val[lo:hi]
        on = fixed[cols] == 1
        carried = np.unique(cols[on])
        keep = fixed[cols] != 0
        at = np.where(on, columns.size + np.searchsorted(carried, cols), place[cols])[keep]
        m, k = int(last - first), carried.size
        width = columns.size + k
        indptr, indices, data = _csr_arrays(rows[keep], at, vals[keep], m, k, columns.size)
        matrix = PartMatrix(indptr, indices, data,
                            freeze(np.concatenate([senses[order[first:last]],
                                                   np.full(k, Sense.GE, dtype=senses.dtype)])),
                            freeze(np.concatenate([rhs[order[first:last]], np.ones(k)])),
                            freeze(_objective(problem.objective, columns, width)),
                            problem.metadata, problem.kinds.dtype)
        parts.append(Part(matrix, columns, carried))
        sizes.append(data.size)
    return [parts[i] for i in np.argsort(np.array(sizes, dtype=np.int64), kind="stable")]


def _objective(c: np.ndarray, columns: np.ndarray, width: int) -> np.ndarray:
    objective = np.zeros(width)
    objective[:columns.size] = c[columns]
    return objective


def _csr_arrays(rows: np.ndarray, cols: np.ndarray, vals: np.ndarray, m: int, k: int, free: int
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A part's ``(m + k, free + k)`` matrix as read-only CSR arrays ``(indptr, indices,
    data)`` from its row entries (``rows`` sorted) plus the ``k`` carried cells' rows
    ``x >= 1``, entries sorted by column within each row."""
    rows = np.concatenate([rows, m + np.arange(k)])
    cols = np.concatenate([cols, free + np.arange(k)])
    order = np.lexsort((cols, rows))
    indptr = np.zeros(m + k + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=m + k), out=indptr[1:])
    return freeze(indptr), freeze(cols[order]), freeze(np.concatenate([vals, np.ones(k)])[order])
