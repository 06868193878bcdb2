"""Deletion and insertion curves (Petsiuk et al. 2018): a faithfulness check cropping cannot game.

Cells of the input (``cell`` x ``cell`` pixels for images, ``cell`` tokens for text; a tuple
gives one size per axis, as SMUG's mask cells do) are
ranked by their mean saliency, highest first (ties: lower cell index first). Deletion
replaces the top-ranked cells with ``baseline`` one step at a time; insertion starts from
``baseline`` and puts them back. The curve is the model's confidence for the label against
the fraction of cells changed; its area (trapezoid rule) is the score: low is good for
deletion, high for insertion.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from smug_opt.errors import ParameterError
from smug_opt.evaluate._predict import PredictFn, chunks, label_confidences

CURVE_STEPS = 100
"""Evaluation points of a deletion or insertion curve unless told otherwise."""


@dataclass(frozen=True)
class Curve:
    """Confidence for the label at each fraction of cells changed, and its area."""

    fractions: np.ndarray = field(compare=False)
    confidences: np.ndarray = field(compare=False)
    auc: float


def cell_ids(shape: tuple[int, ...], cell: int | tuple[int, ...]) -> np.ndarray:
    """The cell index of every position of a spatial ``shape`` (row-major over cells);
    ``cell`` is one size for every axis or one per axis, as in :class:`SmugParameters`."""
    cells = tuple(cell) if isinstance(cell, tuple) else (cell,) * len(shape)
    if len(cells) != len(shape) or min(cells) < 1:
        raise ParameterError("cell", f"must be >= 1, one size or one per axis of {shape}; got {cell!r}")
    grid = tuple(-(-s // c) for s, c in zip(shape, cells, strict=True))
    coords = np.meshgrid(*(np.arange(s) // c for s, c in zip(shape, cells, strict=True)), indexing="ij")
    return np.ravel_multi_index(tuple(coords), grid)


def _curve(
    predict_fn: PredictFn,
    x: np.ndarray,
    label: int,
    saliency: np.ndarray,
    *,
    insert: bool,
    cell: int | tuple[int, ...],
    baseline: float | np.ndarray,
    steps: int | None,
    batch_size: int,
) -> Curve:
    x = np.asarray(x)
    saliency = np.asarray(saliency, dtype=np.float64)
    if saliency.ndim == 0 or x.shape[: saliency.ndim] != saliency.shape:
        raise ValueError(
            f"saliency shape {saliency.shape} must be the leading (spatial) shape of the "
            f"input; got input shape {x.shape}"
        )
    if not np.all(np.isfinite(saliency)):
        raise ValueError("saliency map contains NaN or infinite values")
    base = np.broadcast_to(np.asarray(baseline, dtype=x.dtype), x.shape)
    ids = cell_ids(saliency.shape, cell)
    n_cells = int(ids.max()) + 1
    score = np.bincount(ids.ravel(), saliency.ravel(), n_cells) / np.bincount(ids.ravel())
    rank = np.empty(n_cells, dtype=np.intp)
    rank[np.argsort(-score, kind="stable")] = np.arange(n_cells)
    pixel_rank = rank[ids].reshape(saliency.shape + (1,) * (x.ndim - saliency.ndim))
    if steps is None or steps >= n_cells:
        counts = np.arange(n_cells + 1)
    else:
        counts = np.unique(np.round(np.linspace(0, n_cells, steps + 1)).astype(np.intp))
    start, end = (base, x) if insert else (x, base)
    conf = np.empty(counts.size)
    for part in chunks(counts.size, batch_size):
        changed = pixel_rank[None] < counts[part].reshape((-1,) + (1,) * x.ndim)
        conf[part] = label_confidences(predict_fn, np.where(changed, end, start), label)
    fractions = counts / n_cells
    area = float(np.sum(np.diff(fractions) * (conf[1:] + conf[:-1]) / 2.0))  # trapezoid rule
    return Curve(fractions, conf, area)


def deletion_curve(
    predict_fn: PredictFn,
    x: np.ndarray,
    label: int,
    saliency: np.ndarray,
    *,
    cell: int | tuple[int, ...] = 1,
    baseline: float | np.ndarray = 0.0,
    steps: int | None = CURVE_STEPS,
    batch_size: int = 128,
) -> Curve:
    """Confidence as the most salient cells are replaced by ``baseline`` (lower AUC = better).

    ``x`` is (H, W, C) with an (H, W) map, or tokens (T,) with a (T,) map and
    ``baseline`` the mask/pad id. ``steps`` evaluation points (``None``: every cell), sent
    to ``predict_fn`` ``batch_size`` at a time.
    """
    return _curve(
        predict_fn,
        x,
        label,
        saliency,
        insert=False,
        cell=cell,
        baseline=baseline,
        steps=steps,
        batch_size=batch_size,
    )


def insertion_curve(
    predict_fn: PredictFn,
    x: np.ndarray,
    label: int,
    saliency: np.ndarray,
    *,
    cell: int | tuple[int, ...] = 1,
    baseline: float | np.ndarray = 0.0,
    steps: int | None = CURVE_STEPS,
    batch_size: int = 128,
) -> Curve:
    """Confidence as the most salient cells are put back onto ``baseline`` (higher AUC = better).

    Arguments as :func:`deletion_curve`.
    """
    return _curve(
        predict_fn,
        x,
        label,
        saliency,
        insert=True,
        cell=cell,
        baseline=baseline,
        steps=steps,
        batch_size=batch_size,
    )
