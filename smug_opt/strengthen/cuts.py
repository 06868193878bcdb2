"""Valid inequalities with small integer coefficients, derived from exact pattern tables.

Every cut here is ``coef·p >= bound`` with integer ``coef`` and ``bound``, checked against
every allowed pattern ``p`` by construction (integers: no rounding anywhere).
"""

from __future__ import annotations

import numpy as np

__all__ = ["clause", "describes", "lifted_cardinality"]


def lifted_cardinality(live: np.ndarray, base: np.ndarray, lift: np.ndarray
                       ) -> tuple[np.ndarray, int] | None:
    """The cardinality cut ``Σ_{k in base} p_k >= m`` (``m`` the fewest ``base`` cells any
    allowed pattern has) lifted sequentially over the positions ``lift``.

    ``live`` is the ``(patterns, size)`` 0/1 matrix of the allowed patterns. Lifting
    position ``k`` gives it the coefficient ``m - min{lhs(p) : p allowed, p_k = 1}`` (never
    positive), the most the cut can take from it while every allowed pattern still holds.
    None when ``m`` is 0 (the cut would be trivial).
    """
    if live.shape[0] == 0 or base.size == 0:
        return None
    lhs = live[:, base].sum(axis=1).astype(np.int64)
    bound = int(lhs.min())
    if bound < 1:
        return None
    coef = np.zeros(live.shape[1], dtype=np.int64)
    coef[base] = 1
    for k in lift.tolist():
        on = live[:, k] == 1
        if not on.any():
            continue
        alpha = bound - int(lhs[on].min())
        if alpha:
            coef[k] = alpha
            lhs += alpha * live[:, k]
    return coef, bound


def describes(cuts: list[tuple[np.ndarray, int]], consistent: np.ndarray) -> np.ndarray:
    """Which rows of the 0/1 pattern matrix ``consistent`` satisfy every cut."""
    ok = np.ones(consistent.shape[0], dtype=bool)
    if not cuts:
        return ok
    # small integers (|coef| <= the pattern's size): every sum exact in float64 (BLAS, not
    # numpy's integer matmul)
    coefs = np.array([coef for coef, _ in cuts], dtype=np.float64)
    bounds = np.array([bound for _, bound in cuts], dtype=np.float64)
    return ok & np.all(consistent.astype(np.float64) @ coefs.T >= bounds, axis=1)


def clause(pattern: np.ndarray, free: np.ndarray) -> tuple[np.ndarray, int]:
    """The no-good cut excluding ``pattern`` on the positions ``free``:
    ``Σ_{p_k=0} x_k − Σ_{p_k=1} x_k >= 1 − |p|`` (as a coefficient vector over all positions)."""
    coef = np.zeros(pattern.shape[0], dtype=np.int64)
    on = pattern[free] == 1
    coef[free[~on]] = 1
    coef[free[on]] = -1
    return coef, 1 - int(on.sum())
