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

from smug_opt.network.kernels import apply, output_shape
from smug_opt.network.ops import (
    Add,
    AvgPool,
    Clip,
    Conv,
    Dense,
    Input,
    LeakyRelu,
    MaxPool,
    Op,
    Pad,
    Relu,
    Reshape,
    Scale,
    Transpose,
)

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


OutputKind = Literal["logits", "softmax", "log_softmax", "sigmoid"]


@dataclass(frozen=True, eq=False)
class Network:
    """A feed-forward network: ``nodes[0]`` is the :class:`Input`, the last node gives the
    class scores (a vector). ``output`` says what follows it in the source model (a final
    softmax, log-softmax or sigmoid is monotone, so scores compare as logits). ``input_range`` is the
    valid range of every input value, where the source says or the user declared it.
    ``name`` and ``digest`` (a hash of the weights) identify the network."""

    nodes: tuple[Node, ...]
    output: OutputKind = "logits"
    input_range: tuple[float, float] | None = None
    name: str = "network"
    digest: str = ""
    source_layout: str = field(default="channels_first")

    def __post_init__(self) -> None:
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
            bad = [f.name for f in fields(node.op) if isinstance(getattr(node.op, f.name), np.ndarray)
                   and not np.isfinite(getattr(node.op, f.name)).all()]
            if bad:
                raise ValueError(f"{where}: NaN or infinite values in its {' and '.join(bad)}")
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
