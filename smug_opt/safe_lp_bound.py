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

import numpy as np
import scipy.sparse as sp

from smug_opt.bounds.lp import lp_solver, row_range, safe_min
from smug_opt.deadline import Deadline
from smug_opt.errors import ParameterError
from smug_opt.exact import dot_error_bound, float_down
from smug_opt.ir import Problem

__all__ = ["safe_lp_bound", "strengthened_safe_lp_bound"]


def safe_lp_bound(problem: Problem, *, seconds: float, backend: str | None = None) -> float | None:
    """A lower bound on the optimum of ``problem`` that holds exactly, or None when the LP
    solver gave no multipliers within ``seconds`` (or called the relaxation infeasible).
    ``backend`` provides the LP solver (None: :func:`~smug_opt.bounds.lp.lp_solver` picks
    one that declares ``capabilities.lp``)."""
    bounds = _safe_lp_bounds([problem], seconds, backend)
    return None if bounds is None else bounds[0]


def _safe_lp_bounds(problems: Sequence[Problem], seconds: float,
                    backend: str | None) -> list[float] | None:
    """:func:`safe_lp_bound` of each of ``problems`` (independent: no variable shared), from
    one LP over all of them (block-diagonal) whose multipliers, cut back to each problem's
    rows, bound each one rigorously; None when the LP solver gave no multipliers.

    The LP is ``min t`` with an extra row ``c·x − t = 0`` (an LP solver here minimises one
    column); its multipliers ``y`` on the problems' rows are those of ``min c·x``, and any
    ``y`` gives a bound that holds exactly (:func:`~smug_opt.bounds.lp.safe_min` with ``c``)."""
    ranges = [row_range(p) for p in problems]
    row_lo = np.concatenate([lo for lo, _ in ranges])
    row_hi = np.concatenate([hi for _, hi in ranges])
    c = np.concatenate([p.objective for p in problems])
    lb = np.concatenate([p.lb for p in problems])
    ub = np.concatenate([p.ub for p in problems])
    n = c.size
    reach = np.abs(c) * np.maximum(np.abs(lb), np.abs(ub))
    span = float(reach.sum() + dot_error_bound(n, reach.sum())) + 1.0  # |c·x| <= span: t's box cuts nothing
    with_t = _with_objective_row(problems, c)
    lp = lp_solver(backend)
    if not lp.load(with_t, np.append(row_lo, 0.0), np.append(row_hi, 0.0),
                   np.append(lb, -span), np.append(ub, span), seconds):
        return None
    y = lp.minimize(n, 1.0, seconds)
    if y is None:
        return None
    bounds, row, col = [], 0, 0
    for p in problems:
        rows, cols = slice(row, row + p.num_rows), slice(col, col + p.num_vars)
        At = p.A.T.tocsr()
        bounds.append(safe_min(p.objective, At, abs(At).tocsr(), row_lo[rows], row_hi[rows],
                               lb[cols], ub[cols], y[rows]))
        row, col = row + p.num_rows, col + p.num_vars
    return bounds


def _with_objective_row(problems: Sequence[Problem], c: np.ndarray) -> sp.csr_matrix:
    """The problems' matrices block-diagonally, then a column ``t`` and the row
    ``c·x − t``: cut out of their CSR arrays directly (scipy's ``block_diag``, ``hstack``
    and ``vstack`` cost more than the LP on small problems)."""
    objective = np.flatnonzero(c)
    indptr, indices, data = [np.zeros(1, dtype=np.int64)], [], []
    nnz = col = 0
    for p in problems:
        A = p.A
        indptr.append(A.indptr[1:].astype(np.int64) + nnz)
        indices.append(A.indices.astype(np.int64) + col)
        data.append(A.data)
        nnz, col = nnz + A.nnz, col + p.num_vars
    indptr.append(np.array([nnz + objective.size + 1], dtype=np.int64))
    indices += [objective, np.array([col], dtype=np.int64)]
    data += [c[objective], np.array([-1.0])]
    rows = sum(p.num_rows for p in problems) + 1
    return sp.csr_matrix((np.concatenate(data), np.concatenate(indices), np.concatenate(indptr)),
                         shape=(rows, col + 1))


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
    bounds = _safe_lp_bounds([part.problem for part in s.parts], left(), backend) if s.parts else []
    if bounds is None:
        return None
    for part, bound in zip(s.parts, bounds, strict=True):
        if part.problem.integral_objective and math.isfinite(bound):
            bound = math.ceil(bound)  # the part's optimum is an integer: at least its bound rounded up
        total += Fraction(bound)
    return float_down(total)
