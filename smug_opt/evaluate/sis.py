"""Sufficient Input Subsets for text by backward selection (Carter et al., AISTATS 2019).

BackSelect removes (replaces by ``mask_id``) one token at a time, each time the one whose
removal leaves the highest confidence, until none is left; the SIS is the shortest suffix
of that removal order (the tokens removed last) on which alone the confidence is still
``>= threshold`` (empty if the fully masked input already is). Tokens equal to ``mask_id``
(padding) are never candidates.
"""

from __future__ import annotations

import numpy as np

from smug_opt.evaluate._predict import PredictFn, label_confidences


def sufficient_input_subset(
    predict_fn: PredictFn,
    tokens: np.ndarray,
    label: int,
    *,
    threshold: float,
    mask_id: int = 0,
) -> np.ndarray:
    """A boolean (T,) mask of one sufficient input subset of ``tokens`` for ``label``.

    ``predict_fn`` takes token batches (N, T). Every BackSelect step is one batched call
    over the remaining tokens; finding the suffix is one more call. Raises ``ValueError`` if
    the full input is not itself above ``threshold`` (then no SIS exists).
    """
    tokens = np.asarray(tokens)
    if tokens.ndim != 1 or not np.issubdtype(tokens.dtype, np.integer):
        raise ValueError(f"tokens must be a 1-D integer array; got {tokens.dtype} {tokens.shape}")
    full = float(label_confidences(predict_fn, tokens[None], label)[0])
    if full < threshold:
        raise ValueError(
            f"confidence {full:.4g} for label {label} on the full input is below the SIS "
            f"threshold {threshold}: no sufficient subset exists"
        )
    remaining = np.flatnonzero(tokens != mask_id)
    if remaining.size == 0:
        raise ValueError(f"every token equals mask_id={mask_id}: nothing to select")
    current = tokens.copy()
    order = []
    while remaining.size > 1:
        batch = np.repeat(current[None], remaining.size, axis=0)
        batch[np.arange(remaining.size), remaining] = mask_id
        pick = int(np.argmax(label_confidences(predict_fn, batch, label)))
        current[remaining[pick]] = mask_id
        order.append(int(remaining[pick]))
        remaining = np.delete(remaining, pick)
    order.append(int(remaining[0]))
    kept_last = np.array(order[::-1])  # kept_last[:k] = the k tokens removed last
    n = kept_last.size
    suffixes = np.full((n, tokens.size), mask_id, dtype=tokens.dtype)  # k = 0 .. n-1 kept
    for k in range(1, n):
        suffixes[k, kept_last[:k]] = tokens[kept_last[:k]]
    above = np.flatnonzero(label_confidences(predict_fn, suffixes, label) >= threshold)
    size = int(above[0]) if above.size else n  # the whole input is sufficient (checked)
    mask = np.zeros(tokens.size, dtype=bool)
    mask[kept_last[:size]] = True
    return mask
