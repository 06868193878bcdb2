"""A rigorous lower bound on a problem's optimum from a floating-point LP solver's duals.

The LP relaxation (binaries in [0, 1], strict rows as non-strict, ReLUs dropped: each a
relaxation) is solved by a backend's LP solver (HiGHS by default) with one extra column
``t`` and row ``c·x − t = 0``; its multipliers on the problem's rows, whatever their
accuracy, give a bound on ``min c·x`` that holds in exact arithmetic once evaluated with
outward error bounds (Neumaier and Shcherbina 2004; :func:`smug_opt.bounds.lp.safe_min`).
With an integral objective a bound above ``v − 1`` proves a solution of objective ``v`` optimal.

:func:`strengthened_safe_lp_bound` bounds the parts of :func:`smug_opt.strengthen.strengthen`
instead: its cuts and fixings are derived exactly (the optimum is unchanged), and they lift
the LP bound where it matters (cardinality cuts on strict rows). The parts share one LP
(block-diagonal): one solver start instead of one per part (98 parts on paper-scale k1000-s0).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from fractions import Fraction
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from smug_opt.bounds.lp import box_bound, dual_parts_by_block, lp_solver, sense_range
from smug_opt.deadline import Deadline
from smug_opt.errors import ParameterError
from smug_opt.exact import dot_error_bound, float_down
from smug_opt.ir import Problem
from smug_opt.strengthen.outcome import PartMatrix

__all__ = ["safe_lp_bound", "strengthened_safe_lp_bound"]


class _Block(NamedTuple):
    """One problem's LP relaxation as arrays: its matrix in CSR form, rows' senses and
    right-hand sides, objective and column box."""

    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray
    senses: np.ndarray
    rhs: np.ndarray
    c: np.ndarray
    lb: np.ndarray
    ub: np.ndarray
    matrix: sp.csr_matrix | None = None  # the arrays' matrix where one is at hand

    @classmethod
    def of_problem(cls, problem: Problem) -> _Block:
        A = problem.A
        return cls(A.indptr, A.indices, A.data, problem.senses, problem.rhs, problem.objective,
                   problem.lb, problem.ub, A)

    @classmethod
    def of_part(cls, part: PartMatrix) -> _Block:
        n = part.num_vars
        return cls(part.indptr, part.indices, part.data, part.senses, part.rhs, part.objective,
                   np.zeros(n), np.ones(n))


def safe_lp_bound(problem: Problem, *, seconds: float, backend: str | None = None) -> float | None:
    """A lower bound on the optimum of ``problem`` that holds exactly, or None when the LP
    solver gave no multipliers within ``seconds`` (or called the relaxation infeasible).
    ``backend`` provides the LP solver (None: :func:`~smug_opt.bounds.lp.lp_solver` picks
    one that declares ``capabilities.lp``)."""
    bounds = _safe_lp_bounds([_Block.of_problem(problem)], seconds, backend)
    return None if bounds is None else bounds[0]


def _safe_lp_bounds(blocks: Sequence[_Block], seconds: float, backend: str | None) -> list[float] | None:
    """:func:`safe_lp_bound` of each of ``blocks`` (independent problems: no variable
    shared), from one LP over all of them (block-diagonal) whose multipliers, cut back to
    each block's rows, bound each one rigorously; None when the LP solver gave no multipliers.

    The LP is ``min t`` with an extra row ``c·x − t = 0`` (an LP solver here minimises one
    column); its multipliers ``y`` on the problems' rows are those of ``min c·x``, and any
    ``y`` gives a bound that holds exactly (:func:`~smug_opt.bounds.lp.safe_min` with ``c``),
    evaluated for every block in one pass (:func:`~smug_opt.bounds.lp.dual_parts_by_block`:
    each bound is what :func:`~smug_opt.bounds.lp.safe_min` gives on its block alone)."""
    row_lo, row_hi = sense_range(np.concatenate([b.senses for b in blocks]),
                                 np.concatenate([b.rhs for b in blocks]))
    c = np.concatenate([b.c for b in blocks])
    lb = np.concatenate([b.lb for b in blocks])
    ub = np.concatenate([b.ub for b in blocks])
    n, m = c.size, row_lo.size
    reach = np.abs(c) * np.maximum(np.abs(lb), np.abs(ub))
    span = float(reach.sum() + dot_error_bound(n, reach.sum())) + 1.0  # |c·x| <= span: t's box cuts nothing
    A = _block_diagonal(blocks, n)
    with_t = _with_objective_row(A, c)
    lp = lp_solver(backend)
    if not lp.load(with_t, np.append(row_lo, 0.0), np.append(row_hi, 0.0),
                   np.append(lb, -span), np.append(ub, span), seconds):
        return None
    y = lp.minimize(n, 1.0, seconds)
    if y is None:
        return None
    At = A.T.tocsr()
    row_starts = np.cumsum([0] + [b.rhs.size for b in blocks])
    col_starts = np.cumsum([0] + [b.c.size for b in blocks])
    parts = dual_parts_by_block(c, At, abs(At).tocsr(), row_lo, row_hi, y[:m], row_starts, col_starts)
    return [float(box_bound(part, lb[col_starts[k]:col_starts[k + 1]], ub[col_starts[k]:col_starts[k + 1]]))
            for k, part in enumerate(parts)]


def _block_diagonal(blocks: Sequence[_Block], n: int) -> sp.csr_matrix:
    """The blocks' matrices block-diagonally, cut out of their CSR arrays directly (scipy's
    ``block_diag`` costs more than the LP on small problems); a single block's own matrix."""
    if len(blocks) == 1 and blocks[0].matrix is not None:
        return blocks[0].matrix
    indptr, indices = [np.zeros(1, dtype=np.int64)], []
    nnz = col = 0
    for b in blocks:
        indptr.append(b.indptr[1:].astype(np.int64) + nnz)
        indices.append(b.indices.astype(np.int64) + col)
        nnz, col = nnz + b.data.size, col + b.c.size
    data = np.concatenate([b.data for b in blocks])
    return sp.csr_matrix((data, np.concatenate(indices), np.concatenate(indptr)),
                         shape=(sum(b.rhs.size for b in blocks), n))


