"""The real rows an integer form scales and rounds (:mod:`smug_opt.bridges.integer`): the
problem's rows, unscaled, then the rows that define each ReLU output, as big-M rows with
phase binaries (:func:`big_m_rows`) or as ``y = max(Z, 0)`` over a pre-activation column
defined by one row (:func:`max_rows`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from smug_opt.bounds.lp import row_range
from smug_opt.bridges.intervals import relu_preactivation_bounds
from smug_opt.bridges.milp import to_milp
from smug_opt.ir import Problem

__all__ = ["RealRows", "big_m_rows", "max_rows"]


@dataclass(frozen=True, eq=False)
class RealRows:
    """Real rows ``row_lo <= A·x <= row_hi`` before rounding: the problem's rows first,
    then the rows that define the ReLU outputs."""

    A: sp.csr_matrix
    row_lo: np.ndarray
    row_hi: np.ndarray
    col_lb: np.ndarray
    col_ub: np.ndarray
    integer: np.ndarray
    objective: np.ndarray
    defines: list[tuple[int, list[int]]]  # per ReLU: (the column that measures its rows' slack, rows)
    maxes: tuple[tuple[int, int], ...]  # (out, in): X_out = max(X_in, 0)


def big_m_rows(problem: Problem) -> RealRows:
    """``to_milp`` at level 0: ReLUs as big-M rows with phase binaries."""
    form = to_milp(problem, 0, widen=False)
    z_lo, z_hi, _, _ = relu_preactivation_bounds(problem)
    defines, at = [], problem.num_rows
    for y, lo, hi in zip(problem.relu_out.tolist(), z_lo.tolist(), z_hi.tolist(), strict=True):
        count = 0 if hi <= 0 else 1 if lo >= 0 else 3  # the rows to_milp writes, in ReLU order
        defines.append((y, list(range(at, at + count))))
        at += count
    m = problem.num_rows
    if at != form.num_rows:
        raise AssertionError(f"to_milp wrote {form.num_rows - m} ReLU rows, expected {at - m}")
    # the problem's own rows, unscaled: to_milp's power-of-two row scaling can underflow
    # tiny right-hand sides (5e-324 next to coefficients of 1e12) to 0
    A = sp.vstack([_padded(problem.A, form.num_cols), form.A[m:]], format="csr")
    lo, hi = row_range(problem)  # strict rows as non-strict: strictness is applied when rounding
    return RealRows(A, np.concatenate([lo, form.row_lo[m:]]), np.concatenate([hi, form.row_hi[m:]]),
                     form.col_lb, form.col_ub, form.integer, form.objective, defines, ())


def _padded(A: sp.csr_matrix, num_cols: int) -> sp.csr_matrix:
    out = sp.csr_matrix(A, copy=True)
    out.resize((A.shape[0], num_cols))
    return out


def max_rows(problem: Problem) -> RealRows:
    """ReLUs as ``y = max(Z, 0)`` over a pre-activation column ``Z`` defined by one row."""
    n, m = problem.num_vars, problem.num_rows
    z_lo, z_hi, lb, ub = relu_preactivation_bounds(problem)
    R = problem.relu_in
    assert R is not None
    rows: list[tuple[np.ndarray, np.ndarray, float]] = []
    z_bounds: list[tuple[float, float]] = []
    defines: list[tuple[int, list[int]]] = []
    maxes = []
    for r, y in enumerate(problem.relu_out.tolist()):
        if z_hi[r] <= 0:
            lb[y], ub[y] = max(lb[y], 0.0), min(ub[y], 0.0)
            defines.append((y, []))
            continue
        col = y if z_lo[r] >= 0 else n + len(z_bounds)
        if col != y:
            z_bounds.append((z_lo[r], z_hi[r]))
            maxes.append((y, col))
        start, stop = R.indptr[r], R.indptr[r + 1]
        rows.append((np.concatenate([[col], R.indices[start:stop]]),
                     np.concatenate([[1.0], -R.data[start:stop]]), float(problem.relu_const[r])))
        defines.append((col, [m + len(rows) - 1]))
    total = n + len(z_bounds)
    A = _padded(problem.A, total)
    if rows:
        block = sp.csr_matrix((np.concatenate([v for _, v, _ in rows]),
                               (np.repeat(np.arange(len(rows)), [c.size for c, _, _ in rows]),
                                np.concatenate([c for c, _, _ in rows]))), shape=(len(rows), total))
        A = sp.vstack([A, block], format="csr")
    lo, hi = row_range(problem)
    consts = np.array([c for _, _, c in rows])
    zl = np.array([b[0] for b in z_bounds])
    zu = np.array([b[1] for b in z_bounds])
    return RealRows(
        A, np.concatenate([lo, consts]), np.concatenate([hi, consts]),
        np.concatenate([lb, zl]), np.concatenate([ub, zu]),
        np.concatenate([problem.binary, np.zeros(len(z_bounds), dtype=bool)]),
        np.concatenate([problem.objective, np.zeros(len(z_bounds))]), defines, tuple(maxes),
    )
