"""Integrated Gradients on the first layer's post-ReLU activations, and the top-k neurons.

Sundararajan, Taly and Yan, "Axiomatic Attribution for Deep Networks", ICML 2017; used
on the first-layer activations ``h`` by SMUG (Sahoo et al., ICLR 2021) to rank neurons.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from smug_opt.errors import ParameterError
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
    batch_size: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Attribution:
    """IG of class ``target`` (default: the predicted class) on ``h = σ(W1·x + b1)``.

    Zero baseline, straight path, midpoint Riemann sum over ``steps`` points
    ``α = (i + ½) / steps``. The points plus ``h`` and ``0`` go through the head in
    batches of ``batch_size`` (default: the adapter's ``gradient_batch``, sized from the
    head's memory footprint), built one batch at a time; ``progress(done, total)`` is
    called after each. Warns with :class:`CompletenessWarning` when
    ``completeness_error > tolerance``.
    """
    if steps < 1:
        raise ParameterError("steps", f"must be positive, got {steps}")
    if batch_size is not None and batch_size < 1:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    _, h = adapter.first_layer(x)
    if target is None:
        target = adapter.predicted_target(adapter.head(h[None])[0])
    points = np.concatenate([(np.arange(steps) + 0.5) / steps, [1.0, 0.0]])
    size = batch_size or adapter.gradient_batch
    scores = np.empty(points.size)
    grad_sum = np.zeros_like(h)
    for start in range(0, points.size, size):
        alphas = points[start : start + size]
        scores[start : start + alphas.size], grads = adapter.head_gradient(
            alphas.reshape(-1, *[1] * h.ndim) * h, target, batch_size=alphas.size
        )
        grad_sum += grads[: max(0, min(alphas.size, steps - start))].sum(axis=0)
        if progress is not None:
            progress(start + alphas.size, points.size)
    values = h * (grad_sum / steps)
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


def top_k_neurons(attribution: Attribution, k: int, *, eligible: np.ndarray | None = None) -> np.ndarray:
    """Flat indices of the ``k`` neurons with the largest positive attribution, descending.

    ``eligible`` (flat bool, optional) limits the choice, e.g. to neurons with a positive
    pre-activation (all that a ReLU neuron with positive attribution has anyway; other
    activations can give positive attribution to a negative one, which no mask can keep
    above ``γ·o``). Ties keep the lower index first. With fewer than ``k`` positive
    attributions all of them are returned, with a warning; with none, ``ValueError``.
    """
    if k < 1:
        raise ParameterError("k", f"must be positive, got {k}")
    flat = attribution.values.ravel()
    keep = flat > 0
    if eligible is not None:
        eligible = np.asarray(eligible, dtype=bool).reshape(-1)
        if eligible.shape != flat.shape:
            raise ValueError(f"eligible must have {flat.size} entries, got {eligible.size}")
        keep &= eligible
    positive = np.flatnonzero(keep)
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
