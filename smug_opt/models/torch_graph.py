"""A :class:`~smug_opt.network.graph.Network` (or its tail) as a ``torch.nn.Module`` built
from ``torch.nn.functional`` operations, so PyTorch runs its forward pass and its autodiff.

Importing this module imports torch; the adapter imports it on first use.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from smug_opt.models.network_stem import AxisView
from smug_opt.network.graph import (
    Add,
    AvgPool,
    Clip,
    Conv,
    Dense,
    LeakyRelu,
    MaxPool,
    Network,
    Node,
    Pad,
    Relu,
    Reshape,
    Scale,
    Transpose,
)

__all__ = ["GraphModule", "view_to_net"]


def view_to_net(batch: torch.Tensor, view: AxisView) -> torch.Tensor:
    """A batch in smug-opt's layout → the network's (inside the autograd graph)."""
    moved = batch.reshape(len(batch), *view.grid).permute(0, *(p + 1 for p in view.perm))
    return moved.reshape(len(batch), *view.net_shape)


class GraphModule(torch.nn.Module):
    """The nodes of ``network`` after node ``start``, given node ``start``'s output as input
    (a batch in the network's channels-first layout); returns the last node's output
    (batch, num_outputs), followed by a softmax or sigmoid when ``output`` says so."""

    def __init__(self, network: Network, start: int, *, dtype: torch.dtype, output: str | None = None
                 ) -> None:
        super().__init__()
        self.nodes = network.nodes
        self.start = start
        self.output = output
        self.dtype = dtype
        self._last_use = {j: index for index in range(start + 1, len(self.nodes))
                          for j in self.nodes[index].inputs}
        for index in range(start + 1, len(self.nodes)):
            node = self.nodes[index]
            early = [j for j in node.inputs if j < start]
            if early:
                raise ValueError(f"node {node.name!r} reads node {self.nodes[early[0]].name!r}, "
                                 f"before the start of this part of the network")
            for name, value in _constants(node, self.nodes).items():
                self.register_buffer(f"n{index}_{name}", torch.tensor(np.array(value), dtype=dtype))

    def constant(self, index: int, name: str) -> torch.Tensor:
        return getattr(self, f"n{index}_{name}")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward_keeping(x, self.start)[0]

    def forward_keeping(self, x: torch.Tensor, keep: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The output and node ``keep``'s value (inside the autograd graph, for Grad-CAM)."""
        if not self.start <= keep < len(self.nodes):
            raise ValueError(f"node {keep} is not in this part of the network (nodes {self.start}.."
                             f"{len(self.nodes) - 1})")
        values: dict[int, torch.Tensor] = {self.start: x}
        kept = values[keep] if keep == self.start else None
        for index in range(self.start + 1, len(self.nodes)):
            node = self.nodes[index]
            values[index] = self._apply(index, node, [values[j] for j in node.inputs])
            if index == keep:
                kept = values[index]
            for j in set(node.inputs):  # a value no later node reads is let go (memory)
                if self._last_use[j] == index:
                    del values[j]
        assert kept is not None
        return self._finish(values[len(self.nodes) - 1].reshape(len(x), -1)), kept

    def _finish(self, out: torch.Tensor) -> torch.Tensor:
        if self.output == "softmax":
            return torch.softmax(out, dim=1)
        if self.output == "log_softmax":
            return torch.log_softmax(out, dim=1)
        return torch.sigmoid(out) if self.output == "sigmoid" else out

    def _apply(self, index: int, node: Node, inputs: list[torch.Tensor]) -> torch.Tensor:
        op, x = node.op, inputs[0]
        batch = len(x)
        if isinstance(op, Dense):
            weight, bias = self.constant(index, "weight"), self.constant(index, "bias")
            return F.linear(x.reshape(batch, -1), weight, bias)
        if isinstance(op, Conv):
            top, left, bottom, right = op.pads
            if any(op.pads):
                x = F.pad(x, (left, right, top, bottom))
            return F.conv2d(x, self.constant(index, "weight"), self.constant(index, "bias"),
                            stride=tuple(op.strides), dilation=tuple(op.dilations), groups=int(op.groups))
        if isinstance(op, Scale):
            return x * self.constant(index, "scale") + self.constant(index, "shift")
        if isinstance(op, Relu):
            return F.relu(x)
        if isinstance(op, LeakyRelu):
            return F.leaky_relu(x, float(op.alpha))
        if isinstance(op, Clip):
            lo = None if math.isinf(op.lo) else float(op.lo)
            hi = None if math.isinf(op.hi) else float(op.hi)
            return torch.clamp(x, lo, hi)
        if isinstance(op, MaxPool):
            if any(op.pads):
                top, left, bottom, right = op.pads
                x = F.pad(x, (left, right, top, bottom), value=-math.inf)
            return F.max_pool2d(x, tuple(op.kernel), tuple(op.strides))
        if isinstance(op, AvgPool):
            top, left, bottom, right = op.pads
            mean = F.avg_pool2d(F.pad(x, (left, right, top, bottom)), tuple(op.kernel), tuple(op.strides))
            if op.count_include_pad or not any(op.pads):
                return mean
            return mean / self.constant(index, "inside")
        if isinstance(op, Reshape):
            return x.reshape(batch, *node.shape)
        if isinstance(op, Transpose):
            return x.permute(0, *(p + 1 for p in op.perm))
        if isinstance(op, Pad):
            top, left, bottom, right = op.pads
            return F.pad(x, (left, right, top, bottom), value=float(op.value))
        if isinstance(op, Add):
            return x + inputs[1]
        raise ValueError(f"node {node.name!r}: operation {type(op).__name__} cannot run in the head")


def _constants(node: Node, nodes: tuple[Node, ...]) -> dict[str, Any]:
    """The arrays a node's operation needs, as named buffers."""
    op = node.op
    if isinstance(op, (Dense, Conv)):
        return {"weight": op.weight, "bias": op.bias}
    if isinstance(op, Scale):
        return {"scale": op.scale, "shift": op.shift}
    if isinstance(op, AvgPool) and any(op.pads) and not op.count_include_pad:
        _, height, width = nodes[node.inputs[0]].shape
        top, left, bottom, right = op.pads
        ones = np.pad(np.ones((height, width)), ((top, bottom), (left, right)))
        inside = F.avg_pool2d(torch.as_tensor(ones)[None, None], tuple(op.kernel), tuple(op.strides))
        return {"inside": inside[0].numpy()}  # the share of each window inside the input
    return {}
