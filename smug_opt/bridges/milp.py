"""Lowering to a plain MILP: non-strict two-sided rows, bounds, integrality, big-M ReLUs.

Every row is scaled by a power of two (exact) so its largest coefficient is about 1.
Strict rows become non-strict with a margin chosen by the tightening level:

* level 0: no margin (``a·x > b`` becomes ``a·x >= b``), rows widened by the solver's
  tolerance when the binaries determine everything (:data:`LEVEL0_WIDENING`): a
  relaxation, so a proven optimum is a valid lower bound on the strict problem;
* level L >= 1: strict rows are tightened by ``strict_margin(L, ||a||_1)`` and non-strict
  rows by the margin of level L-1. The margin covers the solver's feasibility tolerance
  and the integrality tolerance times the row's 1-norm (rounding a binary by ``tau``
  moves the activity by at most ``tau·||a||_1``).

ReLUs ``y = max(0, z)`` use the bounds of :func:`relu_preactivation_bounds`: ``u <= 0``
fixes ``y = 0``, ``l >= 0`` makes ``y = z`` (no binary: stable-neuron elimination), else a
phase binary ``a`` with ``y >= z``, ``y <= z - l(1 - a)``, ``y <= u·a``, ``y >= 0``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from smug_opt.bridges.intervals import relu_preactivation_bounds
from smug_opt.ir import Problem, Sense, VarKind

__all__ = ["MAX_SOLVER_COST", "MilpForm", "SolverObjective", "big_m_relus", "solver_objective",
           "start_vector",
           "strict_margin", "to_milp"]

_MARGIN_BASE = 1e-7

LEVEL0_WIDENING = 1e-7
"""At level 0, when the binaries determine every other variable, every (scaled) row, the
big-M ReLU rows included, is widened outward by ``1e-7·(1 + ||a||_1)``, the solvers'
primal feasibility tolerance: a binary assignment that meets a row exactly (a tie, or a
ReLU at its bound) is then strictly inside the solver's model rather than on its
tolerance edge, where HiGHS and CBC can call a feasible tie infeasible or cut off the
optimum (cases R1, R4 and R14 of ``tests/wrong_claims.py``, F2 of ``benchmarks/campaign``).
Still a relaxation: the exact check
recomputes ReLU outputs from the binaries and decides every assignment returned."""


def strict_margin(level: int, row_norm1: np.ndarray | float) -> np.ndarray | float:
    """The margin a strict row with scaled 1-norm ``row_norm1`` gets at ``level``."""
    if level <= 0:
        return 0.0 * np.asarray(row_norm1) if isinstance(row_norm1, np.ndarray) else 0.0
    return _MARGIN_BASE * 10.0**level * (1.0 + np.asarray(row_norm1) * 1e-1)


@dataclass(frozen=True, eq=False)
class MilpForm:
    """``min c·v`` s.t. ``row_lo <= A v <= row_hi``, ``col_lb <= v <= col_ub``, integrality.

    The first ``num_problem_vars`` columns are the problem's variables in order; the rest
    are ReLU phase binaries added by the big-M lowering.
    """

    A: sp.csr_matrix
    row_lo: np.ndarray
    row_hi: np.ndarray
    col_lb: np.ndarray
    col_ub: np.ndarray
    integer: np.ndarray
    objective: np.ndarray
    num_problem_vars: int
    level: int
    phase_relus: np.ndarray  # the ReLU (index into the problem's) of each phase binary

    @property
    def num_rows(self) -> int:
        return int(self.A.shape[0])

    @property
    def num_cols(self) -> int:
        return int(self.A.shape[1])

    def problem_values(self, values: np.ndarray) -> np.ndarray:
        """The problem's variables out of a full column vector."""
        return np.asarray(values, dtype=np.float64)[: self.num_problem_vars]


MAX_SOLVER_COST = 2.0**20
"""Objective costs handed to a float solver are scaled by a power of two so the largest is
at most this: HiGHS reads a cost of 1e20 as infinite (its ``infinite_cost``) and CBC
called ``x0 + x1 >= 1`` infeasible with costs of 1e15-1e17."""


