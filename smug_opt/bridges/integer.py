"""Lowering to a pure integer program: real coefficients scaled and rounded with proven error.

Built on :func:`~smug_opt.bridges.milp.to_milp` at level 0 (non-strict two-sided rows,
big-M ReLUs with phase binaries), or, with ``relu="max"``, on one row per ReLU defining its
pre-activation column ``Z`` plus ``y = max(Z, 0)`` for solvers that have it natively
(CP-SAT: measured 0.6 s instead of no solution in 30 s on a 784-32-10 network); then
made integral:

* **Continuous variables** live on a grid ``v = V·2**-Q_j`` with integer ``V``; ``Q_j`` is
  chosen per variable so that ``max(|lb_j|, |ub_j|)·2**Q_j <= 2**grid_bits`` (default 20:
  about 6 significant digits of every ReLU value relative to its range).
* **Rows** are scaled by a power of two ``S_i = 2**k_i`` (exact) so that the largest term
  ``|c_j|·max|X_j|`` is about ``2**coefficient_bits`` (default 40) and the whole activity
  ``Σ |c_j|·max|X_j|`` stays below ``2**activity_bits`` (default 53, the limit OR-Tools
  uses for its own MIP→CP-SAT conversion; far below int64's 2**63). Coefficients are
  rounded to the nearest integer and each row is divided by the gcd of its coefficients.
* The **rounding error** of a row, ``|S·a·x - Σ c_j X_j|``, is bounded rigorously (float
  sums rounded upward): ``E_i = Σ |S·α_j - c_j|·max|X_j|`` for the coefficients, plus
  ``Σ_cont |S·α_j|/2`` for moving a continuous value to its nearest grid point.

Tightening levels (see :mod:`smug_opt.backend`):

* level 0, **outward**: ``lo`` becomes ``ceil(S·lo - E)`` (strict: ``floor(S·lo - E) + 1``),
  ``hi`` becomes ``floor(S·hi + E)`` (strict: ``ceil(S·hi + E) - 1``). Every exactly
  feasible point, rounded to the grid, satisfies every integer row: a relaxation, so a
  proven optimum (minus :attr:`IntegerForm.objective_error`) is a valid lower bound. A row
  with no rounding error (integer coefficients, binaries only) is represented exactly,
  strictness included: ``x1 + x2 > 1`` becomes ``X1 + X2 >= 2``.
* level L >= 1, **inward** on the problem's rows: the margin ``2**(L-1)·(E'_i + D_i)``
  replaces ``E``, with ``E'`` the coefficient error alone and ``D_i`` the drift of ReLU
  outputs: the exact ReLU values (recomputed from the binaries) differ from the grid
  values by at most ``dev_j``, propagated layer by layer from the ReLU rows' own
  rounding (big-M: the sum of its three rows' slacks; max: its one row's slack). At
  level 1 every integer point of the integer rows is, after exact
  recomputation of its ReLU outputs, feasible for the real rows; higher levels double the
  margin. ReLU rows stay outward at every level (they define the ReLU outputs, which
  need room to land on the grid); plain continuous variables get inward grid domains.

The real rows it starts from (the problem's, and the ReLUs' as big-M or max rows) are
built by :mod:`smug_opt.bridges.real_rows`; scaling, rounding and the error bound, one
proof whose error terms feed each other, stay here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import scipy.sparse as sp

from smug_opt.bridges.real_rows import big_m_rows, max_rows
from smug_opt.exact import TINY
from smug_opt.ir import Problem, Sense

__all__ = [
    "ACTIVITY_BITS",
    "COEFFICIENT_BITS",
    "GRID_BITS",
    "RELU_ENCODINGS",
    "IntegerForm",
    "to_integer",
]

COEFFICIENT_BITS = 40
"""Default: the largest term ``|c_j|·max|X_j|`` of a row is scaled to about ``2**40``."""

ACTIVITY_BITS = 53
"""Default bound on ``Σ|c_j|·max|X_j|`` per row and for the objective: ``2**53``."""

GRID_BITS = 20
"""Default resolution of continuous variables: ``|V_j| <= 2**20`` over their range."""

_EPS = 2.0**-52
_SMALLEST_NORMAL = 2.0**-1022
_SUBNORMAL_STEP = 2.0**-1074
_HUGE = 1 << 256
_HUGE_ERR = 2.0**256  # an error allowance beyond any activity: the row cannot hold


@dataclass(frozen=True, eq=False)
class IntegerForm:
    """``min objective·X`` s.t. ``row_lo[i] <= C[i]·X <= row_hi[i]``, ``lb <= X <= ub``,
    ``X`` integer (``None`` bounds are absent).

    Column ``j`` stands for the value ``X_j·2**-exponent[j]`` (``exponent`` is 0 for
    binaries). The first ``num_problem_vars`` columns are the problem's variables; the rest
    are ReLU phase binaries (``relu="big-m"``) or pre-activations (``relu="max"``, with
    ``X[out] = max(X[in], 0)`` for each ``(out, in)`` in ``maxes``). Every row's activity
    and the objective's fit in ``2**activity_bits``; a row no integer point can satisfy
    is written ``Σ|c_j|·max|X_j| + 1 <= C[i]·X``, so ``row_lo <= row_hi`` always.
    """

    C: sp.csr_matrix
    row_lo: tuple[int | None, ...]
    row_hi: tuple[int | None, ...]
    lb: np.ndarray
    ub: np.ndarray
    exponent: np.ndarray
    objective: np.ndarray
    objective_exponent: int
    objective_error: float
    maxes: tuple[tuple[int, int], ...]
    num_problem_vars: int
    level: int
    activity_bits: int

    @property
    def num_rows(self) -> int:
        return int(self.C.shape[0])

    @property
    def num_cols(self) -> int:
        return int(self.C.shape[1])

    def problem_values(self, X: np.ndarray) -> np.ndarray:
        """The problem's variable values (float64, exact) of an integer solution."""
        X = np.asarray(X, dtype=np.int64)[: self.num_problem_vars]
        return np.ldexp(X.astype(np.float64), -self.exponent[: self.num_problem_vars])

    def objective_bound(self, integer_bound: float) -> float:
        """A lower bound on the problem's optimum from a proven lower bound on the integer
        objective (valid at level 0, the relaxation)."""
        return math.ldexp(float(integer_bound), -self.objective_exponent) - self.objective_error


