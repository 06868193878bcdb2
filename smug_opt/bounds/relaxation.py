"""Linear relaxations of a flat network's piecewise-linear layers over input intervals.

For an elementwise layer ``y = f(v)`` with ``v ∈ [low, high]`` per neuron, :func:`elementwise`
gives float slopes and intercepts with ``a_lo·v + b_lo <= f(v) <= a_hi·v + b_hi`` for every
``v`` in the interval, exactly (chords rounded outward, see
:mod:`smug_opt.bounds.rounding`). Stable neurons are exact (``f`` is linear on their
interval); on an unstable one the side that meets the kink is a chord and the other side
the adaptive choice of CROWN (Zhang et al., 2018): the linear piece whose range is larger.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from smug_opt.bounds.rounding import down, lower_chord, up, upper_chord
from smug_opt.network.flat import FlatLayer

__all__ = ["Relaxation", "elementwise", "is_unstable", "maxpool_choice"]


@dataclass(frozen=True, eq=False)
class Relaxation:
    """``a_lo·v + b_lo <= f(v) <= a_hi·v + b_hi`` per neuron, for ``v`` in its interval."""

    a_lo: np.ndarray
    b_lo: np.ndarray
    a_hi: np.ndarray
    b_hi: np.ndarray


def elementwise(layer: FlatLayer, low: np.ndarray, high: np.ndarray) -> Relaxation:
    """The relaxation of a ``relu``, ``leaky_relu`` or ``clip`` layer over ``[low, high]``."""
    with np.errstate(all="ignore"):
        if layer.kind == "relu":
            return _leaky(0.0, low, high)
        if layer.kind == "leaky_relu":
            return _leaky(layer.alpha, low, high)
        if layer.kind == "clip":
            return _clip(layer.lo, layer.hi, low, high)
    raise ValueError(f"no elementwise relaxation for a {layer.kind!r} layer")


def is_unstable(layer: FlatLayer, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Which neurons' inputs straddle a kink of the layer (all of them for max pooling)."""
    if layer.kind in ("relu", "leaky_relu"):
        return (low < 0) & (high > 0)
    if layer.kind == "clip":
        return ((low < layer.lo) & (high > layer.lo)) | ((low < layer.hi) & (high > layer.hi))
    return np.ones(low.shape, dtype=bool)


def _leaky(alpha: float, low: np.ndarray, high: np.ndarray) -> Relaxation:
    """``f(v) = v`` for ``v >= 0``, ``alpha·v`` below (ReLU: ``alpha = 0``); convex for
    ``alpha <= 1``, concave above."""
    if not alpha >= 0:
        raise ValueError(f"leaky_relu needs alpha >= 0 (a monotone activation), got {alpha!r}")
    n = low.size
    ones, zeros = np.ones(n), np.zeros(n)
    dead, active = high <= 0, low >= 0
    unstable = ~dead & ~active
    slope_line = np.where(high >= -low, 1.0, alpha)  # CROWN's choice for the side without the kink
    if alpha <= 1:
        s, b = upper_chord(low, up(alpha * low), high, high)
        a_lo, b_lo, a_hi, b_hi = slope_line, zeros, s, b
    else:
        s, b = lower_chord(low, down(alpha * low), high, high)
        a_lo, b_lo, a_hi, b_hi = s, b, slope_line, zeros
    linear = np.where(dead, alpha, ones)
    return Relaxation(np.where(unstable, a_lo, linear), np.where(unstable, b_lo, 0.0),
                      np.where(unstable, a_hi, linear), np.where(unstable, b_hi, 0.0))


def _clip(lo: float, hi: float, low: np.ndarray, high: np.ndarray) -> Relaxation:
    """``f(v) = min(max(v, lo), hi)``: convex across ``lo`` alone, concave across ``hi``
    alone; across both, the chords through the two kinks' neighbours."""
    if not lo < hi:
        raise ValueError(f"clip needs lo < hi, got lo={lo!r}, hi={hi!r}")
    n = low.size
    lo_v, hi_v = np.full(n, lo), np.full(n, hi)
    ones, zeros = np.ones(n), np.zeros(n)
    below, above = high <= lo, low >= hi
    inside = (low >= lo) & (high <= hi)
    low_kink = (low < lo) & (high > lo) & (high <= hi)
    high_kink = (low >= lo) & (low < hi) & (high > hi)
    both = (low < lo) & (high > hi)
    # convex across lo: chord above; below: v or lo, whichever piece covers more
    s1, b1 = upper_chord(low, lo_v, high, high)
    keep_v = (high - lo) >= (lo - low)
    # concave across hi: chord below; above: v or hi
    s2, b2 = lower_chord(low, low, high, hi_v)
    keep_v2 = (hi - low) >= (high - hi)
    # across both: chord above through (low, lo), (hi, hi); below through (lo, lo), (high, hi)
    s3, b3 = upper_chord(low, lo_v, hi_v, hi_v)
    s4, b4 = lower_chord(lo_v, lo_v, high, hi_v)

    def pick(stable_a, stable_b, *cases):
        a, b = stable_a, stable_b
        for mask, case_a, case_b in cases:
            a, b = np.where(mask, case_a, a), np.where(mask, case_b, b)
        return a, b

    flat_a = np.where(inside, ones, zeros)
    flat_b = np.where(inside, zeros, np.where(below, lo_v, np.where(above, hi_v, zeros)))
    a_lo, b_lo = pick(flat_a, flat_b, (low_kink, np.where(keep_v, ones, zeros), np.where(keep_v, 0.0, lo_v)),
                      (high_kink, s2, b2), (both, s4, b4))
    a_hi, b_hi = pick(flat_a, flat_b, (low_kink, s1, b1),
                      (high_kink, np.where(keep_v2, ones, zeros), np.where(keep_v2, 0.0, hi_v)),
                      (both, s3, b3))
    return Relaxation(a_lo, b_lo, a_hi, b_hi)


def maxpool_choice(windows: np.ndarray, low: np.ndarray, high: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For ``y = max over a window of v``: the input with the greatest lower bound per output
    (``y >= v[choice]``), whether it dominates (its lower bound >= every other's upper bound,
    so ``y = v[choice]``), and the window's largest upper bound (``y <= that``)."""
    valid = windows >= 0
    idx = np.where(valid, windows, 0)
    lows = np.where(valid, low[idx], -np.inf)
    highs = np.where(valid, high[idx], -np.inf)
    best = np.argmax(lows, axis=1)
    rows = np.arange(windows.shape[0])
    choice = idx[rows, best]
    others = highs.copy()
    others[rows, best] = -np.inf
    dominates = lows[rows, best] >= others.max(axis=1)
    return choice, dominates, highs.max(axis=1)
