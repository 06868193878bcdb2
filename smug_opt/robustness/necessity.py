"""Which fixed values are necessary, found for many at once: a batched PGD attack in which
row ``r`` may move the already freed values and one candidate value ``c_r`` (each within
its range), every row confirmed by a float64 forward pass before it counts.

Freeing a value only adds counterexamples, so a row that breaks the label shows its
candidate necessary for every larger free set too: the traversal of
:mod:`smug_opt.robustness.explanation` asks no query about it.
"""

from __future__ import annotations

import numpy as np

from smug_opt.network.flat import FlatNetwork, Preprocess
from smug_opt.robustness.attack import flat_gradient, unsafe_loss
from smug_opt.vnnlib import Conjunct

__all__ = ["necessary_by_attack"]

ROWS_PER_BATCH = 256
"""Candidates attacked together (bounds the batch's memory: rows × inputs × 8 bytes × 4)."""


def necessary_by_attack(net: FlatNetwork, preprocess: Preprocess, lo: np.ndarray, hi: np.ndarray,
                        low: np.ndarray, high: np.ndarray, candidates: np.ndarray,
                        region: tuple[Conjunct, ...], *, steps: int = 30, start: np.ndarray | None = None
                        ) -> dict[int, np.ndarray]:
    """Per candidate shown necessary, its counterexample (model input, flat).

    ``[lo, hi]``: the box of the current free set (model input units, flat); candidate ``c``
    may move within ``[low[c], high[c]]`` on top of it. Each row starts from ``start`` (a
    point of the box, default its centre) with the candidate at the end of its range the
    gradient points to, and takes ``steps`` sign-gradient steps with a decaying size.
    A row counts only when its float64 outputs lie in ``region``."""
    found: dict[int, np.ndarray] = {}
    base = 0.5 * (lo + hi) if start is None else np.clip(np.asarray(start, dtype=np.float64), lo, hi)
    for s in range(0, candidates.size, ROWS_PER_BATCH):
        part = np.asarray(candidates[s:s + ROWS_PER_BATCH])
        rows = np.arange(part.size)
        box_lo, box_hi = np.tile(lo, (part.size, 1)), np.tile(hi, (part.size, 1))
        box_lo[rows, part], box_hi[rows, part] = low[part], high[part]
        width = box_hi - box_lo
        x = np.tile(base, (part.size, 1))
        for step in range(steps + 1):
            values = net.forward(preprocess(x))
            loss, g_scores = unsafe_loss(values[-1], region)
            for r in np.flatnonzero(loss <= 0):
                c = int(part[r])
                if c not in found and any(d.holds(values[-1][r]) for d in region):
                    found[c] = x[r].copy()
            if step == steps:
                break
            g = preprocess.backward(flat_gradient(net, values, g_scores), lo.size)
            if step == 0:  # the candidate's end of its range that the gradient points to
                x[rows, part] = np.where(g[rows, part] > 0, box_lo[rows, part], box_hi[rows, part])
                continue
            size = 0.25 * width * (1.0 - step / steps) + 1e-3 * width
            x = np.clip(x - size * np.sign(g), box_lo, box_hi)
    return found
