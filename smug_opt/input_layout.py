"""An input array read in the shape smug-opt gives a model's input (channels last, as a
picture is shown), whichever layout it was saved in."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["in_input_shape"]


def in_input_shape(x: np.ndarray, input_shape: tuple[int, ...]) -> np.ndarray:
    """``x`` in ``input_shape`` when it can be read so, else ``x`` unchanged (the caller
    names the mismatch). A leading batch axis of one is dropped; an image array in the
    channels-first layout of PyTorch and ONNX, ``(C, H, W)`` for an input ``(H, W, C)``,
    is transposed (a plain reshape would interleave its channels); any other array of as
    many values is reshaped (``(28, 28)`` or ``(784,)`` for ``(28, 28, 1)``). An array
    whose shape is both, ``C = H = W``, is taken as channels last."""
    x = np.asarray(x)
    shape = tuple(int(d) for d in input_shape)
    if x.shape == shape or x.size != math.prod(shape):
        return x
    if x.ndim == len(shape) + 1 and x.shape[0] == 1:
        x = x[0]
    if len(shape) == 3 and x.shape == (shape[2], shape[0], shape[1]):
        return np.transpose(x, (1, 2, 0))
    return x.reshape(shape)
