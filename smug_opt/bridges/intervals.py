"""Interval arithmetic for ReLU pre-activations from variable bounds (outward-safe)."""

from __future__ import annotations

import numpy as np

from smug_opt.ir import Problem

__all__ = ["relu_preactivation_bounds"]

_WIDEN = 1e-9  # relative outward widening that covers float64 rounding in the sums


def _widened(terms: np.ndarray, const: float, direction: float) -> float:
    """``const + Σ terms`` moved outward (``direction`` ±1) by a bound on its rounding error;
    a sum of zeros stays exact (a bound of exactly 0 needs no widening)."""
    magnitude = np.abs(terms).sum() + abs(const)
    slack = _WIDEN * magnitude + (1e-300 if magnitude > 0 else 0.0)
    return float(const + terms.sum() + direction * slack)


def relu_preactivation_bounds(problem: Problem) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Valid bounds on every ReLU pre-activation and on every variable.

    Returns ``(z_lo, z_hi, var_lb, var_ub)``: the declared pre-activation bounds intersected
    with interval arithmetic over the variable bounds, propagated through the ReLUs in
    order (a ReLU output's bounds become ``[max(0, lo), max(0, hi)]`` intersected with its
    declared bounds). Rounding is covered by a small outward widening, so the bounds never
    cut off a point that is feasible in exact arithmetic.
    """
    lb = problem.lb.copy()
    ub = problem.ub.copy()
    relu_in = problem.relu_in
    r = problem.num_relus
    z_lo = np.empty(r)
    z_hi = np.empty(r)
    for k in range(r):
        lo_i, hi_i = relu_in.indptr[k], relu_in.indptr[k + 1]
        cols = relu_in.indices[lo_i:hi_i]
        a = relu_in.data[lo_i:hi_i]
        c = problem.relu_const[k]
        lo_terms = np.where(a > 0, a * lb[cols], a * ub[cols])
        hi_terms = np.where(a > 0, a * ub[cols], a * lb[cols])
        lo = max(_widened(lo_terms, c, -1.0), problem.relu_lo[k])
        hi = min(_widened(hi_terms, c, 1.0), problem.relu_hi[k])
        z_lo[k], z_hi[k] = lo, hi
        out = problem.relu_out[k]
        lb[out] = max(lb[out], max(lo, 0.0))
        ub[out] = min(ub[out], max(hi, 0.0))
    return z_lo, z_hi, lb, ub
