"""Valid pre-activation bounds for a masked ReLU network: linear bound propagation or
interval arithmetic, then LP where it pays.

The network is ``z1 = A1ᵀ·M + b1`` over mask binaries ``M ∈ {0, 1}`` (``A1`` already holds
``W1·x`` summed per cell, so the input's sign is in it), ``h_k = relu(z_k)``,
``z_{k+1} = W_{k+1}ᵀ·h_k + b_{k+1}``, and output rows ``D·h_last >= d`` (the strict output
constraints, relaxed). Bounds are progressive as in MIPVerify: linear bound propagation
(:mod:`smug_opt.bounds`, CROWN over the cells with the mask-size limit) or interval
arithmetic for every layer, then, layer by layer, two LPs (min and max) for the neurons
still ambiguous (:class:`smug_opt.bounds.lp.RelaxationLP`: the LP relaxation of the whole
network and the output rows), after which the later layers' bounds are recomputed.

Every bound is rigorous: sums are widened by a bound on their float64 rounding error, and
an LP bound is not the solver's (tolerance-laden) value but the safe dual bound of Neumaier
and Shcherbina (2004), evaluated with outward error bounds. Interval bounds
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

from smug_opt.bounds import Masks, propagate
from smug_opt.bounds.lp import LP_SECONDS, RelaxationLP
from smug_opt.encode.enumeration import enumerated_bounds
from smug_opt.exact import dot_error_bound
from smug_opt.network.flat import FlatLayer, FlatNetwork

__all__ = ["LP_BUDGET", "MODES", "NetworkBounds", "interval_bounds", "network_bounds"]

MODES = ("crown", "crown+lp", "interval", "lp")
"""``crown``: linear bound propagation; ``crown+lp``: then LPs for the most ambiguous
neurons within :data:`LP_BUDGET`; ``interval``: interval arithmetic; ``lp``: interval
arithmetic, then LPs for every ambiguous neuron (no budget)."""

LP_BUDGET = 30.0
"""Seconds of bound LPs per network in mode ``crown+lp`` (shared out over the layers)."""


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


def crown_bounds(A1: np.ndarray, b1: np.ndarray, layers: Sequence[tuple[np.ndarray, np.ndarray]],
                 max_ones: int | None = None, prior: tuple[list[np.ndarray], list[np.ndarray]] | None = None
                 ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Bounds of every hidden layer's pre-activation by linear bound propagation
    (:func:`smug_opt.bounds.propagate`) over masks of at most ``max_ones`` ones; ``prior``:
    bounds already known for the first layers (kept where tighter)."""
    n = A1.shape[0]
    flat = [FlatLayer("input", (), n)]
    for k, (W, b) in enumerate([(A1, b1), *layers]):
        if k:
            flat.append(FlatLayer("relu", (len(flat) - 1,), W.shape[0]))
        flat.append(FlatLayer("linear", (len(flat) - 1,), W.shape[1], matrix=sp.csr_matrix(W.T),
                              bias=np.asarray(b, dtype=np.float64)))
    known = None
    if prior is not None:
        low, high = ({2 * k + 1: v for k, v in enumerate(side)} for side in prior)
        known = (low, high)
    bounds = propagate(FlatNetwork(tuple(flat), (n,)), Masks(np.ones(n), np.arange(n), max_cells=max_ones),
                       prior=known)
    return ([bounds.lo[2 * k + 1].copy() for k in range(len(layers) + 1)],
            [bounds.hi[2 * k + 1].copy() for k in range(len(layers) + 1)])


