"""Bounds and a proven minimum by evaluating every small mask of a masked ReLU MLP.

When the masks of at most ``K`` ones (``K``: a known feasible mask's size) are few enough,
evaluating each one gives the exact range of every pre-activation over the masks that may
satisfy the output rows, and the fewest ones such a mask has (when they are too many, the
smaller sizes that fit prove a lower bound on the ones:
:mod:`smug_opt.encode.flat_enumeration`). Rigorous like
:mod:`smug_opt.encode.bounds`: every float64 value carries a bound on its rounding error.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from smug_opt.encode.masked import BATCH_BYTES
from smug_opt.exact import dot_error_bound

__all__ = ["MAX_ENUMERATED_MASKS", "batched_combinations", "combination_chunks", "enumerated_bounds",
           "mask_count"]

MAX_ENUMERATED_MASKS = 2_000_000
"""Masks of at most ``max_ones`` ones are enumerated for bounds when there are no more than
this many (e.g. up to 3 of 228 cells, 2 of 1,990; a few seconds); beyond, LPs or bound
propagation bound the ambiguous neurons."""



def mask_count(m: int, max_ones: int) -> int:
    """How many masks of ``m`` cells have at most ``max_ones`` ones."""
    return sum(math.comb(m, k) for k in range(min(max_ones, m) + 1))


def enumerated_bounds(A1: np.ndarray, b1: np.ndarray, layers: Sequence[tuple[np.ndarray, np.ndarray]],
                      out_rows: np.ndarray, out_rhs: np.ndarray, max_ones: int,
                      row_margin: np.ndarray | None = None
                      ) -> tuple[list[np.ndarray], list[np.ndarray], int] | None:
    """Bounds of every hidden layer over the masks with at most ``max_ones`` ones that may
    satisfy the output rows, by evaluating each such mask, and the fewest ones such a mask
    has (no mask with fewer can satisfy the rows); None when there are more than
    :data:`MAX_ENUMERATED_MASKS` or none may satisfy the rows.

    Rigorous: each layer's float64 values carry a bound ``eps`` on their distance to the
    exact values (rounding of the sums, ``2(n+3)u·magnitude``, plus the previous layer's
    ``eps`` through ``|W|``), bounds are widened by it, and a mask is dropped only when its
    output rows fail by more than their own error bound plus ``row_margin`` (per row: how
    far the rows given, and the problem's, may lie from the network's exact ones, when they
    are float64 products; None: 0).
    """
    if max_ones < 0 or mask_count(A1.shape[0], max_ones) > MAX_ENUMERATED_MASKS:
        return None
    margin = np.zeros(len(out_rhs)) if row_margin is None else np.asarray(row_margin, dtype=np.float64)
    lo, hi, fewest = _enumerate(A1, b1, layers, out_rows, out_rhs, max_ones, margin)
    return (lo, hi, fewest) if fewest >= 0 else None


def _enumerate(A1: np.ndarray, b1: np.ndarray, layers: Sequence[tuple[np.ndarray, np.ndarray]],
               out_rows: np.ndarray, out_rhs: np.ndarray, max_ones: int, row_margin: np.ndarray
               ) -> tuple[list[np.ndarray], list[np.ndarray], int]:
    """Each layer's bounds over the masks of at most ``max_ones`` ones that may satisfy the
    output rows (within ``row_margin``), and the fewest ones of such a mask (-1: none may)."""
    m = A1.shape[0]
    D = np.asarray(out_rows, dtype=np.float64)
    abs_D = np.abs(D)
    widths = [A1.shape[1], *(W.shape[1] for W, _ in layers)]
    lo = [np.full(w, np.inf) for w in widths]
    hi = [np.full(w, -np.inf) for w in widths]
    top = np.sort(np.abs(A1), axis=0)[::-1][:max(max_ones, 1)].sum(axis=0)
    eps1 = dot_error_bound(max_ones, np.abs(b1) + top)
    fewest = -1
    # per mask and layer about 3 arrays live at once, and the first layer gathers max_ones rows of A1
    rows = int(min(4096, max(1, BATCH_BYTES // (8 * (3 + max_ones) * sum(widths)))))
    for k in range(min(max_ones, m) + 1):
        for idx in batched_combinations(m, k, rows=rows):
            z = b1 + A1[idx].sum(axis=1) if k else np.broadcast_to(b1, (1, b1.size))
            values, eps = [z], [eps1]
            for W, b in layers:  # float values, and a bound on their error for this chunk
                h = np.maximum(values[-1], 0.0)
                # h >= 0, so the largest row's magnitude is at most that of the rows' maximum:
                # one vector product instead of a second full one
                magnitude = np.abs(b) + h.max(axis=0) @ np.abs(W)
                eps.append(np.abs(W).T @ eps[-1] + dot_error_bound(W.shape[0], magnitude))
                values.append(h @ W + b)
            h_last = np.maximum(values[-1], 0.0)
            magnitude_out = (np.abs(out_rhs) + h_last @ abs_D.T).max(axis=0)
            err = abs_D @ eps[-1] + dot_error_bound(D.shape[1], magnitude_out)
            ok = np.all(h_last @ D.T - out_rhs >= -(err + row_margin), axis=1)  # may satisfy the rows
            if not ok.any():
                continue
            fewest = k if fewest < 0 else fewest
            for layer, (z_layer, e) in enumerate(zip(values, eps, strict=True)):
                lo[layer] = np.minimum(lo[layer], z_layer[ok].min(axis=0) - e)
                hi[layer] = np.maximum(hi[layer], z_layer[ok].max(axis=0) + e)
    return lo, hi, fewest


def batched_combinations(m: int, k: int, rows: int = 4096) -> list[np.ndarray]:
    """:func:`combination_chunks` merged into batches of at most ``rows`` subsets (fewer,
    larger array operations; a larger chunk is split)."""
    chunks = [piece for chunk in combination_chunks(m, k)
              for piece in np.array_split(chunk, -(-chunk.shape[0] // max(rows, 1)))]
    batches: list[np.ndarray] = []
    while chunks:
        batch = [chunks.pop(0)]
        while chunks and sum(c.shape[0] for c in batch) + chunks[0].shape[0] <= rows:
            batch.append(chunks.pop(0))
        batches.append(np.vstack(batch))
    return batches


def combination_chunks(m: int, k: int) -> list[np.ndarray]:
    """All ``k``-subsets of ``range(m)`` as index arrays of shape ``(count, k)``, one chunk
    per first index (vectorised: no Python tuple per subset)."""
    if k == 0:
        return [np.zeros((1, 0), dtype=np.int64)]
    if k == 1:
        return [np.arange(m, dtype=np.int64)[:, None]]
    return [np.hstack([np.full((rest.shape[0], 1), first, dtype=np.int64), rest + first + 1])
            for first in range(m - k + 1)
            for rest in [_all_combinations(m - first - 1, k - 1)]]


def _all_combinations(n: int, k: int) -> np.ndarray:
    """Every ``k``-subset of ``range(n)``, one per row, in lexicographic order."""
    if k == 1:
        return np.arange(n, dtype=np.int64)[:, None]
    if k == 2:
        return np.column_stack(np.triu_indices(n, 1)).astype(np.int64)
    parts = [np.hstack([np.full((rest.shape[0], 1), first, dtype=np.int64), rest + first + 1])
             for first in range(n - k + 1) for rest in [_all_combinations(n - first - 1, k - 1)]]
    return np.vstack(parts) if parts else np.zeros((0, k), dtype=np.int64)