@dataclass(frozen=True)
class SolverObjective:
    """The objective as a float solver gets it: ``costs = objective·2**-exponent`` (rounded),
    and ``error``, a bound on ``|objective·x - 2**exponent·costs·x|`` over the columns'
    bounds; a solver's bound ``b`` on ``costs·x`` proves ``2**exponent·b - error``."""

    costs: np.ndarray
    exponent: int
    error: float

    def unscale(self, value: float) -> float:
        """A solver's objective value or bound, back in the problem's units."""
        return math.ldexp(value, self.exponent)

    def problem_bound(self, solver_bound: float) -> float:
        """A valid lower bound on the problem's objective from the solver's bound."""
        return self.unscale(solver_bound) - self.error


def solver_objective(form: MilpForm, written: Callable[[np.ndarray], np.ndarray] | None = None
                     ) -> SolverObjective:
    """``form``'s objective scaled for a float solver (see :data:`MAX_SOLVER_COST`);
    ``written`` maps the scaled costs to what the solver will actually read (e.g. a model
    file's decimal digits), and its rounding counts in ``error``."""
    c = form.objective
    top = float(np.max(np.abs(c), initial=0.0))
    exponent = max(int(np.frexp(top)[1]) - int(np.frexp(MAX_SOLVER_COST)[1]) + 1, 0) if top else 0
    costs = np.ldexp(c, -exponent)
    if written is not None:
        costs = np.asarray(written(costs), dtype=np.float64)
    reach = np.maximum(np.abs(form.col_lb), np.abs(form.col_ub))
    lost = np.abs(c - np.ldexp(costs, exponent))  # exact unless it underflows
    tiny = (c != 0) & (np.abs(np.ldexp(c, -exponent)) < 2.0**-1022)
    lost = np.where(tiny, np.abs(c), lost)
    error = float(lost @ reach) * (1 + 1e-12) if lost.any() else 0.0
    return SolverObjective(costs, exponent, error)


def _pow2_row_exponents(A: sp.csr_matrix) -> np.ndarray:
    """Per row the ``k`` that brings its largest coefficient to about 1 (``2**k`` itself
    may not be a float: ``k`` is 1030 for a subnormal row)."""
    amax = np.zeros(A.shape[0])
    nz = np.diff(A.indptr) > 0
    if A.nnz:
        amax[nz] = np.maximum.reduceat(np.abs(A.data), A.indptr[:-1][nz])
    nz &= amax > 0
    k = np.zeros(A.shape[0], dtype=np.int64)
    mantissa, exponent = np.frexp(amax[nz])  # amax = mantissa·2**exponent, mantissa in [0.5, 1)
    k[nz] = -(exponent - (mantissa < np.sqrt(0.5)))  # -round(log2(amax))
    return k


def _scale_rows(A: sp.csr_matrix, lo: np.ndarray, hi: np.ndarray,
                k: np.ndarray) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray]:
    """Rows times ``2**k`` with ``ldexp`` (exact unless a value leaves float range: a
    bound that overflows becomes ±inf, which :func:`_clip_to_activity` reads as beyond any
    activity)."""
    A = sp.csr_matrix(A, copy=True)
    A.data = np.ldexp(A.data, np.repeat(k, np.diff(A.indptr)))
    with np.errstate(over="ignore"):
        return A, np.ldexp(lo, k), np.ldexp(hi, k)


TINY_COEFFICIENT = 1e-7
"""Scaled coefficients below this (the solvers' feasibility tolerance) are dropped: solvers
drop or mistreat them silently (HiGHS's presolve proved a wrong optimum with a 3.7e-9
coefficient beside 1.5, CBC called a row with a 1.4e-8 one infeasible); their largest
possible contribution moves the row's bounds instead."""


def _drop_tiny(
    A: sp.csr_matrix, lo: np.ndarray, hi: np.ndarray, reach: np.ndarray, level: int, keep: np.ndarray
) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray]:
    """Remove tiny coefficients, moving each row's bounds by the most they could add:
    outward at level 0 (still a relaxation), inward above (still a restriction).
    Rows flagged in ``keep`` (equalities above level 0: they cannot be tightened) are left
    as they are."""
    n_cols = A.shape[1]
    rows = np.repeat(np.arange(A.shape[0]), np.diff(A.indptr))
    tiny = (np.abs(A.data) < TINY_COEFFICIENT) & ~keep[rows]
    if not tiny.any():
        return A, lo, hi
    reach_full = np.concatenate([reach, np.ones(n_cols - reach.size)])
    mass = np.bincount(rows[tiny], weights=np.abs(A.data[tiny]) * reach_full[A.indices[tiny]],
                       minlength=A.shape[0]) * (1 + 1e-12)
    direction = -1.0 if level == 0 else 1.0
    lo = lo + direction * mass
    hi = hi - direction * mass
    A = A.copy()
    A.data[tiny] = 0.0
    A.eliminate_zeros()
    return A, lo, hi


