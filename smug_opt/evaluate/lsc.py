"""The LSC score (Dabkowski & Gal 2017, as used by SMUG sec. 4) and the OptBox search.

``LSC = log(max(area_floor, a)) - log(c)``: ``a`` is the area fraction of the tightest box
around a (thresholded) map, ``c`` the model's confidence for the label on that box cropped
and resized back to the input size. Lower is better.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from smug_opt.evaluate._predict import PredictFn, chunks, label_confidences
from smug_opt.evaluate.boxes import Box, crop_and_resize, grid_boxes, tightest_box

AREA_FLOOR = 0.05
"""The paper's floor on the area fraction: boxes smaller than 5% score as 5%."""


@dataclass(frozen=True)
class LSCResult:
    """The LSC of one box on one input.

    ``threshold`` is the map value the box came from (mask = map > threshold); ``None``
    when the box was not obtained by thresholding a map (CenterBox, OptBox, ...).
    """

    lsc: float
    a: float
    c: float
    box: Box
    threshold: float | None


def lsc_value(a: np.ndarray | float, c: np.ndarray | float, area_floor: float = AREA_FLOOR):
    """``log(max(area_floor, a)) - log(c)``, elementwise; ``c = 0`` gives ``+inf``."""
    with np.errstate(divide="ignore"):
        return np.log(np.maximum(area_floor, a)) - np.log(c)


def _check_image(image: np.ndarray) -> np.ndarray:
    image = np.asarray(image)
    if image.ndim != 3:
        raise ValueError(f"image must be (H, W, C); got shape {image.shape}")
    if not np.all(np.isfinite(image)):
        raise ValueError("image contains NaN or infinite values")
    return image


def score_boxes(
    predict_fn: PredictFn,
    image: np.ndarray,
    label: int,
    boxes: list[Box],
    *,
    area_floor: float = AREA_FLOOR,
    batch_size: int | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """LSC, area fraction and confidence of each box: arrays of shape (len(boxes),).

    The crops go to ``predict_fn`` in batches of ``batch_size`` (default: all in one call).
    """
    image = _check_image(image)
    shape = image.shape[:2]
    if not boxes:
        raise ValueError("score_boxes needs at least one box; got none")
    step = len(boxes) if batch_size is None else batch_size
    conf = np.concatenate(
        [
            label_confidences(predict_fn, crop_and_resize(image, boxes[part]), label)
            for part in chunks(len(boxes), step)
        ]
    )
    area = np.array([b.area_fraction(shape) for b in boxes])
    return lsc_value(area, conf, area_floor), area, conf


def sweep_thresholds(saliency: np.ndarray, n_thresholds: int = 100) -> np.ndarray:
    """About ``n_thresholds`` thresholds over the map's distinct values, as the paper's code.

    Candidates are 0 and every distinct value, sorted; every ``round(n / n_thresholds)``-th
    is kept. Thresholds that select nothing (mask = map > t) are dropped.
    """
    if n_thresholds < 1:
        raise ValueError(f"n_thresholds must be >= 1; got {n_thresholds}")
    values = np.unique(np.append(0.0, saliency))
    step = max(round(values.size / n_thresholds), 1)
    picked = values[::step]
    return picked[picked < saliency.max()]


def lsc_score(
    predict_fn: PredictFn,
    image: np.ndarray,
    label: int,
    saliency: np.ndarray,
    *,
    n_thresholds: int = 100,
    area_floor: float = AREA_FLOOR,
) -> LSCResult:
    """The best LSC of a saliency map over a threshold sweep (one box for a boolean map).

    Each threshold ``t`` keeps the pixels with ``map > t``; its tightest box is cropped and
    resized. Distinct boxes are scored in ONE batched ``predict_fn`` call; ties go to the
    lowest threshold.
    """
    image = _check_image(image)
    saliency = np.asarray(saliency)
    if saliency.shape != image.shape[:2]:
        raise ValueError(
            f"saliency map shape {saliency.shape} does not match the image's (H, W)={image.shape[:2]}"
        )
    if saliency.dtype == bool:
        thresholds = np.array([0.0]) if saliency.any() else np.array([])
        saliency = saliency.astype(np.float64)
    else:
        saliency = saliency.astype(np.float64)
        if not np.all(np.isfinite(saliency)):
            raise ValueError("saliency map contains NaN or infinite values")
        thresholds = sweep_thresholds(saliency, n_thresholds)
    if thresholds.size == 0:
        raise ValueError(
            "saliency map selects no pixel at any threshold (mask = map > t); "
            f"its maximum is {saliency.max():.4g}: no box exists"
        )
    boxes = [tightest_box(saliency > t) for t in thresholds]
    unique = list(dict.fromkeys(boxes))
    scores, area, conf = score_boxes(predict_fn, image, label, unique, area_floor=area_floor)
    per_threshold = np.array([scores[unique.index(b)] for b in boxes])
    best = int(np.argmin(per_threshold))
    j = unique.index(boxes[best])
    return LSCResult(float(scores[j]), float(area[j]), float(conf[j]), boxes[best], float(thresholds[best]))


def box_lsc(
    predict_fn: PredictFn,
    image: np.ndarray,
    label: int,
    box: Box,
    *,
    area_floor: float = AREA_FLOOR,
) -> LSCResult:
    """The LSC of one given box (CenterBox, MaxBox, a ground-truth box)."""
    box = Box(*box)
    scores, area, conf = score_boxes(predict_fn, image, label, [box], area_floor=area_floor)
    return LSCResult(float(scores[0]), float(area[0]), float(conf[0]), box, None)


def opt_box(
    predict_fn: PredictFn,
    image: np.ndarray,
    label: int,
    *,
    grid: int = 10,
    min_cells: int = 2,
    area_floor: float = AREA_FLOOR,
    batch_size: int = 256,
) -> LSCResult:
    """OptBox: the lowest-LSC box by brute force over :func:`~.boxes.grid_boxes`.

    Predictions are batched, ``batch_size`` crops per call; ties go to the first box in
    the enumeration order (top, bottom, left, right ascending).
    """
    image = _check_image(image)
    boxes = grid_boxes(image.shape[:2], grid, min_cells)
    scores, area, conf = score_boxes(
        predict_fn, image, label, boxes, area_floor=area_floor, batch_size=batch_size
    )
    j = int(np.argmin(scores))
    return LSCResult(float(scores[j]), float(area[j]), float(conf[j]), boxes[j], None)
