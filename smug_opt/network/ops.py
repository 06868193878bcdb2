"""The operations of a network graph (per example, channels first), each a frozen
dataclass holding its float64, read-only parameters; :mod:`smug_opt.network.graph`
re-exports them with the graph that strings them together."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Add", "AvgPool", "Clip", "Conv", "Dense", "Input", "LeakyRelu", "MaxPool", "Op", "Pad", "Relu",
           "Reshape", "Scale", "Transpose"]


def _frozen(array: np.ndarray) -> np.ndarray:
    out = np.array(array, dtype=np.float64)
    out.setflags(write=False)
    return out


@dataclass(frozen=True, eq=False)
class Input:
    """The network's input (node 0)."""


@dataclass(frozen=True, eq=False)
class Dense:
    """``y = weight @ x + bias`` on a vector: ``weight`` (out, in), ``bias`` (out,)."""

    weight: np.ndarray
    bias: np.ndarray

    def __post_init__(self) -> None:
        object.__setattr__(self, "weight", _frozen(self.weight))
        object.__setattr__(self, "bias", _frozen(self.bias))


@dataclass(frozen=True, eq=False)
class Conv:
    """2-D convolution (cross-correlation, as every framework computes it) on ``(C, H, W)``:
    ``weight`` (out, C / groups, kh, kw), ``bias`` (out,), ``strides`` and ``dilations``
    (h, w), ``pads`` (top, left, bottom, right) of zeros, ``groups`` (C for depthwise)."""

    weight: np.ndarray
    bias: np.ndarray
    strides: tuple[int, int] = (1, 1)
    pads: tuple[int, int, int, int] = (0, 0, 0, 0)
    dilations: tuple[int, int] = (1, 1)
    groups: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "weight", _frozen(self.weight))
        object.__setattr__(self, "bias", _frozen(self.bias))


@dataclass(frozen=True, eq=False)
class Scale:
    """Elementwise ``y = x * scale + shift``, both broadcast against the input's shape
    (folded BatchNorm, input normalisation, Mul/Div/Add/Sub by constants)."""

    scale: np.ndarray
    shift: np.ndarray

    def __post_init__(self) -> None:
        object.__setattr__(self, "scale", _frozen(self.scale))
        object.__setattr__(self, "shift", _frozen(self.shift))


@dataclass(frozen=True, eq=False)
class Relu:
    """``max(0, x)``."""


@dataclass(frozen=True, eq=False)
class LeakyRelu:
    """``x`` for ``x >= 0``, ``alpha * x`` below (``0 <= alpha <= 1``)."""

    alpha: float


@dataclass(frozen=True, eq=False)
class Clip:
    """``min(max(x, lo), hi)`` (ReLU6 is ``Clip(0, 6)``); ``lo`` may be ``-inf``, ``hi`` ``inf``."""

    lo: float
    hi: float


@dataclass(frozen=True, eq=False)
class MaxPool:
    """Max over ``kernel`` windows of ``(C, H, W)`` with ``strides``; ``pads`` (top, left,
    bottom, right) never win (they read ``-inf``)."""

    kernel: tuple[int, int]
    strides: tuple[int, int]
    pads: tuple[int, int, int, int] = (0, 0, 0, 0)


@dataclass(frozen=True, eq=False)
class AvgPool:
    """Mean over ``kernel`` windows of ``(C, H, W)``; with ``count_include_pad`` the zero
    padding counts in the divisor, else only the window's cells inside the input.
    Global average pooling is the window of the whole ``(H, W)``."""

    kernel: tuple[int, int]
    strides: tuple[int, int]
    pads: tuple[int, int, int, int] = (0, 0, 0, 0)
    count_include_pad: bool = False


@dataclass(frozen=True, eq=False)
class Reshape:
    """Row-major reshape to the node's ``shape`` (Flatten is a reshape to one axis)."""


@dataclass(frozen=True, eq=False)
class Transpose:
    """``np.transpose(x, perm)`` over the per-example axes."""

    perm: tuple[int, ...]


@dataclass(frozen=True, eq=False)
class Pad:
    """Constant padding of ``(C, H, W)``'s spatial axes: ``pads`` (top, left, bottom,
    right) cells of ``value``."""

    pads: tuple[int, int, int, int]
    value: float = 0.0


@dataclass(frozen=True, eq=False)
class Add:
    """The sum of two nodes' outputs of one shape (a residual connection)."""


Op = (Input | Dense | Conv | Scale | Relu | LeakyRelu | Clip | MaxPool | AvgPool | Reshape | Transpose | Pad
      | Add)
