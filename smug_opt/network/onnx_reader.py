"""Reading an ONNX file into a :class:`~smug_opt.network.graph.Network`.

The ``onnx`` package only parses the file (protobuf and ``numpy_helper``); every operator
is translated here. The first axis of the graph's input is the batch (fixed or dynamic)
and is dropped; images are NCHW as ONNX states them, and an NHWC network works through
its own Transpose nodes. Subgraphs of constants (``Shape → Gather → Unsqueeze → Concat``
feeding a Reshape, as PyTorch exports ``x.view(x.size(0), -1)``) are evaluated while
reading. An operator outside :data:`SUPPORTED_OPS` is one error naming the node.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from smug_opt.bounded import load_onnx
from smug_opt.network.builder import GraphBuilder
from smug_opt.network.graph import Network, OutputKind, Reshape
from smug_opt.network.onnx_constants import FOLDABLE, fold
from smug_opt.network.onnx_ops import TRANSLATE

__all__ = ["SUPPORTED_OPS", "guess_layout", "read_onnx"]

_FINAL: dict[str, OutputKind] = {"Softmax": "softmax", "LogSoftmax": "log_softmax", "Sigmoid": "sigmoid"}
"""Monotone operations read only as the network's last: what follows the class scores."""

SUPPORTED_OPS = tuple(sorted({*TRANSLATE, *FOLDABLE, "Identity", "Dropout", *_FINAL}))
"""The ONNX operator types :func:`read_onnx` reads (those only in FOLDABLE: on constants)."""

Value = int | np.ndarray  # a node index, or a constant


def read_onnx(source: str | Path | bytes, *, input_range: tuple[float, float] | None = None,
              layout: str | None = None, name: str | None = None) -> Network:
    """The network an ONNX model describes (a file path or the file's bytes).

    ``input_range``: the valid range of every input value, which ONNX does not record;
    ``layout``: ``"channels_first"`` or ``"channels_last"`` for an image input (default:
    guessed from the input's shape, see :func:`guess_layout`); ``name``: default the
    file's stem.
    """
    import onnx

    if isinstance(source, bytes):
        model = onnx.load_model_from_string(source)
        name = name or (model.graph.name or "onnx-model")
    else:
        path = Path(source)
        if not path.is_file():
            raise FileNotFoundError(f"ONNX file {path} does not exist")
        model = load_onnx(path)  # sizes checked before anything is read in full
        name = name or path.stem
    return _Reader(model, name).network(input_range, layout)


def guess_layout(shape: tuple[int, ...]) -> str:
    """``"channels_last"`` for an image input whose last axis is shorter than both others
    (H, W, C), else ``"channels_first"`` (ONNX's own layout)."""
    if len(shape) == 3 and shape[-1] < min(shape[0], shape[1]):
        return "channels_last"
    return "channels_first"


def _attributes(node: Any) -> dict[str, Any]:
    from onnx import helper

    out = {}
    for attribute in node.attribute:
        value = helper.get_attribute_value(attribute)
        out[attribute.name] = value.decode() if isinstance(value, bytes) else value
    return out