def network_bounds(A1: np.ndarray, b1: np.ndarray, layers: Sequence[tuple[np.ndarray, np.ndarray]],
                   out_rows: np.ndarray, out_rhs: np.ndarray, mode: str = "crown",
                   max_ones: int | None = None, lp_budget: float = LP_BUDGET,
                   row_margin: np.ndarray | None = None,
                   global_bounds: tuple[list[np.ndarray], list[np.ndarray]] | None = None) -> NetworkBounds:
    """Bounds for ``mode`` (one of :data:`MODES`).

    ``out_rows`` ``(r, n_last)`` and ``out_rhs`` ``(r,)`` are the output constraints
    ``out_rows·h_last >= out_rhs`` (a relaxation of the strict ones) used by the LPs;
    ``max_ones`` a limit on the number of ones in the mask that the problem imposes. In the
    LP modes, when the masks of at most ``max_ones`` ones are few enough they are all
    evaluated instead (:func:`~smug_opt.encode.enumeration.enumerated_bounds`, dropping a
    mask only when it fails a row by more than its error bound plus ``row_margin``).
    ``global_bounds``: :func:`interval_bounds` over every mask, when the caller has them.
    """
    if mode not in MODES:
        raise ValueError(f"bounds mode must be one of {', '.join(MODES)}, got {mode!r}")
    t0 = time.perf_counter()
    crown = mode.startswith("crown")
    global_lo, global_hi = global_bounds if global_bounds is not None else interval_bounds(A1, b1, layers)
    lo, hi = interval_bounds(A1, b1, layers, max_ones=max_ones)
    use_lp = mode in ("lp", "crown+lp")
    enumerated = None
    if use_lp and max_ones is not None:  # exact over the feasible masks: propagation adds nothing
        enumerated = enumerated_bounds(A1, b1, layers, out_rows, out_rhs, max_ones, row_margin)
    if crown and enumerated is None:
        lo, hi = crown_bounds(A1, b1, layers, max_ones, prior=(lo, hi))
    t1 = time.perf_counter()
    lps = failures = 0
    min_ones = 0
    if enumerated is not None:  # as tight as bounds over the feasible masks can be: no LPs
        for k, (e_lo, e_hi) in enumerate(zip(enumerated[0], enumerated[1], strict=True)):
            lo[k], hi[k] = np.maximum(lo[k], e_lo), np.minimum(hi[k], e_hi)
        min_ones = enumerated[2]
    elif use_lp:
        deadline = time.perf_counter() + lp_budget if crown else np.inf
        for k in range(len(lo)):
            ambiguous = np.flatnonzero((lo[k] < 0) & (hi[k] > 0))
            if ambiguous.size == 0:
                continue
            if time.perf_counter() >= deadline:
                break  # the budget is spent (building an LP counts)
            if crown:  # the most ambiguous first: largest triangle relaxation height
                height = -lo[k][ambiguous] * hi[k][ambiguous] / (hi[k][ambiguous] - lo[k][ambiguous])
                ambiguous = ambiguous[np.argsort(-height, kind="stable")]
                layer_end = time.perf_counter() + (deadline - time.perf_counter()) / (len(lo) - k)
            else:
                layer_end = np.inf
            lp = RelaxationLP(A1, b1, layers, lo, hi, out_rows, out_rhs, max_ones,
                              seconds=max(deadline - time.perf_counter(), 0.01))
            if not lp.feasible:
                break  # no mask satisfies even the relaxation, or the budget ran out: keep the bounds
            for j in ambiguous.tolist():
                if time.perf_counter() >= layer_end:
                    break
                upper, ok = lp.bound(k, j, maximise=True, seconds=_lp_seconds(layer_end))
                lps, failures = lps + 1, failures + (not ok)
                hi[k][j] = min(hi[k][j], upper)
                if hi[k][j] <= 0 or time.perf_counter() >= layer_end:
                    continue
                lower, ok = lp.bound(k, j, maximise=False, seconds=_lp_seconds(layer_end))
                lps, failures = lps + 1, failures + (not ok)
                lo[k][j] = max(lo[k][j], lower)
            if k + 1 < len(lo):
                if crown:
                    lo, hi = crown_bounds(A1, b1, layers, max_ones, prior=(lo, hi))
                else:
                    lo, hi = interval_bounds(A1, b1, layers, lo, hi, start=k + 1)
    for k in range(len(lo)):  # an LP bound may cross its partner by rounding: keep lo <= hi
        lo[k] = np.minimum(lo[k], hi[k])
    return NetworkBounds(tuple(lo), tuple(hi), tuple(global_lo), tuple(global_hi), mode,
                         interval_seconds=t1 - t0, lp_seconds=time.perf_counter() - t1,
                         lps=lps, lp_failures=failures, min_ones=min_ones)


def _lp_seconds(end: float) -> float:
    """One bound LP's time limit: :data:`~smug_opt.bounds.lp.LP_SECONDS`, or less before ``end``."""
    return float(min(LP_SECONDS, max(end - time.perf_counter(), 0.01)))