def _with_objective_row(A: sp.csr_matrix, c: np.ndarray) -> sp.csr_matrix:
    """``A`` with a column ``t`` and the row ``c·x − t`` below it."""
    objective = np.flatnonzero(c)
    n, nnz = c.size, A.data.size
    indptr = np.concatenate([A.indptr.astype(np.int64), [nnz + objective.size + 1]])
    indices = np.concatenate([A.indices.astype(np.int64), objective, [n]])
    data = np.concatenate([A.data, c[objective], [-1.0]])
    return sp.csr_matrix((data, indices, indptr), shape=(A.shape[0] + 1, n + 1))


def strengthened_safe_lp_bound(problem: Problem, *, deadline: Deadline | None = None,
                               backend: str | None = None, seconds: float | None = None) -> float | None:
    """:func:`safe_lp_bound` of the strengthened problem: the exact cost of the cells it
    fixes on plus each part's bound, rounded up for a part whose objective is integral (its
    optimum is an integer), so the sum proves what the parts' roots prove one by one (None
    when a part has none by ``deadline``, which must have a limit). ``seconds`` is the
    deprecated old keyword (a DeprecationWarning): pass ``deadline=Deadline.after(seconds)``."""
    from smug_opt.strengthen.reuse import strengthen_reused

    if seconds is not None:
        warnings.warn("strengthened_safe_lp_bound(seconds=...) is deprecated: pass "
                      "deadline=Deadline.after(seconds)", DeprecationWarning, stacklevel=2)
        if deadline is not None:
            raise ParameterError("seconds", "is deadline's deprecated old form: give deadline only")
        deadline = Deadline.after(seconds)
    if deadline is None or deadline.at is None:
        raise ParameterError("deadline", "must be a Deadline with a time limit")
    limit: Deadline = deadline

    def left() -> float:
        seconds = limit.seconds_left(0.0)
        return 0.0 if seconds is None else seconds  # never None: the deadline has a limit

    s = strengthen_reused(problem)
    if not s.applied:
        return safe_lp_bound(problem, seconds=left(), backend=backend)
    total = s.offset
    matrices = [part.matrix for part in s.parts]  # the parts' problems are not built
    bounds = _safe_lp_bounds([_Block.of_part(m) for m in matrices], left(), backend) if matrices else []
    if bounds is None:
        return None
    for matrix, bound in zip(matrices, bounds, strict=True):
        if matrix.integral_objective and math.isfinite(bound):
            bound = math.ceil(bound)  # the part's optimum is an integer: at least its bound rounded up
        total += Fraction(bound)
    return float_down(total)
