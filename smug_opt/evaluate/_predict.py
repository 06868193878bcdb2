"""The one place where a model's batched output becomes the confidence for a label."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

PredictFn = Callable[[np.ndarray], np.ndarray]
"""A batch of raw inputs (N, ...) -> class probabilities (N, K), or (N,)/(N, 1) for a sigmoid."""


def label_confidences(predict_fn: PredictFn, batch: np.ndarray, label: int) -> np.ndarray:
    """Call ``predict_fn`` once on ``batch`` and return the confidence for ``label``, shape (N,).

    A (N, K) output is read as K class probabilities; a (N,) or (N, 1) output as the sigmoid
    probability of class 1 (so label 0 gets ``1 - p``).
    """
    probs = np.asarray(predict_fn(batch), dtype=np.float64)
    n = len(batch)
    if probs.ndim == 2 and probs.shape[1] == 1:
        probs = probs[:, 0]
    if probs.ndim == 1:
        if probs.shape[0] != n:
            raise ValueError(f"predict_fn returned {probs.shape[0]} outputs for a batch of {n}")
        if label not in (0, 1):
            raise ValueError(f"label must be 0 or 1 for a single sigmoid output; got {label}")
        conf = probs if label == 1 else 1.0 - probs
    elif probs.ndim == 2 and probs.shape[0] == n:
        if not 0 <= label < probs.shape[1]:
            raise ValueError(f"label {label} is out of range for {probs.shape[1]} classes")
        conf = probs[:, label]
    else:
        raise ValueError(
            f"predict_fn must return probabilities of shape (N, K), (N, 1) or (N,) for a "
            f"batch of N={n}; got shape {probs.shape}"
        )
    if not np.all((conf >= 0.0) & (conf <= 1.0)):
        raise ValueError(
            "predict_fn must return probabilities in [0, 1] (not logits); got values in "
            f"[{np.nanmin(conf):.4g}, {np.nanmax(conf):.4g}]"
        )
    return conf


def chunks(n: int, batch_size: int) -> Iterator[slice]:
    """Slices covering ``range(n)`` in consecutive pieces of at most ``batch_size``."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1; got {batch_size}")
    for start in range(0, n, batch_size):
        yield slice(start, min(start + batch_size, n))
