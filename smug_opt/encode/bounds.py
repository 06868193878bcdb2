"""Valid pre-activation bounds for a masked ReLU network: interval arithmetic, then LP.

The network is ``z1 = A1ᵀ·M + b1`` over mask binaries ``M ∈ {0, 1}`` (``A1`` already holds
``W1·x`` summed per cell, so the input's sign is in it), ``h_k = relu(z_k)``,
``z_{k+1} = W_{k+1}ᵀ·h_k + b_{k+1}``, and output rows ``D·h_last >= d`` (the strict output
constraints, relaxed). Bounds are progressive as in MIPVerify: interval arithmetic for
every layer, then, layer by layer, two LPs (min and max) for each neuron still ambiguous,
over the LP relaxation of the whole network (big-M with relaxed phase variables) and the
output rows, after which the later layers' intervals are recomputed.

Every bound is rigorous: interval sums are widened by a bound on their float64 rounding
error, and an LP bound is not the solver's (tolerance-laden) value but the safe dual bound
of Neumaier and Shcherbina (2004), evaluated with outward error bounds. Interval bounds
hold for every mask; LP and cardinality bounds use the problem's constraints, so they
hold for every *feasible* mask (``NetworkBounds.global_lo``/``global_hi`` keep the plain
interval bounds, valid for every mask).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from smug_opt.backend import LpSolver
from smug_opt.encode.enumeration import enumerated_bounds, fewest_ones
from smug_opt.exact import TINY, UNIT_ROUNDOFF, dot_error_bound

__all__ = ["NetworkBounds", "interval_bounds", "network_bounds"]

LP_SECONDS = 5.0
"""Time limit of each bound LP; one that hits it keeps the bound it had."""

LP_BACKEND = "highs"
"""The backend whose LP solver (:meth:`smug_opt.backend.Backend.lp_solver`) bounds neurons."""


@dataclass(frozen=True, eq=False)
class NetworkBounds:
    """Pre-activation bounds per hidden layer and what computing them took.

    ``lo``/``hi`` are the final bounds (valid for every mask that satisfies the output
    rows); ``global_lo``/``global_hi`` the interval bounds (valid for every mask). ``lps``
    counts the LPs solved; ``lp_failures`` those whose answer gave no usable dual;
    ``min_ones`` is proven by enumeration (0 when nothing was enumerated).
    """

    lo: tuple[np.ndarray, ...]
    hi: tuple[np.ndarray, ...]
    global_lo: tuple[np.ndarray, ...]
    global_hi: tuple[np.ndarray, ...]
    mode: str
    interval_seconds: float
    lp_seconds: float
    lps: int
    lp_failures: int
    min_ones: int = 0  # every mask that satisfies the output rows has at least this many ones


def _widened_affine(W: np.ndarray, b: np.ndarray, lo_in: np.ndarray, hi_in: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Bounds on ``Wᵀ·v + b`` for ``v ∈ [lo_in, hi_in]``, widened past float64 rounding."""
    w_pos = np.maximum(W, 0.0)
    w_neg = np.minimum(W, 0.0)
    lo = b + lo_in @ w_pos + hi_in @ w_neg
    hi = b + hi_in @ w_pos + lo_in @ w_neg
    magnitude = np.abs(b) + (np.abs(lo_in) + np.abs(hi_in)) @ np.abs(W)
    slack = dot_error_bound(W.shape[0], magnitude)
    return lo - slack, hi + slack


