"""The structured network graph: operations per example (no batch axis), channels first.

A :class:`Network` is a list of :class:`Node` in topological order; node 0 is the input.
Each node applies one operation (:data:`Op`) to the outputs of earlier nodes and has a
known per-example output ``shape``. Image tensors are ``(C, H, W)`` (ONNX's and PyTorch's
layout); a reader of a channels-last framework (Keras) adds :class:`Transpose` nodes where
the layouts meet, so weights keep their meaning. Every array is float64 and read-only.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, fields
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
    "parameter_count",
    "weights_digest",
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

    def __post_init__(self) -> None:
        object.__setattr__(self, "inputs", tuple(int(i) for i in self.inputs))
        object.__setattr__(self, "shape", tuple(int(s) for s in self.shape))


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

    def __post_init__(self) -> None:
        from smug_opt.network.kernels import output_shape

        object.__setattr__(self, "nodes", tuple(self.nodes))
        if not self.nodes or not isinstance(self.nodes[0].op, Input) or self.nodes[0].inputs:
            raise ValueError(f"network {self.name!r}: node 0 must be the Input, with no inputs")
        for index, node in enumerate(self.nodes[1:], start=1):
            where = f"network {self.name!r}, node {index} {node.name!r} ({type(node.op).__name__})"
            if isinstance(node.op, Input) or any(not 0 <= i < index for i in node.inputs):
                raise ValueError(f"{where}: inputs {node.inputs} must be earlier nodes (not the Input op)")
            try:
                shape = output_shape(node.op, [self.nodes[i].shape for i in node.inputs], node.shape)
            except ValueError as error:
                raise ValueError(f"{where}: {error}") from None
            if shape != tuple(node.shape):
                raise ValueError(f"{where}: the operation gives shape {shape}, the node says {node.shape}")
        if len(self.nodes[-1].shape) != 1:
            raise ValueError(f"network {self.name!r}: the last node {self.nodes[-1].name!r} gives shape "
                             f"{self.nodes[-1].shape}; the class scores must be a vector")
        if not self.digest:
            object.__setattr__(self, "digest", weights_digest(self.nodes))

    @property
    def input_shape(self) -> tuple[int, ...]:
        return self.nodes[0].shape

    @property
    def num_outputs(self) -> int:
        return int(np.prod(self.nodes[-1].shape))

    def node_outputs(self, x_batch: np.ndarray) -> list[np.ndarray]:
        """Every node's output, float64 ``(batch, *node.shape)``, for a batch of inputs
        ``(batch, *input_shape)`` (any array with ``batch * prod(input_shape)`` values)."""
        from smug_opt.network.kernels import apply

        x = np.asarray(x_batch, dtype=np.float64)
        size = int(np.prod(self.input_shape))
        if x.size % size or x.ndim == 0:
            raise ValueError(f"network {self.name!r} takes inputs of shape {self.input_shape}; got an "
                             f"array of shape {x.shape}")
        values = [x.reshape(-1, *self.input_shape)]
        for node in self.nodes[1:]:
            values.append(apply(node.op, [values[i] for i in node.inputs], node.shape))
        return values

    def forward(self, x_batch: np.ndarray) -> np.ndarray:
        """The class scores ``(batch, num_outputs)``, float64, of a batch of inputs (before
        any final softmax/sigmoid, which :attr:`output` names)."""
        return self.node_outputs(x_batch)[-1]


def parameter_count(op: Op) -> int:
    """The number of weights an operation holds (what ``smug-opt inspect`` shows)."""
    return sum(value.size for value in _arrays(op))


def _arrays(op: Op) -> list[np.ndarray]:
    return [getattr(op, f.name) for f in fields(op) if isinstance(getattr(op, f.name), np.ndarray)]


def weights_digest(nodes: tuple[Node, ...] | list[Node]) -> str:
    """A SHA-256 hex digest of a graph: every node's operation, parameters, inputs and shape
    (names excluded), so two reads of one network share it and any weight change alters it."""
    digest = hashlib.sha256()
    for node in nodes:
        scalars = [(f.name, getattr(node.op, f.name)) for f in fields(node.op)
                   if not isinstance(getattr(node.op, f.name), np.ndarray)]
        digest.update(repr((type(node.op).__name__, scalars, node.inputs, tuple(node.shape))).encode())
        for array in _arrays(node.op):
            digest.update(repr(array.shape).encode())
            digest.update(np.ascontiguousarray(array, dtype=np.float64).tobytes())
    return digest.hexdigest()
