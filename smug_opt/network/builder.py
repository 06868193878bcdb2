"""Building a :class:`~smug_opt.network.graph.Network` node by node, as every reader does:
shapes come from the operations, and at the end elementwise scales are folded into the
Dense/Conv before them (BatchNorm, a bias added by a separate node), consecutive scales
merge, and nodes the output does not read are dropped.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from smug_opt.network.graph import Conv, Dense, Input, Network, Node, Op, Scale
from smug_opt.network.kernels import output_shape

__all__ = ["GraphBuilder"]


class GraphBuilder:
    """Collects nodes (node 0 the input); :meth:`add` returns the new node's index."""

    def __init__(self, input_name: str, input_shape: tuple[int, ...]) -> None:
        self.nodes: list[Node] = [Node(input_name, Input(), (), tuple(input_shape))]

    def shape(self, index: int) -> tuple[int, ...]:
        return self.nodes[index].shape

    def add(self, name: str, op: Op, inputs: tuple[int, ...], target: tuple[int, ...] | None = None) -> int:
        """Append ``op`` on ``inputs`` (``target``: a Reshape's shape); a shape that does not
        fit raises ``ValueError`` (the reader adds which node of its source it was)."""
        shape = output_shape(op, [self.nodes[i].shape for i in inputs], target)
        self.nodes.append(Node(name, op, inputs, shape))
        return len(self.nodes) - 1

    def build(self, last: int, **network: Any) -> Network:
        """The network ending at node ``last``, simplified (see the module)."""
        nodes = _prune(self.nodes, last)
        nodes = _fold_scales(nodes)
        return Network(tuple(_prune(nodes, len(nodes) - 1)), **network)


def _prune(nodes: list[Node], output: int) -> list[Node]:
    """The ancestors of ``output`` (and the input), renumbered, ``output`` last."""
    keep = {0, output}
    for index in range(output, 0, -1):
        if index in keep:
            keep.update(nodes[index].inputs)
    order = sorted(keep)
    new = {old: position for position, old in enumerate(order)}
    return [replace(nodes[old], inputs=tuple(new[i] for i in nodes[old].inputs)) for old in order]


def _consumers(nodes: list[Node]) -> list[int]:
    counts = [0] * len(nodes)
    for node in nodes:
        for i in node.inputs:
            counts[i] += 1
    return counts


def _fold_scales(nodes: list[Node]) -> list[Node]:
    """A Scale whose input is a Dense, Conv or Scale read by nothing else merges into it
    (the Scale node is then an identity that :func:`_prune` skips by rewiring)."""
    nodes = list(nodes)
    consumers = _consumers(nodes)
    alias = list(range(len(nodes)))
    for index, node in enumerate(nodes):
        inputs = tuple(alias[i] for i in node.inputs)
        nodes[index] = node = replace(node, inputs=inputs)
        if not isinstance(node.op, Scale) or isinstance(nodes[inputs[0]].op, Input):
            continue
        source = nodes[inputs[0]]
        if consumers[inputs[0]] != 1:
            continue
        merged = _merge(source.op, node.op, source.shape)
        if merged is not None:
            nodes[inputs[0]] = replace(source, op=merged, name=f"{source.name}+{node.name}")
            alias[index] = inputs[0]
    kept = [i for i in range(len(nodes)) if alias[i] == i]
    new = {old: position for position, old in enumerate(kept)}
    return [replace(nodes[old], inputs=tuple(new[i] for i in nodes[old].inputs)) for old in kept]


def _merge(first: Op, scale: Scale, shape: tuple[int, ...]) -> Op | None:
    """``scale ∘ first`` as one operation, when ``scale`` is per output channel of a
    Dense/Conv (or anything for a Scale); None when it does not fold."""
    if isinstance(first, Scale):
        return Scale(first.scale * scale.scale, first.shift * scale.scale + scale.shift)
    s = np.broadcast_to(scale.scale, shape)
    t = np.broadcast_to(scale.shift, shape)
    if isinstance(first, Dense):
        return Dense(first.weight * s[:, None], first.bias * s + t)
    if isinstance(first, Conv):
        channel_s, channel_t = s[:, :1, :1], t[:, :1, :1]
        if not (np.all(s == channel_s) and np.all(t == channel_t)):
            return None
        cs, ct = channel_s.ravel(), channel_t.ravel()
        return replace(first, weight=first.weight * cs[:, None, None, None], bias=first.bias * cs + ct)
    return None
