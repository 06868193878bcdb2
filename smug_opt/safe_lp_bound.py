"""A rigorous lower bound on a problem's optimum from a floating-point LP solver's duals.

The LP relaxation (binaries in [0, 1], strict rows as non-strict, ReLUs dropped: each a
relaxation) is solved by a backend's LP solver (HiGHS by default) with one extra column
``t`` and row ``c·x − t = 0``; its row multipliers, whatever their accuracy, give a bound
on ``min t`` that holds in exact arithmetic once evaluated with outward error bounds
(Neumaier and Shcherbina 2004; :func:`smug_opt.bounds.lp.safe_min`). With an integral
objective a bound above ``v − 1`` proves a solution of objective ``v`` optimal.

:func:`strengthened_safe_lp_bound` bounds the parts of :func:`smug_opt.strengthen.strengthen`
instead: its cuts and fixings are derived exactly (the optimum is unchanged), and they lift
the LP bound where it matters (cardinality cuts on strict rows).
"""

from __future__ import annotations

import math
import warnings
from fractions import Fraction

import numpy as np
import scipy.sparse as sp

from smug_opt.bounds.lp import lp_solver, safe_min
from smug_opt.deadline import Deadline
from smug_opt.errors import ParameterError
from smug_opt.exact import dot_error_bound, float_down
from smug_opt.ir import Problem, Sense

__all__ = ["safe_lp_bound", "strengthened_safe_lp_bound"]


def safe_lp_bound(problem: Problem, *, seconds: float, backend: str | None = None) -> float | None:
    """A lower bound on the optimum of ``problem`` that holds exactly, or None when the LP
    solver gave no multipliers within ``seconds`` (or called the relaxation infeasible).
    ``backend`` provides the LP solver (None: :func:`~smug_opt.bounds.lp.lp_solver` picks
    one that declares ``capabilities.lp``)."""
    n, c = problem.num_vars, problem.objective
    senses, rhs = problem.senses, problem.rhs
    at_least = np.isin(senses, (Sense.GE, Sense.GT, Sense.EQ))
    at_most = np.isin(senses, (Sense.LE, Sense.LT, Sense.EQ))
    row_lo = np.concatenate([np.where(at_least, rhs, -np.inf), [0.0]])
    row_hi = np.concatenate([np.where(at_most, rhs, np.inf), [0.0]])
    A = sp.vstack([sp.hstack([problem.A, sp.csr_matrix((problem.num_rows, 1))]),
                   sp.csr_matrix(np.concatenate([c, [-1.0]])[None, :])], format="csr")
    reach = np.abs(c) * np.maximum(np.abs(problem.lb), np.abs(problem.ub))
    span = float(reach.sum() + dot_error_bound(n, reach.sum())) + 1.0  # |c·x| <= span: t's box cuts nothing
    col_lb = np.concatenate([problem.lb, [-span]])
    col_ub = np.concatenate([problem.ub, [span]])
    lp = lp_solver(backend)
    if not lp.load(A, row_lo, row_hi, col_lb, col_ub, seconds):
        return None
    y = lp.minimize(n, 1.0, seconds)
    if y is None:
        return None
    objective = np.zeros(n + 1)
    objective[n] = 1.0
    At = A.T.tocsr()
    return safe_min(objective, At, abs(At).tocsr(), row_lo, row_hi, col_lb, col_ub, y)


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
    for part in s.parts:
        bound = safe_lp_bound(part.problem, seconds=left(), backend=backend)
        if bound is None:
            return None
        if part.problem.integral_objective and math.isfinite(bound):
            bound = math.ceil(bound)  # the part's optimum is an integer: at least its bound rounded up
        total += Fraction(bound)
    return float_down(total)
