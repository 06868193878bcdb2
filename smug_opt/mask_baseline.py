"""What a masked input value becomes: the baseline picture a mask falls back to.

SMUG's first layer reads ``x_b + M · (x − x_b)`` for a cell mask ``M``; the paper's ``x_b``
is 0 after preprocessing (mid-grey for inputs scaled to [−1, 1]). On a network whose first
layer is followed by BatchNorm, 0 often keeps the chosen neurons active on its own and the
smallest mask is empty, so the baseline is a stated choice (:class:`~smug_opt.parameters.Baseline`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from smug_opt.parameters import Baseline

if TYPE_CHECKING:
    from smug_opt.models.base import ModelAdapter

__all__ = ["BLUR_FRACTION", "baseline_affine_input", "baseline_input"]

BLUR_FRACTION = 1 / 16
"""The blur baseline's Gaussian σ as a fraction of the picture's larger side (14 px at 224)."""


def baseline_input(baseline: Baseline | str, x: np.ndarray, *,
                   pixel_mean: tuple[float, ...] | None = None) -> np.ndarray | None:
    """The raw input (``x``'s shape) a masked value falls back to, or None for
    :attr:`Baseline.ZERO` (0 at the first affine layer's input, not a raw input).

    ``x`` is a picture ``(H, W)`` or ``(H, W, C)``, raw (before the model's preprocessing);
    ``pixel_mean`` is the model's per-channel training mean (needed for ``mean``)."""
    baseline = Baseline.parse(baseline)
    if baseline is Baseline.ZERO:
        return None
    x = np.asarray(x, dtype=np.float64)
    if x.ndim not in (2, 3):
        raise ValueError(f"the {baseline} baseline needs a picture (H, W) or (H, W, C); got an "
                         f"input of shape {x.shape} (use --baseline zero)")
    if baseline is Baseline.BLACK:
        return np.zeros_like(x)
    if baseline is Baseline.MEAN:
        if pixel_mean is None:
            raise ValueError("the mean baseline needs the model's training mean; this model declares "
                             "none (use --baseline zero, black or blur)")
        channels = 1 if x.ndim == 2 else x.shape[2]
        if len(pixel_mean) != channels:
            raise ValueError(f"the model's mean has {len(pixel_mean)} channels, the input {channels}")
        mean = np.asarray(pixel_mean, dtype=np.float64)
        return np.broadcast_to(mean if x.ndim == 3 else mean[0], x.shape).copy()
    from scipy.ndimage import gaussian_filter

    sigma = BLUR_FRACTION * max(x.shape[:2])
    return gaussian_filter(x, sigma=(sigma, sigma, 0)[: x.ndim], mode="nearest")


def baseline_affine_input(adapter: ModelAdapter, baseline: Baseline | str, picture: np.ndarray, *,
                          pixel_mean: tuple[float, ...] | None = None) -> np.ndarray | None:
    """The first affine layer's input for the baseline of ``picture`` (raw, in the shape the
    data came in: the model's input reshaped from it), None for :attr:`Baseline.ZERO`."""
    raw = baseline_input(baseline, picture, pixel_mean=pixel_mean)
    return None if raw is None else adapter.affine_input(adapter.model_input(raw))
