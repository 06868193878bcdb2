"""The structured network graph: operations per example (no batch axis), channels first.

A :class:`Network` is a list of :class:`Node` in topological order; node 0 is the input.
Each node applies one operation (:data:`Op`) to the outputs of earlier nodes and has a
known per-example output ``shape``. Image tensors are ``(C, H, W)`` (ONNX's and PyTorch's
layout); a reader of a channels-last framework (Keras) adds :class:`Transpose` nodes where
the layouts meet, so weights keep their meaning. Every array is float64 and read-only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

__all__ = [
    "Add",
    "AvgPool",
    "Clip",
    "Conv",
    "Dense",
    "Input",
    "LeakyRelu",
    "MaxPool",
    "Network",
    "Node",
    "Op",
    "Pad",
    "Relu",
    "Reshape",
    "Scale",
    "Transpose",
]


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


@dataclass(frozen=True, eq=False)
class Node:
    """One operation: ``op`` applied to the outputs of the nodes ``inputs`` (indices of
    earlier nodes), giving a per-example tensor of ``shape``. ``name`` is the source
    file's or framework's name for it (errors and ``smug-opt inspect`` show it)."""

    name: str
    op: Op
    inputs: tuple[int, ...]
    shape: tuple[int, ...]


OutputKind = Literal["logits", "softmax", "sigmoid"]


@dataclass(frozen=True, eq=False)
class Network:
    """A feed-forward network: ``nodes[0]`` is the :class:`Input`, the last node gives the
    class scores (a vector). ``output`` says what follows it in the source model (a final
    softmax or sigmoid is monotone, so scores compare as logits). ``input_range`` is the
    valid range of every input value, where the source says or the user declared it.
    ``name`` and ``digest`` (a hash of the weights) identify the network."""

    nodes: tuple[Node, ...]
    output: OutputKind = "logits"
    input_range: tuple[float, float] | None = None
    name: str = "network"
    digest: str = ""
    source_layout: str = field(default="channels_first")

    @property
    def input_shape(self) -> tuple[int, ...]:
        return self.nodes[0].shape

    @property
    def num_outputs(self) -> int:
        return int(np.prod(self.nodes[-1].shape))
