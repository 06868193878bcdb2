"""Reading a Keras model (Sequential or functional) into a
:class:`~smug_opt.network.graph.Network`.

Keras images are channels-last ``(H, W, C)``; the network keeps the model's input as it is
and adds a Transpose to ``(C, H, W)`` right after it (and back before a Flatten or Reshape,
which read channels-last order), so kernels keep their meaning and every image inside the
network is channels-first. Fused activations become their own nodes; BatchNormalization
becomes a Scale that the builder folds into the Conv/Dense before it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from smug_opt.models.base import resolve_padding
from smug_opt.models.keras_stem import describe, layer_class
from smug_opt.network.builder import GraphBuilder
from smug_opt.network.graph import (
    Add,
    AvgPool,
    Clip,
    Conv,
    Dense,
    LeakyRelu,
    MaxPool,
    Network,
    Pad,
    Relu,
    Reshape,
    Scale,
    Transpose,
)

__all__ = ["SUPPORTED_LAYERS", "read_keras"]

SUPPORTED_LAYERS = ("InputLayer", "Dense", "Conv2D", "DepthwiseConv2D", "SeparableConv2D",
                    "BatchNormalization", "Rescaling", "Normalization", "MaxPooling2D", "AveragePooling2D",
                    "GlobalAveragePooling2D", "GlobalMaxPooling2D", "Flatten", "Reshape", "ZeroPadding2D",
                    "Add", "ReLU", "LeakyReLU", "Activation", "Softmax", "Dropout", "Identity")
_PASS = ("InputLayer", "Dropout", "Identity")


def read_keras(model: Any, *, input_range: tuple[float, float] | None = None,
               name: str | None = None) -> Network:
    """The network of a Sequential or functional Keras model with one input and one output."""
    return _Reader(model).network(input_range, name or model.name)


def _array(weight: Any) -> np.ndarray:
    return np.asarray(weight.numpy() if hasattr(weight, "numpy") else weight, dtype=np.float64)


class _Reader:
    def __init__(self, model: Any) -> None:
        self.model = model
        inputs, outputs = getattr(model, "inputs", None), getattr(model, "outputs", None)
        if not inputs or not outputs or len(inputs) != 1 or len(outputs) != 1:
            raise ValueError(f"Keras model {model.name!r}: smug-opt reads Sequential and functional models "
                             "with one input and one output, built with a known input shape")
        shape = tuple(inputs[0].shape[1:])
        if any(s is None for s in shape):
            raise ValueError(f"Keras model {model.name!r} has input shape {shape}; every size must be known")
        self.builder = GraphBuilder(inputs[0].name, shape)
        self.image_input = len(shape) == 3
        start = self.builder.add("to_channels_first", Transpose((2, 0, 1)), (0,)) if self.image_input else 0
        self.tensors: dict[int, int] = {id(inputs[0]): start}
        self.output_kind = "logits"

    def network(self, input_range: tuple[float, float] | None, name: str) -> Network:
        for layer, inputs, output, is_output in self._calls():
            kind = layer_class(layer)
            if kind not in SUPPORTED_LAYERS:
                raise ValueError(f"Keras layer {describe(layer)} is not read by smug-opt (it reads "
                                 f"{', '.join(SUPPORTED_LAYERS)})")
            sources = [self.tensors[key] for key in inputs]
            try:
                index = sources[0] if kind in _PASS else self._layer(layer, kind, sources, is_output)
            except ValueError as error:
                raise ValueError(f"Keras layer {describe(layer)}: {error}") from None
            self.tensors[output] = index
        last = self.tensors[id(self.model.outputs[0])]  # the last call's key
        if len(self.builder.shape(last)) != 1:
            raise ValueError(f"Keras model {self.model.name!r} outputs shape {self.builder.shape(last)}; "
                             "the class scores must be a vector")
        return self.builder.build(last, output=self.output_kind, input_range=input_range, name=name,
                                  source_layout="channels_last" if self.image_input else "channels_first")

    def _calls(self) -> list[tuple[Any, list[int], int, bool]]:
        """(layer, input tensor keys, output tensor key, whether it is the model's output)
        in graph order; a key is the id of the Keras tensor."""
        output_key = id(self.model.outputs[0])
        layers = [layer for layer in self.model.layers if layer_class(layer) != "InputLayer"]
        if layer_class(self.model) == "Sequential":
            keys = [id(self.model.inputs[0]), *(id(layer) for layer in layers[:-1]), output_key]
            return [(layer, [keys[k]], keys[k + 1], k == len(layers) - 1) for k, layer in enumerate(layers)]
        keras_nodes = getattr(self.model, "_nodes", None)
        calls = []
        for layer in layers:
            nodes = [node for i, node in enumerate(layer._inbound_nodes)
                     if keras_nodes is None or f"{id(layer)}_ib-{i}" in keras_nodes]
            if len(nodes) != 1:
                raise ValueError(f"Keras layer {describe(layer)} is called {len(nodes)} times in the model; "
                                 "smug-opt reads layers called once")
            key = id(nodes[0].output_tensors[0])
            calls.append((layer, [id(t) for t in nodes[0].input_tensors], key, key == output_key))
        return calls

    def _add(self, layer: Any, op: Any, inputs: tuple[int, ...], suffix: str = "",
             target: tuple[int, ...] | None = None) -> int:
        return self.builder.add(layer.name + suffix, op, inputs, target)

    def _activation(self, layer: Any, function: Any, index: int, is_output: bool) -> int:
        from smug_opt.models._keras import import_keras

        name = import_keras().activations.serialize(function)
        name = name if isinstance(name, str) else getattr(function, "__name__", repr(function))
        if name == "linear":
            return index
        if name in ("softmax", "log_softmax", "sigmoid"):
            if not is_output:
                raise ValueError(f"activation {name!r} is read only on the model's output")
            self.output_kind = name
            return index
        ops = {"relu": Relu(), "relu6": Clip(0.0, 6.0), "leaky_relu": LeakyRelu(0.2)}
        if name not in ops:
            raise ValueError(f"activation {name!r} is not piecewise linear (smug-opt reads relu, relu6, "
                             "leaky_relu, linear, and softmax/log_softmax/sigmoid on the output)")
        return self._add(layer, ops[name], (index,), f"/{name}")

    def _channels(self, values: np.ndarray, index: int) -> np.ndarray:
        """A per-channel (channels-last) constant shaped for the node's (C, H, W) or (n,)."""
        values = np.asarray(values, dtype=np.float64)
        shape = self.builder.shape(index)
        if len(shape) != 3:
            return values
        if values.size not in (1, shape[0]):
            raise ValueError(f"{values.size} constants for a {shape[0]}-channel image: only per-channel "
                             "constants are read")
        return values.reshape(-1, 1, 1) if values.size > 1 else values.reshape(())

    def _layer(self, layer: Any, kind: str, sources: list[int], is_output: bool) -> int:
        x = sources[0]
        shape = self.builder.shape(x)
        if kind == "Dense":
            index = self._add(layer, Dense(_array(layer.kernel).T, self._bias(layer)), (x,))
            return self._activation(layer, layer.activation, index, is_output)
        if kind in ("Conv2D", "DepthwiseConv2D", "SeparableConv2D"):
            return self._conv(layer, kind, x, is_output)
        if kind == "BatchNormalization":
            return self._batch_norm(layer, x)
        if kind == "Rescaling":
            scale = Scale(self._channels(layer.scale, x), self._channels(layer.offset, x))
            return self._add(layer, scale, (x,))
        if kind == "Normalization":
            if getattr(layer, "invert", False):
                raise ValueError("invert=True is not read")
            mean, variance = _array(layer.mean).reshape(-1), _array(layer.variance).reshape(-1)
            scale = 1.0 / np.maximum(np.sqrt(variance), 1e-7)
            return self._add(layer, Scale(self._channels(scale, x), self._channels(-mean * scale, x)), (x,))
        if kind in ("MaxPooling2D", "AveragePooling2D"):
            pads = self._same_pads(layer.padding, shape, tuple(layer.pool_size), tuple(layer.strides), (1, 1))
            pool = MaxPool if kind == "MaxPooling2D" else AvgPool
            return self._add(layer, pool(tuple(layer.pool_size), tuple(layer.strides), pads), (x,))
        if kind in ("GlobalAveragePooling2D", "GlobalMaxPooling2D"):
            whole = (AvgPool if kind == "GlobalAveragePooling2D" else MaxPool)((shape[1], shape[2]), (1, 1))
            index = self._add(layer, whole, (x,))
            return index if layer.keepdims else self._add(layer, Reshape(), (index,), "/flatten", (shape[0],))
        if kind in ("Flatten", "Reshape"):
            target = (int(np.prod(shape)),) if kind == "Flatten" else tuple(layer.target_shape)
            if len(shape) == 3:
                x = self._add(layer, Transpose((1, 2, 0)), (x,), "/to_channels_last")
            index = self._add(layer, Reshape(), (x,), "", target)
            if len(target) == 3:
                index = self._add(layer, Transpose((2, 0, 1)), (index,), "/to_channels_first")
            return index
        if kind == "ZeroPadding2D":
            (top, bottom), (left, right) = layer.padding
            return self._add(layer, Pad((top, left, bottom, right)), (x,))
        if kind == "Add":
            index = x
            for k, other in enumerate(sources[1:]):
                index = self._add(layer, Add(), (index, other), f"/{k}" if len(sources) > 2 else "")
            return index
        if kind == "Activation":
            return self._activation(layer, layer.activation, x, is_output)
        if kind == "Softmax":
            if not is_output:
                raise ValueError("a Softmax layer is read only on the model's output")
            axes = {a % (len(shape) + 1) for a in np.atleast_1d(layer.axis).tolist()}
            if axes != {len(shape)}:  # over the batch axis its outputs are constant (1 at batch size 1)
                raise ValueError(f"a Softmax layer over axis {layer.axis} of scores of shape (batch, "
                                 f"{', '.join(map(str, shape))}) is not read: only over the class scores")
            self.output_kind = "softmax"
            return x
        if kind == "LeakyReLU":
            return self._add(layer, LeakyRelu(float(layer.negative_slope)), (x,))
        return self._relu(layer, x)

    def _relu(self, layer: Any, x: int) -> int:
        slope, cap = float(layer.negative_slope), layer.max_value
        if float(layer.threshold) != 0.0 or (slope and cap is not None):
            raise ValueError("only threshold=0, and max_value or negative_slope (not both), are read")
        if slope:
            return self._add(layer, LeakyRelu(slope), (x,))
        return self._add(layer, Relu() if cap is None else Clip(0.0, float(cap)), (x,))

    def _bias(self, layer: Any, size: int | None = None) -> np.ndarray:
        if getattr(layer, "bias", None) is None:
            return np.zeros(size if size is not None else layer.units)
        return _array(layer.bias)

    def _same_pads(self, padding: str, shape: tuple[int, ...], kernel: tuple[int, int],
                   strides: tuple[int, int], dilations: tuple[int, int]) -> tuple[int, int, int, int]:
        (top, bottom), (left, right) = (resolve_padding(padding, size, k, s, d) for size, k, s, d in
                                        zip(shape[1:], kernel, strides, dilations, strict=True))
        return top, left, bottom, right

    def _conv(self, layer: Any, kind: str, x: int, is_output: bool) -> int:
        if layer.data_format != "channels_last":
            raise ValueError(f"data_format {layer.data_format!r}: only channels_last is read")
        channels = self.builder.shape(x)[0]
        strides, dilations = tuple(layer.strides), tuple(layer.dilation_rate)
        if kind == "Conv2D":
            kernel = _array(layer.kernel)
            weight, groups = kernel.transpose(3, 2, 0, 1), int(getattr(layer, "groups", 1))
        else:
            depthwise = _array(layer.depthwise_kernel if kind == "SeparableConv2D" else layer.kernel)
            kh, kw, _, multiplier = depthwise.shape
            weight = depthwise.transpose(2, 3, 0, 1).reshape(channels * multiplier, 1, kh, kw)
            groups = channels
        pads = self._same_pads(layer.padding, self.builder.shape(x), weight.shape[2:], strides, dilations)
        if kind == "SeparableConv2D":
            x = self._add(layer, Conv(weight, np.zeros(len(weight)), strides, pads, dilations, groups), (x,),
                          "/depthwise")
            pointwise = _array(layer.pointwise_kernel)
            weight, strides, dilations, groups = pointwise.transpose(3, 2, 0, 1), (1, 1), (1, 1), 1
            pads = (0, 0, 0, 0)
        conv = Conv(weight, self._bias(layer, len(weight)), strides, pads, dilations, groups)
        index = self._add(layer, conv, (x,))
        return self._activation(layer, layer.activation, index, is_output)

    def _batch_norm(self, layer: Any, x: int) -> int:
        rank = len(self.builder.shape(x)) + 1
        axis = layer.axis if isinstance(layer.axis, int) else tuple(layer.axis)
        if axis not in (-1, rank - 1, (-1,), (rank - 1,)):
            raise ValueError(f"axis {layer.axis}: only the channel axis (-1) is read")
        size = self.builder.shape(x)[0]

        def value(weight: Any, default: float) -> np.ndarray:
            return np.full(size, default) if weight is None else _array(weight)

        scale = value(layer.gamma, 1.0) / np.sqrt(value(layer.moving_variance, 1.0) + float(layer.epsilon))
        shift = value(layer.beta, 0.0) - value(layer.moving_mean, 0.0) * scale
        return self._add(layer, Scale(self._channels(scale, x), self._channels(shift, x)), (x,))
