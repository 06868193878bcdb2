"""Exact integer equivalents of small real rows: the ``integer_rows`` piece.

A row ``a·x > b`` (or ``>=``) over at most
:data:`~smug_opt.strengthen.rows.MAX_TABLE_SUPPORT` 0/1 cells is a threshold function of
its cells, so some row ``w·x >= t`` with small integers ``w``, ``t`` accepts exactly the
same patterns. Found by rounding ``a`` at growing scales and checked against the row's
exact table (every pattern consistent with the fixings), it replaces the real row: the
feasible set is unchanged, no strict margin or float tolerance is left, and the relaxation
tightens (a homogeneous ``a·x > 0`` relaxes to ``a·x >= 0``, which the empty mask meets;
``w·x >= t`` has ``t >= 1`` whenever the empty pattern is forbidden).
"""

from __future__ import annotations

import numpy as np

__all__ = ["SCALES", "integer_row"]

SCALES = np.concatenate([np.arange(1, 65), 2.0 ** np.arange(6.5, 14.5, 0.5)]).round()
"""The largest coefficient magnitudes tried, in order: every one up to 64, then about
√2 apart up to 2^14. Rows needing more keep their real form."""


def integer_row(coefs: np.ndarray, bits: np.ndarray, allowed: np.ndarray, consistent: np.ndarray
                ) -> tuple[np.ndarray, int] | None:
    """Integer ``(w, t)`` with ``w·p >= t`` exactly for the ``consistent`` rows ``p`` of the
    0/1 pattern matrix ``bits`` that are ``allowed``, or None (no scale in :data:`SCALES`
    works, or no consistent pattern is allowed).

    ``coefs`` (the row's real coefficients, one per column of ``bits``) guides the search:
    ``w = round(coefs · s / max|coefs|)`` for ``s`` in :data:`SCALES`, the first (smallest
    weights: the tightest relaxation) whose threshold ``t = min w·p`` over allowed patterns
    exceeds ``w·p`` of every forbidden one. The sums are of at most 12 integers below 2^15,
    exact in float64: the equivalence is exact, whatever the rounding of ``a``.
    """
    keep = allowed & consistent
    drop = ~allowed & consistent
    if not keep.any():
        return None
    peak = float(np.abs(coefs).max())
    if peak == 0.0:
        return None if drop.any() else (np.zeros(coefs.size, dtype=np.int64), 0)
    weights = np.rint(np.outer(SCALES, coefs / peak))  # (scales, cells), integers
    thresholds = (bits[keep].astype(np.float64) @ weights.T).min(axis=0)
    if drop.any():
        works = (bits[drop].astype(np.float64) @ weights.T).max(axis=0) < thresholds
    else:
        works = np.ones(SCALES.size, dtype=bool)
    if not works.any():
        return None
    first = int(np.argmax(works))
    return weights[first].astype(np.int64), int(thresholds[first])