def _up(values: np.ndarray, count: np.ndarray | int) -> np.ndarray:
    """An upper bound on a sum of ``count`` non-negative float terms computed as ``values``
    (zero stays zero: a sum of exact zeros has no error)."""
    values = np.asarray(values, dtype=np.float64)
    return np.where(values > 0, values * (1.0 + (np.asarray(count) + 4) * _EPS)
                    + (np.asarray(count) + 1) * TINY, 0.0)


def _exponent(values: np.ndarray) -> np.ndarray:
    """Smallest ``e`` with ``|v| <= 2**e`` (for v > 0)."""
    return np.frexp(values)[1].astype(np.int64)


def _row_sums(csr: sp.csr_matrix, values: np.ndarray) -> np.ndarray:
    return np.asarray(sp.csr_matrix((values, csr.indices, csr.indptr), shape=csr.shape).sum(axis=1)).ravel()


def _row_max(csr: sp.csr_matrix, values: np.ndarray) -> np.ndarray:
    out = np.zeros(csr.shape[0])
    nz = np.diff(csr.indptr) > 0
    if values.size:
        out[nz] = np.maximum.reduceat(values, csr.indptr[:-1][nz])
    return out


def _column_grid(lb: np.ndarray, ub: np.ndarray, continuous: np.ndarray, grid_bits: int) -> np.ndarray:
    exponent = np.zeros(lb.shape[0], dtype=np.int64)
    reach = np.maximum(np.abs(lb), np.abs(ub))
    on_grid = continuous & (reach > 0)
    exponent[on_grid] = grid_bits - _exponent(reach[on_grid])
    return exponent


