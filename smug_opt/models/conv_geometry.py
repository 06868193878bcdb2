"""The geometry of a convolution's windows: TensorFlow's padding, output sizes, and which
input grid point every kernel tap reads at every output position."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["ReceptiveField", "conv_output_size", "resolve_padding", "window_indices"]


def resolve_padding(mode: str, size: int, kernel: int, stride: int, dilation: int) -> tuple[int, int]:
    """Explicit ``(before, after)`` padding of one spatial axis, exactly as TensorFlow pads.

    ``mode`` is ``"valid"``, ``"same"`` (output ``ceil(size / stride)``, the odd pixel of
    padding goes after) or ``"causal"`` (conv1d: everything before).
    """
    span = (kernel - 1) * dilation + 1
    if mode == "valid":
        return 0, 0
    if mode == "causal":
        return span - 1, 0
    if mode == "same":
        total = max((math.ceil(size / stride) - 1) * stride + span - size, 0)
        return total // 2, total - total // 2
    raise ValueError(f"padding must be 'valid', 'same' or 'causal', got {mode!r}")


def conv_output_size(size: int, kernel: int, stride: int, dilation: int, pad: int) -> int:
    """Output length of one spatial axis of a convolution with ``pad`` cells of padding."""
    return (size + pad - (kernel - 1) * dilation - 1) // stride + 1


@dataclass(frozen=True, eq=False)
class ReceptiveField:
    """Which input grid points every kernel tap reads, for every output position.

    With ``P`` output positions (1 for dense, ``T'`` for conv1d, ``H'·W'`` for conv2d,
    row-major) and ``K`` taps (``n_in`` for dense, ``kw`` for conv1d, ``kh·kw`` for
    conv2d, row-major over the kernel window):

    - ``index[p, t]`` (P, K) int64: spatial index of the grid point tap ``t`` reads at
      position ``p`` (0 where the tap falls in the padding);
    - ``valid[p, t]`` (P, K) bool: False where the tap falls in the padding (reads zero);
    - ``kernel[t, c, f]`` (K, C, F) float64: the kernel with its window flattened in the
      same tap order (dense: ``C = 1`` and ``kernel[j, 0, f] = W1[j, f]``).

    So ``o[p, f] = b1[f] + Σ_t valid[p, t] · Σ_c x_grid[index[p, t], c] · kernel[t, c, f]``
    where ``x_grid`` is the affine input reshaped to (grid size, C). Within one position
    the valid taps read distinct grid points.
    """

    index: np.ndarray
    valid: np.ndarray
    kernel: np.ndarray


def window_indices(
    size: tuple[int, ...],
    out: tuple[int, ...],
    kernel: tuple[int, ...],
    strides: tuple[int, ...],
    dilation: tuple[int, ...],
    padding: tuple[tuple[int, int], ...],
) -> tuple[np.ndarray, np.ndarray]:
    """Grid indices and validity (P, K) of every window tap, by broadcasting per axis."""
    rank = len(size)
    index = np.zeros((1,) * (2 * rank), dtype=np.int64)
    valid = np.ones((1,) * (2 * rank), dtype=bool)
    step = 1
    for axis in reversed(range(rank)):
        coord = (
            np.arange(out[axis])[:, None] * strides[axis]
            - padding[axis][0]
            + np.arange(kernel[axis])[None, :] * dilation[axis]
        )
        shape = [1] * (2 * rank)
        shape[axis], shape[rank + axis] = out[axis], kernel[axis]
        coord = coord.reshape(shape)
        valid = valid & (coord >= 0) & (coord < size[axis])
        index = index + coord * step
        step *= size[axis]
    positions, taps = math.prod(out), math.prod(kernel)
    valid = valid.reshape(positions, taps)
    return np.where(valid, index.reshape(positions, taps), 0), valid
