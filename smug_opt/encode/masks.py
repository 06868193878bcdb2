"""Small masks the float64 network accepts, found before solving: a greedy mask, and a beam
search for a smaller one where the smaller masks are too many to try every one
(:func:`~smug_opt.encode.flat_enumeration.smaller_masks` tries them where they are not).
The encoder checks the one it keeps in exact arithmetic against its problem (it becomes
the solve's start and the cardinality row's cut-off)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from smug_opt.encode.masked import MaskedNetwork, cell_masks

__all__ = ["BEAM_WIDTH", "beam_mask", "greedy_mask"]

BEAM_WIDTH = 64
"""Masks kept per size by :func:`beam_mask`."""


def greedy_mask(network: MaskedNetwork) -> np.ndarray | None:
    """A small mask the float64 network accepts: add the cell that raises the worst output
    slack most until all are positive, then drop cells while that lasts. None if even the
    full mask fails."""
    n = network.num_cells
    tol = network.tolerance
    mask = np.zeros(n)
    while network.slack(mask[None, :])[0] <= tol:
        free = np.flatnonzero(mask == 0)
        if free.size == 0:
            return None
        trials = np.repeat(mask[None, :], free.size, axis=0)
        trials[np.arange(free.size), free] = 1.0
        mask[free[np.argmax(network.slack(trials))]] = 1.0
    while True:
        kept = np.flatnonzero(mask)
        if kept.size == 0:
            return mask
        trials = np.repeat(mask[None, :], kept.size, axis=0)
        trials[np.arange(kept.size), kept] = 0.0
        slack = network.slack(trials)
        if slack.max() <= tol:
            return mask
        mask[kept[np.argmax(slack)]] = 0.0


def beam_mask(network: MaskedNetwork, mask: np.ndarray, width: int = BEAM_WIDTH, *,
              seeds: np.ndarray | None = None, slack: Callable[[np.ndarray], np.ndarray] | None = None,
              levels: int | None = None) -> np.ndarray:
    """``mask``, or a mask of fewer cells the float64 network accepts, found by growing masks
    one cell at a time and keeping, at each size, the ``width`` whose worst output slack is
    highest (greedy is width 1; a wider beam finds masks whose cells only help together).
    It grows from the empty mask, or from ``seeds`` (the kept cells ``(rows, k)`` of masks
    of one size, best first: e.g. the best of a size searched in full), for at most
    ``levels`` sizes, and stops at the first size with an accepted mask, below ``mask``'s
    size (at most ``width·num_cells`` masks a size: its callers size ``width`` and
    ``levels`` by a work count). ``slack``: the worst-row slack of masks given as kept
    cells (default: :meth:`MaskedNetwork.cells_slack`)."""
    n = network.num_cells
    beam = np.zeros((1, 0), dtype=np.int64) if seeds is None else np.asarray(seeds, dtype=np.int64)[:width]
    rows = max(network.batch_rows(), 1)
    evaluate = slack or network.cells_slack
    sizes = range(beam.shape[1] + 1, int(mask.sum()))
    for _ in sizes[:levels]:
        grown = np.repeat(beam, n, axis=0)
        added = np.tile(np.arange(n), beam.shape[0])[:, None]
        fresh = ~np.any(grown == added, axis=1)
        candidates = np.unique(np.sort(np.hstack([grown, added])[fresh], axis=1), axis=0)
        values = np.concatenate([evaluate(candidates[start:start + rows])
                                 for start in range(0, candidates.shape[0], rows)])
        best = int(np.argmax(values))
        if values[best] > network.tolerance:
            return cell_masks(candidates[best][None, :], n)[0]
        beam = candidates[np.argsort(-values, kind="stable")[:width]]
    return mask
