"""How many rows one gradient batch through a Keras head may hold: its memory footprint,
read from the head's traced TensorFlow graph.

Counting each head *layer's* output misses what layers compute inside them and keep for
the backward pass (LayerNormalization's moments and normalised input, GELU's ``erfc``
terms, BatchNorm's scaled copies), and what does not grow with the batch at all (parts TF
compiles with XLA, e.g. Keras' grouped convolutions on CPU: compiler and runtime memory).
So the footprint is read from the graph itself: every tensor with a batch dimension that
the forward pass computes, including inside called functions, plus a fixed reserve when
some part of the head is XLA-compiled.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["IG_MEMORY_BUDGET", "MAX_BATCH", "XLA_RESERVE", "HeadFootprint", "footprint_batch",
           "head_footprint"]

IG_MEMORY_BUDGET = 768 * 2**20
"""Bytes one gradient batch through the head may use: everything its forward pass
computes (kept for the backward pass), the gradients in flight, the batch itself and its
gradient crossing to numpy in float64, and the head's batch-independent memory."""

XLA_RESERVE = 384 * 2**20
"""Batch-independent bytes reserved when some part of the head is compiled with XLA
(measured: ~360 MiB for ConvNeXtTiny's eighteen grouped 7×7 convolutions on CPU,
benchmarks/keras_applications/README.md)."""

MAX_BATCH = 512

_ALIASES = frozenset({  # ops whose output shares its input's buffer, or allocates nothing per row
    "Identity", "IdentityN", "Reshape", "Squeeze", "ExpandDims", "StopGradient", "Placeholder",
    "ReadVariableOp", "Const", "NoOp", "Shape", "Pack", "StridedSlice",
})
_CALLS = frozenset({"PartitionedCall", "StatefulPartitionedCall"})


class HeadFootprint:
    """Bytes per row and batch-independent bytes of one gradient through a head."""

    def __init__(self, per_row: int, fixed: int, xla_calls: int) -> None:
        self.per_row = per_row
        self.fixed = fixed
        self.xla_calls = xla_calls

    def __repr__(self) -> str:
        return (f"HeadFootprint({self.per_row / 2**20:.1f} MiB per row, {self.fixed / 2**20:.0f} MiB "
                f"fixed, {self.xla_calls} XLA-compiled calls)")


def head_footprint(graph: Any, h_shape: tuple[int, ...]) -> HeadFootprint:
    """The footprint of a gradient through the head whose forward pass is ``graph`` (a
    traced ``tf.function`` graph taking a batch of first-layer activations of shape
    ``h_shape``): every per-row tensor the forward computes (kept for the backward pass,
    an upper bound on what TF keeps), twice its largest one (a gradient in flight and its
    operand), ``h`` and its gradient in float32 and in float64, and :data:`XLA_RESERVE`
    if some call in it is XLA-compiled."""
    h_values = math.prod(h_shape)
    forward, largest, xla = _forward_bytes(graph, 4 * h_values)
    per_row = forward + 2 * largest + 2 * (4 + 8) * h_values
    return HeadFootprint(per_row, XLA_RESERVE if xla else 0, xla)


def footprint_batch(footprint: HeadFootprint, budget: int = IG_MEMORY_BUDGET) -> int:
    """Rows per gradient batch that keep ``footprint`` within ``budget`` bytes (at least 1,
    at most :data:`MAX_BATCH`)."""
    return int(max(1, min(MAX_BATCH, (budget - footprint.fixed) // footprint.per_row)))


def _forward_bytes(graph: Any, unknown_bytes: int) -> tuple[int, int, int]:
    """(bytes per row of every tensor ``graph`` computes, the largest one, XLA calls),
    called functions included; a tensor whose per-row shape is unknown counts as ``h``."""
    total = largest = xla = 0
    for op in graph.get_operations():
        if op.type in _ALIASES:
            continue
        if op.type in _CALLS:
            xla += int(_xla_compiled(op))
            function = _called_graph(graph, op)
            if function is not None:
                inner, inner_largest, inner_xla = _forward_bytes(function, unknown_bytes)
                total, largest, xla = total + inner, max(largest, inner_largest), xla + inner_xla
                continue
        for tensor in op.outputs:
            size = _row_bytes(tensor, unknown_bytes)
            total, largest = total + size, max(largest, size)
    return total, largest, xla


def _called_graph(graph: Any, op: Any) -> Any | None:
    try:
        function = graph._get_function(op.get_attr("f").name)
    except (ValueError, AttributeError):
        return None
    return None if function is None else function.graph


def _xla_compiled(op: Any) -> bool:
    attr = op.node_def.attr
    return "_XlaMustCompile" in attr and bool(attr["_XlaMustCompile"].b)


def _row_bytes(tensor: Any, unknown_bytes: int) -> int:
    """Bytes per row of a tensor with a batch dimension (0 for one without: weights,
    shapes, scalars)."""
    if tensor.shape.rank is None:
        return unknown_bytes
    dims = tensor.shape.as_list()
    if not dims or dims[0] is not None:
        return 0
    if any(d is None for d in dims[1:]):
        return unknown_bytes
    return tensor.dtype.size * math.prod(dims[1:])