def interval_bounds(A1: np.ndarray, b1: np.ndarray, layers: Sequence[tuple[np.ndarray, np.ndarray]],
                    lo: Sequence[np.ndarray] | None = None, hi: Sequence[np.ndarray] | None = None,
                    start: int = 0, max_ones: int | None = None) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Interval bounds of every hidden layer's pre-activation, for masks in ``{0, 1}``
    (with at most ``max_ones`` ones, if given).

    ``A1`` is ``(num_binaries, n1)``; ``layers`` the later hidden layers ``(W, b)`` with
    ``W`` of shape ``(n_in, n_out)``. With ``lo``/``hi`` given, layers from ``start`` on are
    recomputed from layer ``start - 1`` and intersected with the bounds they had.
    """
    out_lo = [np.asarray(v, dtype=np.float64) for v in lo] if lo is not None else []
    out_hi = [np.asarray(v, dtype=np.float64) for v in hi] if hi is not None else []
    if start == 0:
        m = A1.shape[0]
        l1, h1 = _widened_affine(A1, b1, np.zeros(m), np.ones(m))
        if max_ones is not None and max_ones < m:
            l1, h1 = _cardinality_bounds(A1, b1, max_ones, l1, h1)
        out_lo[:1], out_hi[:1] = _intersect(out_lo[:1], out_hi[:1], l1, h1)
        start = 1
    for k in range(start, len(layers) + 1):
        W, b = layers[k - 1]
        lk, hk = _widened_affine(W, b, np.maximum(out_lo[k - 1], 0.0), np.maximum(out_hi[k - 1], 0.0))
        out_lo[k:k + 1], out_hi[k:k + 1] = _intersect(out_lo[k:k + 1], out_hi[k:k + 1], lk, hk)
    return out_lo, out_hi


def _cardinality_bounds(A1: np.ndarray, b1: np.ndarray, max_ones: int, lo: np.ndarray, hi: np.ndarray
                        ) -> tuple[np.ndarray, np.ndarray]:
    """``b1 + Σ`` of the ``max_ones`` most negative (positive) entries of each column of
    ``A1``, widened like :func:`_widened_affine`; intersected with ``lo``/``hi``."""
    if max_ones <= 0:
        low, high = b1, b1
    else:
        low = b1 + np.sort(np.minimum(A1, 0.0), axis=0)[:max_ones].sum(axis=0)
        high = b1 - np.sort(-np.maximum(A1, 0.0), axis=0)[:max_ones].sum(axis=0)
    magnitude = np.abs(b1) + np.abs(A1).sum(axis=0)
    slack = dot_error_bound(A1.shape[0], magnitude)
    return np.maximum(lo, low - slack), np.minimum(hi, high + slack)


def _intersect(old_lo: list[np.ndarray], old_hi: list[np.ndarray], lo: np.ndarray, hi: np.ndarray
               ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    if not old_lo:
        return [lo], [hi]
    return [np.maximum(old_lo[0], lo)], [np.minimum(old_hi[0], hi)]


def network_bounds(A1: np.ndarray, b1: np.ndarray, layers: Sequence[tuple[np.ndarray, np.ndarray]],
                   out_rows: np.ndarray, out_rhs: np.ndarray, mode: str = "lp",
                   max_ones: int | None = None) -> NetworkBounds:
    """Bounds for ``mode`` ``"interval"`` or ``"lp"`` (interval, then LP where ambiguous).

    ``out_rows`` ``(r, n_last)`` and ``out_rhs`` ``(r,)`` are the output constraints
    ``out_rows·h_last >= out_rhs`` (a relaxation of the strict ones) used by the LPs;
    ``max_ones`` a limit on the number of ones in the mask that the problem imposes.
    """
    if mode not in ("interval", "lp"):
        raise ValueError(f"bounds mode must be 'interval' or 'lp', got {mode!r}")
    t0 = time.perf_counter()
    global_lo, global_hi = interval_bounds(A1, b1, layers)
    lo, hi = interval_bounds(A1, b1, layers, max_ones=max_ones)
    t1 = time.perf_counter()
    lps = failures = 0
    enumerated = None
    if mode == "lp" and max_ones is not None:
        enumerated = enumerated_bounds(A1, b1, layers, out_rows, out_rhs, max_ones)
    min_ones = 0
    if enumerated is not None:  # as tight as bounds over the feasible masks can be: no LPs
        for k, (e_lo, e_hi) in enumerate(zip(enumerated[0], enumerated[1], strict=True)):
            lo[k], hi[k] = np.maximum(lo[k], e_lo), np.minimum(hi[k], e_hi)
        min_ones = enumerated[2]
    elif mode == "lp":
        if max_ones is not None:  # too many masks for bounds: the smaller sizes still prove a count
            min_ones = fewest_ones(A1, b1, layers, out_rows, out_rhs, max_ones)
        for k in range(len(lo)):
            ambiguous = np.flatnonzero((lo[k] < 0) & (hi[k] > 0))
            if ambiguous.size == 0:
                continue
            lp = _RelaxationLP(A1, b1, layers, lo, hi, out_rows, out_rhs, max_ones)
            if not lp.feasible:
                break  # no mask satisfies even the relaxation: keep the interval bounds
            for j in ambiguous.tolist():
                upper, ok = lp.bound(k, j, maximise=True)
                lps, failures = lps + 1, failures + (not ok)
                hi[k][j] = min(hi[k][j], upper)
                if hi[k][j] <= 0:
                    continue
                lower, ok = lp.bound(k, j, maximise=False)
                lps, failures = lps + 1, failures + (not ok)
                lo[k][j] = max(lo[k][j], lower)
            if k + 1 < len(lo):
                lo, hi = interval_bounds(A1, b1, layers, lo, hi, start=k + 1)
    for k in range(len(lo)):  # an LP bound may cross its partner by rounding: keep lo <= hi
        lo[k] = np.minimum(lo[k], hi[k])
    return NetworkBounds(tuple(lo), tuple(hi), tuple(global_lo), tuple(global_hi), mode,
                         interval_seconds=t1 - t0, lp_seconds=time.perf_counter() - t1,
                         lps=lps, lp_failures=failures, min_ones=min_ones)


class _RelaxationLP:
    """The LP relaxation of the masked network, solved for one bound at a time by the LP
    solver a backend provides (``lp_backend``, HiGHS by default).

    Columns: ``M`` (the binaries), then per hidden layer ``z`` (pre-activations, within
    their bounds), ``h`` (outputs) and ``a`` (phase, relaxed to [0, 1], one per unstable
    neuron). Rows: ``z = A·input + b``; per unstable neuron ``h >= z``,
    ``h <= z − l(1 − a)``, ``h <= u·a``, ``h <= max(0, b) + Σ max(0, w)·input``; per active
    one ``h = z``; the output rows; the mask-size row if any. Every
    coefficient is a given float (no arithmetic), so the LP is a true relaxation.
    """

    def __init__(self, A1: np.ndarray, b1: np.ndarray, layers: Sequence[tuple[np.ndarray, np.ndarray]],
                 lo: Sequence[np.ndarray], hi: Sequence[np.ndarray],
                 out_rows: np.ndarray, out_rhs: np.ndarray, max_ones: int | None,
                 lp_backend: str = LP_BACKEND) -> None:
        row_lo: list[np.ndarray] = []
        row_hi: list[np.ndarray] = []
        col_lb: list[np.ndarray] = [np.zeros(A1.shape[0])]
        col_ub: list[np.ndarray] = [np.ones(A1.shape[0])]
        self._z_cols: list[np.ndarray] = []
        n = A1.shape[0]
        prev = np.arange(n)  # columns of the previous layer's outputs (first: the binaries)
        inputs = [(A1, b1), *layers]
        triplets: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        n_rows = 0

        def add_rows(rows: np.ndarray, cols: np.ndarray, vals: np.ndarray, count: int,
                     rlo: np.ndarray, rhi: np.ndarray) -> None:
            nonlocal n_rows
            triplets.append((rows + n_rows, cols, vals))
            row_lo.append(rlo)
            row_hi.append(rhi)
            n_rows += count

        for k, (W, b) in enumerate(inputs):
            width = W.shape[1]
            lk, uk = lo[k], hi[k]
            z = n + np.arange(width)
            h = z + width
            unstable = np.flatnonzero((lk < 0) & (uk > 0))
            a = n + 2 * width + np.arange(unstable.size)
            n += 2 * width + unstable.size
            col_lb += [lk, np.maximum(lk, 0.0), np.zeros(unstable.size)]
            col_ub += [uk, np.maximum(uk, 0.0), np.ones(unstable.size)]
            self._z_cols.append(z)
            # z - Wᵀ·prev = b
            w = sp.coo_matrix(W.T)
            add_rows(np.concatenate([np.arange(width), w.row]), np.concatenate([z, prev[w.col]]),
                     np.concatenate([np.ones(width), -w.data]), width, b, b)
            # active: h - z = 0 ; dead: h fixed to 0 by its bounds
            act = np.flatnonzero(lk >= 0)
            r = np.arange(act.size)
            add_rows(np.concatenate([r, r]), np.concatenate([h[act], z[act]]),
                     np.concatenate([np.ones(act.size), -np.ones(act.size)]), act.size,
                     np.zeros(act.size), np.zeros(act.size))
            m = unstable.size
            r = np.arange(m)
            hu, zu, lu, uu = h[unstable], z[unstable], lk[unstable], uk[unstable]
            inf = np.full(m, np.inf)
            add_rows(np.concatenate([r, r]), np.concatenate([hu, zu]),
                     np.concatenate([np.ones(m), -np.ones(m)]), m, np.zeros(m), inf)  # h - z >= 0
            add_rows(np.concatenate([r, r, r]), np.concatenate([hu, zu, a]),
                     np.concatenate([np.ones(m), -np.ones(m), -lu]), m, -inf, -lu)  # h - z - l a <= -l
            add_rows(np.concatenate([r, r]), np.concatenate([hu, a]),
                     np.concatenate([np.ones(m), -uu]), m, -inf, np.zeros(m))  # h - u a <= 0
            # h - Σ max(0, w)·prev <= max(0, b): true for nonnegative inputs, missed by big-M
            pos = sp.coo_matrix(np.maximum(W[:, unstable], 0.0).T)
            add_rows(np.concatenate([r, pos.row]), np.concatenate([hu, prev[pos.col]]),
                     np.concatenate([np.ones(m), -pos.data]), m, -inf, np.maximum(b[unstable], 0.0))
            prev = h
        d = sp.coo_matrix(out_rows)
        add_rows(d.row, prev[d.col], d.data, out_rows.shape[0], out_rhs, np.full(out_rows.shape[0], np.inf))
        if max_ones is not None:
            m = A1.shape[0]
            add_rows(np.zeros(m, dtype=np.int64), np.arange(m), np.ones(m), 1,
                     np.array([-np.inf]), np.array([float(max_ones)]))

        rows = np.concatenate([t[0] for t in triplets])
        cols = np.concatenate([t[1] for t in triplets])
        vals = np.concatenate([t[2] for t in triplets])
        self.A = sp.csr_matrix((vals, (rows, cols)), shape=(n_rows, n))
        self.row_lo = np.concatenate(row_lo)
        self.row_hi = np.concatenate(row_hi)
        self.col_lb = np.concatenate(col_lb)
        self.col_ub = np.concatenate(col_ub)
        self._abs_At = abs(self.A).T.tocsr()
        self._At = self.A.T.tocsr()
        self._lp = _lp_solver(lp_backend)
        self.feasible = self._lp.load(self.A, self.row_lo, self.row_hi, self.col_lb, self.col_ub)

    def bound(self, layer: int, neuron: int, *, maximise: bool) -> tuple[float, bool]:
        """A rigorous bound on ``z[layer][neuron]`` (upper if ``maximise``) and whether the
        LP answered (when it did not, the returned bound is the column's own bound)."""
        col = int(self._z_cols[layer][neuron])
        sign = -1.0 if maximise else 1.0
        y = self._lp.minimize(col, sign, LP_SECONDS)
        fallback = float(self.col_ub[col] if maximise else self.col_lb[col])
        if y is None:
            return fallback, False
        c = np.zeros(self.A.shape[1])
        c[col] = sign
        safe = _safe_min(c, self._At, self._abs_At, self.row_lo, self.row_hi, self.col_lb, self.col_ub, y)
        value = -safe if maximise else safe
        return (min(value, fallback), True) if maximise else (max(value, fallback), True)


def _lp_solver(backend: str) -> LpSolver:
    """The LP solver ``backend`` provides (:meth:`smug_opt.backend.Backend.lp_solver`)."""
    from smug_opt.registry import backend_class

    try:
        solver = backend_class(backend).lp_solver()
    except (ImportError, RuntimeError, ValueError) as error:
        raise ImportError(f"bounds='lp' solves its LPs with backend {backend!r}, which is not usable "
                          f"here ({error}); install it or use bounds='interval'") from error
    if solver is None:
        raise ValueError(f"backend {backend!r} provides no LP solver for bounds='lp'")
    return solver


def _safe_min(c: np.ndarray, At: sp.csr_matrix, abs_At: sp.csr_matrix, row_lo: np.ndarray,
              row_hi: np.ndarray, col_lb: np.ndarray, col_ub: np.ndarray, y: np.ndarray) -> float:
    """A rigorous lower bound on ``min c·v`` s.t. ``row_lo <= A v <= row_hi``,
    ``col_lb <= v <= col_ub`` (finite), from any multipliers ``y`` (Neumaier–Shcherbina).

    ``c·v = yᵀ(Av) + rᵀv`` with ``r = c − Aᵀy``; each part is bounded below over the rows'
    and the columns' ranges, and the float64 rounding of every step is subtracted.
    """
    # a multiplier may only lean on a finite side of its row
    y = np.where((y > 0) & ~np.isfinite(row_lo), 0.0, y)
    y = np.where((y < 0) & ~np.isfinite(row_hi), 0.0, y)
    side = np.where(y > 0, row_lo, np.where(y < 0, row_hi, 0.0))
    row_terms = y * side
    r = c - At @ y
    r_err = (2.0 * (np.diff(At.indptr) + 2) * UNIT_ROUNDOFF * (np.abs(c) + abs_At @ np.abs(y))
             + (np.diff(At.indptr) + 2) * TINY)
    col_terms = np.minimum(r * col_lb, r * col_ub)
    col_err = r_err * np.maximum(np.abs(col_lb), np.abs(col_ub))
    total = row_terms.sum() + col_terms.sum()
    n_terms = row_terms.size + col_terms.size
    err = (2.0 * (n_terms + 2) * UNIT_ROUNDOFF * (np.abs(row_terms).sum() + np.abs(col_terms).sum())
           + col_err.sum() * (1.0 + 4.0 * n_terms * UNIT_ROUNDOFF) + (n_terms + 2) * TINY)
    return float(total - err)