def _clip_to_activity(
    A: sp.csr_matrix, lo: np.ndarray, hi: np.ndarray, col_lb: np.ndarray, col_ub: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Row bounds no further than 1 beyond the row's activity range (same feasible set).

    A side that every point satisfies by a clear margin becomes infinite; a side no point
    can meet is pulled in to (activity bound ± 1), still unmeetable. Keeps huge scaled
    bounds (tiny coefficients beside a larger right-hand side) away from a solver's
    notion of infinity.
    """
    pos, neg = A.maximum(0), A.minimum(0)
    amax = pos @ col_ub + neg @ col_lb
    amin = pos @ col_lb + neg @ col_ub
    slack = 1e-9 * (abs(A) @ np.maximum(np.abs(col_lb), np.abs(col_ub))) + 1.0
    lo = np.where(lo < amin - slack, -np.inf, np.minimum(lo, amax + slack))
    hi = np.where(hi > amax + slack, np.inf, np.maximum(hi, amin - slack))
    return lo, hi


def big_m_relus(problem: Problem, z_lo: np.ndarray, z_hi: np.ndarray, lb: np.ndarray,
                ub: np.ndarray) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray, int]:
    """The ReLUs as unscaled MILP rows ``lo <= block · v <= hi`` over the problem's
    variables plus the returned number of phase binaries (columns ``num_vars`` onward),
    from pre-activation bounds ``z_lo``, ``z_hi``; fixes ``lb``/``ub`` of dead ReLUs' outputs
    to 0 in place (see the module docstring)."""
    n = problem.num_vars
    relu_in = problem.relu_in
    n_phase = 0
    # (columns, values, the phase column and its coefficient or None, row lower, row upper)
    relu_blocks: list[tuple[np.ndarray, np.ndarray, tuple[int, float] | None, float, float]] = []
    for k in range(problem.num_relus):
        y = int(problem.relu_out[k])
        start, stop = relu_in.indptr[k], relu_in.indptr[k + 1]
        cols = relu_in.indices[start:stop]
        a = relu_in.data[start:stop]
        c = problem.relu_const[k]
        l_k, u_k = z_lo[k], z_hi[k]
        if u_k <= 0:
            ub[y] = min(ub[y], 0.0)
            lb[y] = max(lb[y], 0.0)
            continue
        # y - e·x  (as a row over problem vars)
        base_cols = np.concatenate([[y], cols])
        base_vals = np.concatenate([[1.0], -a])
        if l_k >= 0:
            relu_blocks.append((base_cols, base_vals, None, c, c))
            continue
        phase = n + n_phase
        n_phase += 1
        relu_blocks.append((base_cols, base_vals, None, c, np.inf))            # y >= z
        relu_blocks.append((base_cols, base_vals, (phase, -l_k), -np.inf, c - l_k))  # y <= z - l(1-a)
        relu_blocks.append((np.array([y]), np.array([1.0]), (phase, -u_k), -np.inf, 0.0))  # y <= u a
    total_cols = n + n_phase
    if not relu_blocks:
        return sp.csr_matrix((0, total_cols)), np.empty(0), np.empty(0), n_phase
    r_idx, c_idx, vals, blo, bhi = [], [], [], [], []
    for i, (bc, bv, extra, rlo, rhi) in enumerate(relu_blocks):
        if extra is not None:
            bc = np.concatenate([bc, [extra[0]]])
            bv = np.concatenate([bv, [extra[1]]])
        r_idx.append(np.full(bc.size, i))
        c_idx.append(bc)
        vals.append(bv)
        blo.append(rlo)
        bhi.append(rhi)
    block = sp.csr_matrix(
        (np.concatenate(vals), (np.concatenate(r_idx), np.concatenate(c_idx))),
        shape=(len(relu_blocks), total_cols),
    )
    block.sum_duplicates()
    return block, np.array(blo, dtype=np.float64), np.array(bhi, dtype=np.float64), n_phase


def to_milp(problem: Problem, level: int = 0, *, widen: bool = True) -> MilpForm:
    """Lower ``problem`` to a :class:`MilpForm` at tightening ``level``; ``widen=False``
    leaves out the level-0 widening (:data:`LEVEL0_WIDENING`), for exact integer solvers."""
    n = problem.num_vars
    z_lo, z_hi, lb, ub = relu_preactivation_bounds(problem)
    rows, lo_parts, hi_parts = [problem.A], [], []

    senses = problem.senses
    rhs = problem.rhs
    lo = np.where((senses == Sense.GE) | (senses == Sense.GT) | (senses == Sense.EQ), rhs, -np.inf)
    hi = np.where((senses == Sense.LE) | (senses == Sense.LT) | (senses == Sense.EQ), rhs, np.inf)
    lo_parts.append(lo)
    hi_parts.append(hi)
    strict = (senses == Sense.GT) | (senses == Sense.LT)
    nonstrict = (senses == Sense.GE) | (senses == Sense.LE)

    block, blo, bhi, n_phase = big_m_relus(problem, z_lo, z_hi, lb, ub)
    total_cols = n + n_phase
    A0 = sp.csr_matrix(problem.A, shape=(problem.num_rows, n))
    A0.resize((problem.num_rows, total_cols))
    rows[0] = A0
    phase_rows = [block] if block.shape[0] else []
    lo_parts.append(blo)
    hi_parts.append(bhi)
    A = sp.vstack(rows + phase_rows, format="csr")
    row_lo = np.concatenate(lo_parts)
    row_hi = np.concatenate(hi_parts)

    A, row_lo, row_hi = _scale_rows(A, row_lo, row_hi, _pow2_row_exponents(A))
    A, row_lo, row_hi = _drop_tiny(A, row_lo, row_hi, np.maximum(np.abs(lb), np.abs(ub)), level,
                                   keep=np.concatenate([(senses == Sense.EQ) & (level > 0),
                                                        np.zeros(A.shape[0] - problem.num_rows, bool)]))
    m = problem.num_rows
    norm1 = np.asarray(abs(A[:m]).sum(axis=1)).ravel()
    if level == 0 and widen and problem.determined_by_binaries:
        widening = LEVEL0_WIDENING * (1.0 + np.asarray(abs(A).sum(axis=1)).ravel())
        row_lo = np.where(np.isfinite(row_lo), row_lo - widening, row_lo)
        row_hi = np.where(np.isfinite(row_hi), row_hi + widening, row_hi)
    if level > 0:
        tighten = np.where(strict, strict_margin(level, norm1),
                           np.where(nonstrict, strict_margin(level - 1, norm1), 0.0))
        row_lo[:m] = np.where(np.isfinite(row_lo[:m]), row_lo[:m] + tighten, row_lo[:m])
        row_hi[:m] = np.where(np.isfinite(row_hi[:m]), row_hi[:m] - tighten, row_hi[:m])

    integer = np.concatenate([problem.kinds == VarKind.BINARY, np.ones(n_phase, dtype=bool)])
    col_lb = np.concatenate([lb, np.zeros(n_phase)])
    col_ub = np.concatenate([ub, np.ones(n_phase)])
    row_lo, row_hi = _clip_to_activity(A, row_lo, row_hi, col_lb, col_ub)
    objective = np.concatenate([problem.objective, np.zeros(n_phase)])
    return MilpForm(A=A, row_lo=row_lo, row_hi=row_hi, col_lb=col_lb, col_ub=col_ub,
                    integer=integer, objective=objective, num_problem_vars=n, level=level,
                    phase_relus=np.flatnonzero((z_hi > 0) & ~(z_lo >= 0)))  # as in big_m_relus


def start_vector(form: MilpForm, problem: Problem, start: np.ndarray) -> np.ndarray:
    """A full column vector for a solver's start: the problem's values from ``start`` and
    each phase binary set to whether its ReLU output is positive."""
    x = np.asarray(start, dtype=np.float64)[: form.num_problem_vars]
    phases = (x[problem.relu_out[form.phase_relus]] > 0).astype(np.float64)
    return np.concatenate([x, phases])