class _Reader:
    def __init__(self, model: Any, name: str) -> None:
        from onnx import numpy_helper

        self.model, self.name = model, name
        self.graph = graph = model.graph
        self.values: dict[str, Value] = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
        for node in graph.node:
            if node.op_type not in SUPPORTED_OPS or node.domain not in ("", "ai.onnx"):
                where = f"{node.domain}." if node.domain not in ("", "ai.onnx") else ""
                raise ValueError(
                    f"ONNX node {self._node_name(node)!r} has op type {where}{node.op_type}, which "
                    f"smug-opt does not read (it reads {', '.join(SUPPORTED_OPS)})"
                )
        inputs = [i for i in graph.input if i.name not in self.values]
        if len(inputs) != 1 or len(graph.output) != 1:
            raise ValueError(f"ONNX model {name!r} has {len(inputs)} inputs and {len(graph.output)} "
                             "outputs; smug-opt reads single-input, single-output classifiers")
        dims = [d.dim_value if d.HasField("dim_value") else None
                for d in inputs[0].type.tensor_type.shape.dim]
        if len(dims) < 2 or any(d is None or d < 1 for d in dims[1:]):
            raise ValueError(f"ONNX input {inputs[0].name!r} has shape {dims}; smug-opt needs a batch "
                             "axis first and a fixed size for every other axis")
        self.builder = GraphBuilder(inputs[0].name, tuple(d for d in dims[1:] if d is not None))
        self.values[inputs[0].name] = 0
        self.output_kind = "logits"

    def _node_name(self, node: Any) -> str:
        return node.name or (node.output[0] if node.output else node.op_type)

    def network(self, input_range: tuple[float, float] | None, layout: str | None) -> Network:
        for node in self.graph.node:
            try:
                self._read(node)
            except ValueError as error:
                raise ValueError(f"ONNX node {self._node_name(node)!r} ({node.op_type}): {error}") from None
        output = self.values.get(self.graph.output[0].name)
        if not isinstance(output, int):
            raise ValueError(f"the output of ONNX model {self.name!r} does not depend on its input")
        if len(self.builder.shape(output)) != 1:
            output = self.builder.add("flatten_output", Reshape(), (output,),
                                      (math.prod(self.builder.shape(output)),))
        layout = layout or guess_layout(self.builder.shape(0))
        if layout not in ("channels_first", "channels_last"):
            raise ValueError(f"layout must be 'channels_first' or 'channels_last', got {layout!r}")
        return self.builder.build(output, output=self.output_kind, input_range=input_range,
                                  name=self.name, source_layout=layout)

    def _read(self, node: Any) -> None:
        op = node.op_type
        inputs = [self.values[i] if i else None for i in node.input]
        attrs = _attributes(node)
        tensors = [v for v in inputs if isinstance(v, int)]
        if op == "Constant" or (not tensors and op in FOLDABLE) or op == "Shape":
            results = fold(op, inputs, attrs, {i: self.builder.shape(i) for i in tensors})
            for out_name, value in zip(node.output, results, strict=False):
                self.values[out_name] = value
            return
        if op in _FINAL:
            if node.output[0] != self.graph.output[0].name:
                raise ValueError(f"{op} is read only as the network's last operation")
            source = _first(inputs, op)
            if op != "Sigmoid" and isinstance(source, int):
                _check_class_axis(op, attrs, self.shape(source), _opset(self.model))
            self.output_kind = _FINAL[op]
            self.values[node.output[0]] = source
            return
        if op in ("Identity", "Dropout"):
            self.values[node.output[0]] = _first(inputs, op)
            return
        self.values[node.output[0]] = TRANSLATE[op](self, self._node_name(node), inputs, attrs)

    # helpers for the translations
    def add(self, name: str, op: Any, inputs: tuple[int, ...], target: tuple[int, ...] | None = None) -> int:
        return self.builder.add(name, op, inputs, target)

    def shape(self, value: int) -> tuple[int, ...]:
        return self.builder.shape(value)


def _opset(model: Any) -> int:
    """The model's version of the default ONNX domain."""
    return max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=1)


def _check_class_axis(op: str, attrs: dict, shape: tuple[int, ...], opset: int) -> None:
    """Refuse a final (Log)Softmax that does not normalise over the class scores (the axes of
    the per-example ``shape`` of size > 1) alone: over the batch axis, say, its outputs are
    not the scores shifted or rescaled, and comparisons of the scores do not carry over."""
    rank = len(shape) + 1
    axis = int(attrs.get("axis", -1 if opset >= 13 else 1))
    axis = axis + rank if axis < 0 else axis
    reduced = {axis} if opset >= 13 else set(range(axis, rank))
    if 0 in reduced or not reduced <= set(range(rank)) or any(
            size > 1 and i + 1 not in reduced for i, size in enumerate(shape)):
        raise ValueError(f"{op} over axis {attrs.get('axis')} of scores of shape (batch, "
                         f"{', '.join(map(str, shape))}) (opset {opset}) does not normalise over the "
                         "class scores alone, so it is not read")


def _first(inputs: list[Value | None], op: str) -> Value:
    """The first input of an ``op`` that passes it on."""
    if inputs[0] is None:
        raise ValueError(f"{op} has no input")
    return inputs[0]