def _scale_exponents(
    terms_max: np.ndarray, terms_sum: np.ndarray, half_xmax: np.ndarray,
    coefficient_bits: int, activity_bits: int, what: str,
) -> np.ndarray:
    """Per-row ``k`` with ``2**k·max_term <= 2**coefficient_bits`` and the worst-case
    rounded activity ``2**k·Σ terms + Σ max|X|/2`` below ``2**activity_bits``."""
    room = 2.0**activity_bits * (1.0 - 2.0**-20) - _up(half_xmax, 0)
    if np.any(room <= 0):
        i = int(np.flatnonzero(room <= 0)[0])
        raise ValueError(f"{what} {i} is too wide for {activity_bits}-bit activities: "
                         f"its variables' ranges alone need 2**{math.log2(2 * half_xmax[i]):.1f}")
    k = np.zeros(terms_max.shape[0], dtype=np.int64)
    nz = terms_max > 0
    k_term = coefficient_bits - _exponent(terms_max[nz])
    total = _up(terms_sum[nz], 0)
    with np.errstate(over="ignore"):
        ratio = room[nz] / total
    k_act = np.where(np.isfinite(ratio), _exponent(ratio) - 1,  # else: via the exponents
                     _exponent(room[nz]) - _exponent(total) - 1)
    k[nz] = np.minimum(k_term, k_act)
    return k


def _round_terms(data: np.ndarray, shift: np.ndarray, xmax: np.ndarray) -> tuple[np.ndarray, ...]:
    """Scaled coefficients ``data·2**shift`` (one rounding), their integer roundings and
    rounding residuals times ``max|X|``. A scaled value in the subnormal range may have
    lost up to ``2**-1075`` (or all of itself, underflowing to 0): its residual says so."""
    scaled = np.ldexp(data, shift)
    rounded = np.rint(scaled)
    residual = np.abs(scaled - rounded)  # exact in float64
    residual = np.where((data != 0) & (np.abs(scaled) < _SMALLEST_NORMAL), residual + _SUBNORMAL_STEP,
                        residual)
    return scaled, rounded.astype(np.int64), residual * xmax


def _bound(side: float, k: int, err: Fraction, strict: bool, upper: bool) -> int | None:
    """The integer bound for the float bound ``side`` scaled by ``2**k`` (exactly: a float
    ``ldexp`` would underflow tiny sides to 0) and moved by ``err`` (signed: a positive
    ``err`` moves outward); None for an infinite side."""
    if math.isinf(side):  # the unbounded direction
        return None if (side > 0) == upper else (-_HUGE if upper else _HUGE)
    scaled = Fraction(side) * (Fraction(2) ** k)
    t = scaled + err if upper else scaled - err
    if upper:
        return math.ceil(t) - 1 if strict else math.floor(t)
    return math.floor(t) + 1 if strict else math.ceil(t)


RELU_ENCODINGS = ("big-m", "max")


