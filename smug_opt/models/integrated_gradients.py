"""Integrated Gradients on the first layer's post-ReLU activations, and the top-k neurons.

Sundararajan, Taly and Yan, "Axiomatic Attribution for Deep Networks", ICML 2017; used
on the first-layer activations ``h`` by SMUG (Sahoo et al., ICLR 2021) to rank neurons.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from smug_opt.models.base import ModelAdapter

__all__ = ["Attribution", "CompletenessWarning", "integrated_gradients", "top_k_neurons"]

_EPS = 1e-12


class CompletenessWarning(UserWarning):
    """Integrated Gradients do not add up to ``F(h) - F(0)`` within the tolerance."""


@dataclass(frozen=True, eq=False)
class Attribution:
    """IG of the target score with respect to each first-layer neuron.

    ``values`` has the shape of ``h``; ``score_h = F(h)`` and ``score_0 = F(0)`` are the
    target scores; ``completeness_error = |Σ values − (F(h) − F(0))| / max(|F(h)|, eps)``.
    """

    values: np.ndarray
    target: int
    score_h: float
    score_0: float
    completeness_error: float
    steps: int


def integrated_gradients(
    adapter: ModelAdapter,
    x: np.ndarray,
    *,
    target: int | None = None,
    steps: int = 64,
    tolerance: float = 0.05,
) -> Attribution:
    """IG of class ``target`` (default: the predicted class) on ``h = relu(W1·x + b1)``.

    Zero baseline, straight path, midpoint Riemann sum over ``steps`` points
    ``α = (i + ½) / steps``. All points plus ``h`` and ``0`` go through the head in one
    ``head_gradient`` call (plus one ``head`` call when the target is predicted). Warns
    with :class:`CompletenessWarning` when ``completeness_error > tolerance``.
    """
    if steps < 1:
        raise ValueError(f"steps must be positive, got {steps}")
    _, h = adapter.first_layer(x)
    if target is None:
        target = adapter.predicted_target(adapter.head(h[None])[0])
    alphas = (np.arange(steps) + 0.5) / steps
    path = np.concatenate([alphas.reshape(-1, *[1] * h.ndim) * h, h[None], np.zeros_like(h)[None]])
    scores, grads = adapter.head_gradient(path, target)
    values = h * grads[:steps].mean(axis=0)
    score_h, score_0 = float(scores[steps]), float(scores[steps + 1])
    error = abs(values.sum() - (score_h - score_0)) / max(abs(score_h), _EPS)
    if error > tolerance:
        warnings.warn(
            f"Integrated Gradients are incomplete for target {target}: Σ IG = {values.sum():.6g} "
            f"but F(h) − F(0) = {score_h - score_0:.6g} (relative error {error:.3g} > "
            f"{tolerance}); use more steps",
            CompletenessWarning,
            stacklevel=2,
        )
    return Attribution(values, int(target), score_h, score_0, float(error), steps)


def top_k_neurons(attribution: Attribution, k: int) -> np.ndarray:
    """Flat indices of the ``k`` neurons with the largest positive attribution, descending.

    Ties keep the lower index first. With fewer than ``k`` positive attributions all of
    them are returned, with a warning; with none, ``ValueError``.
    """
    if k < 1:
        raise ValueError(f"k must be positive, got {k}")
    flat = attribution.values.ravel()
    positive = np.flatnonzero(flat > 0)
    if positive.size == 0:
        raise ValueError(
            f"no first-layer neuron has a positive attribution for target "
            f"{attribution.target} (F(h) = {attribution.score_h:.6g}, "
            f"F(0) = {attribution.score_0:.6g}); there is nothing to keep active"
        )
    ranked = positive[np.argsort(-flat[positive], kind="stable")]
    if ranked.size < k:
        warnings.warn(
            f"only {ranked.size} neurons have a positive attribution, fewer than k = {k}; using all of them",
            UserWarning,
            stacklevel=2,
        )
    return ranked[:k]
