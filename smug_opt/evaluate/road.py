"""ROAD, RemOve And Debias (Rong et al., ICML 2022): a removal metric whose imputation does
not leak where the pixels were removed.

Deletion curves set removed pixels to a constant, so the *shape* of the removed region
tells the model what was there (the "class information leakage" Rong et al. measure).
ROAD instead fills each removed pixel by **noisy linear imputation**: every removed pixel
is the weighted mean of its 8 in-image neighbours (weight 1/6 for the 4 direct ones, 1/12
for the 4 diagonal ones), removed neighbours being unknowns themselves, so one sparse
linear system per image gives all of them (all channels at once); then Gaussian noise is
added to the imputed values. For each removal level ``p`` the top ``p`` of the pixels by
saliency (MoRF, most relevant first) or the bottom ``p`` (LeRF, least relevant first) are
removed and the model's confidence for the label is read on the imputed image.

A good map makes the MoRF confidence drop fast (low mean over the levels) and the LeRF
confidence stay high (high mean). Pixels of equal saliency are ordered at random (seeded),
so a binary map (a box, a mask) is not favoured by the image's raster order.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from smug_opt.evaluate._predict import PredictFn, label_confidences

__all__ = ["NEIGHBOUR_WEIGHTS", "ROAD_LEVELS", "RoadResult", "noisy_linear_imputation", "road"]

NEIGHBOUR_WEIGHTS: tuple[tuple[tuple[int, int], float], ...] = (
    ((-1, 0), 1 / 6), ((1, 0), 1 / 6), ((0, -1), 1 / 6), ((0, 1), 1 / 6),
    ((-1, -1), 1 / 12), ((-1, 1), 1 / 12), ((1, -1), 1 / 12), ((1, 1), 1 / 12),
)
"""Rong et al.'s neighbourhood: (row, column) offset and weight."""

ROAD_LEVELS: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
"""The fractions of pixels removed, as in the paper's figures (10 % to 90 %)."""


@dataclass(frozen=True)
class RoadResult:
    """Confidence for the label on the imputed image at each removal level, both orders.

    ``morf`` and ``lerf`` are the means over ``levels`` (MoRF: lower is better; LeRF:
    higher is better).
    """

    levels: np.ndarray = field(compare=False)
    morf_confidences: np.ndarray = field(compare=False)
    lerf_confidences: np.ndarray = field(compare=False)
    morf: float
    lerf: float


def noisy_linear_imputation(
    x: np.ndarray, removed: np.ndarray, *, noise: float = 0.01, rng: np.random.Generator | None = None
) -> np.ndarray:
    """``x`` (H, W, C) with the pixels where ``removed`` (H, W) is true imputed.

    Each removed pixel equals the weighted mean (:data:`NEIGHBOUR_WEIGHTS`, renormalised
    over the neighbours inside the image) of its neighbours, known or imputed; Gaussian
    noise of standard deviation ``noise`` × (the image's value span) is then added to the
    imputed values (``noise=0``: none). At least one pixel must stay known.
    """
    from scipy.sparse import coo_matrix
    from scipy.sparse.linalg import spsolve

    x = np.asarray(x, dtype=np.float64)
    removed = np.asarray(removed, dtype=bool)
    if x.ndim != 3 or removed.shape != x.shape[:2]:
        raise ValueError(f"x must be (H, W, C) and removed (H, W); got {x.shape} and {removed.shape}")
    if noise < 0:
        raise ValueError(f"noise must be >= 0; got {noise}")
    if removed.all():
        raise ValueError("every pixel is removed: there is nothing to impute from")
    out = x.copy()
    if not removed.any():
        return out
    h, w = removed.shape
    rows, cols = np.nonzero(removed)
    unknown = np.full(removed.shape, -1, dtype=np.intp)
    unknown[rows, cols] = np.arange(len(rows))
    n = len(rows)
    diagonal = np.zeros(n)
    rhs = np.zeros((n, x.shape[2]))
    a_rows, a_cols, a_vals = [], [], []
    for (dr, dc), weight in NEIGHBOUR_WEIGHTS:
        nr, nc = rows + dr, cols + dc
        inside = (nr >= 0) & (nr < h) & (nc >= 0) & (nc < w)
        ids = np.nonzero(inside)[0]
        diagonal[ids] += weight
        nr, nc = nr[ids], nc[ids]
        other = unknown[nr, nc]
        known = other < 0
        rhs[ids[known]] += weight * x[nr[known], nc[known]]
        a_rows.append(ids[~known])
        a_cols.append(other[~known])
        a_vals.append(np.full(int((~known).sum()), -weight))
    a_rows.append(np.arange(n))
    a_cols.append(np.arange(n))
    a_vals.append(diagonal)
    system = coo_matrix((np.concatenate(a_vals), (np.concatenate(a_rows), np.concatenate(a_cols))),
                        shape=(n, n)).tocsc()
    values = np.asarray(spsolve(system, rhs)).reshape(n, x.shape[2])
    if noise > 0:
        span = float(x.max() - x.min())
        values = values + (rng or np.random.default_rng(0)).normal(0.0, noise * span, values.shape)
    out[rows, cols] = values
    return out


def _order(saliency: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Flat pixel indices, most salient first; ties in a random (seeded) order."""
    flat = saliency.ravel()
    shuffled = rng.permutation(flat.size)
    return shuffled[np.argsort(-flat[shuffled], kind="stable")]


def road(
    predict_fn: PredictFn,
    x: np.ndarray,
    label: int,
    saliency: np.ndarray,
    *,
    levels: tuple[float, ...] = ROAD_LEVELS,
    noise: float = 0.01,
    seed: int = 0,
) -> RoadResult:
    """ROAD's MoRF and LeRF curves of ``saliency`` (H, W) for image ``x`` (H, W, C).

    At each fraction in ``levels`` that many pixels (rounded) are removed, most salient
    first (MoRF) or least salient first (LeRF), imputed by
    :func:`noisy_linear_imputation` (``noise``), and ``predict_fn`` reads the confidence for
    ``label`` (all imputed images in one batch). ``seed`` fixes the tie order and the noise.
    """
    dtype = np.asarray(x).dtype if np.issubdtype(np.asarray(x).dtype, np.floating) else np.float64
    x = np.asarray(x, dtype=np.float64)
    saliency = np.asarray(saliency, dtype=np.float64)
    if x.ndim != 3 or saliency.shape != x.shape[:2]:
        raise ValueError(f"ROAD needs an image (H, W, C) and an (H, W) map; got {x.shape} and "
                         f"{saliency.shape}")
    if not np.all(np.isfinite(saliency)):
        raise ValueError("saliency map contains NaN or infinite values")
    grid = np.asarray(levels, dtype=np.float64)
    if grid.ndim != 1 or grid.size == 0 or not np.all((grid > 0) & (grid < 1)):
        raise ValueError(f"levels must be fractions strictly between 0 and 1; got {levels}")
    rng = np.random.default_rng(seed)
    order = _order(saliency, rng)
    pixels = order.size
    images = []
    for reverse in (False, True):
        ranked = order[::-1] if reverse else order
        for level in grid:
            removed = np.zeros(pixels, dtype=bool)
            removed[ranked[: round(level * pixels)]] = True
            images.append(noisy_linear_imputation(x, removed.reshape(saliency.shape), noise=noise, rng=rng))
    conf = label_confidences(predict_fn, np.stack(images).astype(dtype), label)
    morf, lerf = conf[: grid.size], conf[grid.size:]
    return RoadResult(grid, morf, lerf, float(morf.mean()), float(lerf.mean()))