def to_integer(
    problem: Problem,
    level: int = 0,
    *,
    coefficient_bits: int = COEFFICIENT_BITS,
    activity_bits: int = ACTIVITY_BITS,
    grid_bits: int = GRID_BITS,
    relu: str = "big-m",
) -> IntegerForm:
    """Lower ``problem`` to an :class:`IntegerForm` at tightening ``level`` (see module doc).

    ``relu="big-m"`` writes ReLUs as :func:`to_milp` does (phase binaries, three rows);
    ``relu="max"`` writes one row per ReLU for a pre-activation column ``Z`` (on the same
    grid as its output) and lists ``(y, Z)`` in :attr:`IntegerForm.maxes`, for solvers
    with a native ``y = max(Z, 0)``.
    """
    if level < 0:
        raise ValueError(f"level must be >= 0, got {level}")
    if not 1 <= coefficient_bits <= activity_bits <= 62:
        raise ValueError(f"need 1 <= coefficient_bits ({coefficient_bits}) <= activity_bits "
                         f"({activity_bits}) <= 62")
    if not 1 <= grid_bits < coefficient_bits and not problem.binary.all():
        raise ValueError(f"need 1 <= grid_bits ({grid_bits}) < coefficient_bits ({coefficient_bits}) "
                         f"for a problem with continuous variables")
    if relu not in RELU_ENCODINGS:
        raise ValueError(f"unknown relu encoding {relu!r}; expected one of {', '.join(RELU_ENCODINGS)}")
    form = big_m_rows(problem) if relu == "big-m" else max_rows(problem)
    n, m = problem.num_vars, problem.num_rows
    num_cols = form.A.shape[1]
    continuous = ~form.integer
    relu_out = np.zeros(num_cols, dtype=bool)
    relu_out[problem.relu_out] = True
    plain = continuous & ~relu_out
    plain[n:] = False  # pre-activation columns are defined by their rows, like ReLU outputs

    # ---- columns: grid exponents and integer domains
    exponent = _column_grid(form.col_lb, form.col_ub, continuous, grid_bits)
    for y, z in form.maxes:  # a ReLU output and its pre-activation share one grid
        exponent[y] = exponent[z] = min(exponent[y], exponent[z])
    lo_grid = np.ldexp(form.col_lb, exponent)
    hi_grid = np.ldexp(form.col_ub, exponent)
    inward_cols = plain if level >= 1 else np.zeros_like(plain)
    lb = np.where(inward_cols, np.ceil(lo_grid), np.floor(lo_grid)).astype(np.int64)
    ub = np.where(inward_cols, np.floor(hi_grid), np.ceil(hi_grid)).astype(np.int64)
    lb[form.integer] = np.ceil(form.col_lb[form.integer]).astype(np.int64)
    ub[form.integer] = np.floor(form.col_ub[form.integer]).astype(np.int64)
    xmax = np.maximum(np.abs(lb), np.abs(ub)).astype(np.float64)

    # ---- rows: scale, round, bound the error
    A = form.A
    A.sort_indices()
    cols = A.indices
    nnz = np.diff(A.indptr)
    alpha = np.where(xmax[cols] > 0, np.ldexp(A.data, -exponent[cols]), 0.0)  # X_j = 0: no term
    terms = np.abs(alpha) * xmax[cols]
    k = _scale_exponents(_row_max(A, terms), _row_sums(A, terms), 0.5 * _row_sums(A, xmax[cols]),
                         coefficient_bits, activity_bits, "row")
    row_of = np.repeat(np.arange(A.shape[0]), nnz)
    scaled, C_data, residual = _round_terms(np.where(xmax[cols] > 0, A.data, 0.0),
                                            k[row_of] - exponent[cols], xmax[cols])
    coef_err = _up(_row_sums(A, residual), nnz)
    grid_err = _up(0.5 * _row_sums(A, np.where(continuous[cols], np.abs(scaled), 0.0)), nnz)

    # ---- ReLU outputs: how far a grid value can be from the exact recomputed value
    dev = np.zeros(num_cols)
    real_slack = np.ldexp(_up(2.0 * coef_err + grid_err, 0), -k)  # a defining row's slack, real units
    relu_in = problem.relu_in
    for r, (col, rows) in enumerate(form.defines):
        slack = 0.0
        for i in rows:
            lo_i, hi_i = A.indptr[i], A.indptr[i + 1]
            at = lo_i + int(np.searchsorted(cols[lo_i:hi_i], col))
            slack += float(real_slack[i]) / abs(float(A.data[at]))
        start, stop = relu_in.indptr[r], relu_in.indptr[r + 1]
        drift = float(np.abs(relu_in.data[start:stop]) @ dev[relu_in.indices[start:stop]])
        y = int(problem.relu_out[r])
        dev[y] = float(_up(np.array(slack + drift), stop - start + len(rows))) if rows else 0.0
    with np.errstate(over="ignore"):
        drift_err = np.minimum(np.ldexp(_up(_row_sums(A, np.abs(A.data) * dev[cols]), nnz), k), _HUGE_ERR)

    outward = _up(coef_err + grid_err, 0)
    margin = np.ldexp(_up(coef_err + drift_err, 0), max(level - 1, 0))
    err = np.where(np.arange(A.shape[0]) < m, -margin if level >= 1 else outward, outward)
    strict_lo = np.zeros(A.shape[0], dtype=bool)
    strict_hi = np.zeros(A.shape[0], dtype=bool)
    strict_lo[:m] = problem.senses == Sense.GT
    strict_hi[:m] = problem.senses == Sense.LT

    C = sp.csr_matrix((C_data, cols.copy(), A.indptr.copy()), shape=A.shape)
    activity = _row_sums(C, np.abs(C_data) * xmax[cols].astype(np.int64))
    gcd = np.ones(A.shape[0], dtype=np.int64)
    nzr = nnz > 0
    if C_data.size:
        gcd[nzr] = np.maximum(np.gcd.reduceat(np.abs(C_data), A.indptr[:-1][nzr]), 1)
    C.data //= np.repeat(gcd, nnz)
    C.eliminate_zeros()
    row_lo, row_hi = [], []
    for i in range(A.shape[0]):
        e = Fraction(float(err[i]))
        act, g = int(activity[i]), int(gcd[i])
        lo = _bound(float(form.row_lo[i]), int(k[i]), e, bool(strict_lo[i]), upper=False)
        hi = _bound(float(form.row_hi[i]), int(k[i]), e, bool(strict_hi[i]), upper=True)
        lo = None if lo is None or lo <= -act else min(lo, act + 1)
        hi = None if hi is None or hi >= act else max(hi, -act - 1)
        lo = None if lo is None else -((-lo) // g)
        hi = None if hi is None else hi // g
        if lo is not None and hi is not None and lo > hi:  # no integer activity fits
            lo, hi = act // g + 1, None
        row_lo.append(lo)
        row_hi.append(hi)

    objective, obj_exp, obj_err = _objective(form.objective, exponent, continuous, xmax,
                                             problem.integral_objective, coefficient_bits,
                                             activity_bits)
    return IntegerForm(
        C=C, row_lo=tuple(row_lo), row_hi=tuple(row_hi), lb=lb, ub=ub, exponent=exponent,
        objective=objective, objective_exponent=obj_exp, objective_error=obj_err,
        maxes=form.maxes, num_problem_vars=n, level=level, activity_bits=activity_bits,
    )


def _objective(
    c: np.ndarray, exponent: np.ndarray, continuous: np.ndarray, xmax: np.ndarray,
    integral: bool, coefficient_bits: int, activity_bits: int,
) -> tuple[np.ndarray, int, float]:
    """Integer objective coefficients, the power of two they are scaled by, and the bound
    on the error of the scaled objective (in the problem's units, at level 0)."""
    c = np.where(xmax > 0, c, 0.0)  # a column whose domain is {0} adds nothing (as in rows)
    if integral and float(np.abs(c) @ xmax) < 2.0**activity_bits * (1 - 2.0**-20):
        return c.astype(np.int64), 0, 0.0
    alpha = np.ldexp(c, -exponent)
    terms = np.abs(alpha) * xmax
    nz = int(np.count_nonzero(c))
    k = int(_scale_exponents(np.array([terms.max(initial=0.0)]), np.array([terms.sum()]),
                             np.array([0.5 * xmax[c != 0].sum()]), coefficient_bits,
                             activity_bits, "objective")[0])
    scaled, rounded, residual = _round_terms(c, k - exponent, xmax)
    err = float(_up(np.array(residual.sum() + 0.5 * np.abs(scaled[continuous]).sum()), nz))
    return rounded, k, math.ldexp(err, -k)
