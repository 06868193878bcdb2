"""The Keras 3 (TensorFlow backend) model adapter, model loading and Dense-stack export.

Kept as one module because the adapter, the Dense-stack reading and the loader interpret
the same Keras layer chain with the same private helpers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from smug_opt.models._keras import import_keras
from smug_opt.models.base import AffineLayer, ModelAdapter, OutputKind, resolve_padding

if TYPE_CHECKING:
    import keras

__all__ = ["DenseLayer", "KerasAdapter", "load_model", "mlp_layers"]

_PREPROCESSING = ("InputLayer", "Flatten", "Rescaling", "Embedding", "Reshape")
_AFFINE = {"Dense": "dense", "Conv1D": "conv1d", "Conv2D": "conv2d"}
_ACTIVATIONS = ("relu", "linear", "softmax", "sigmoid")


class KerasAdapter(ModelAdapter):
    """A Keras 3 Sequential or linear-chain functional model, seen as SMUG needs it.

    The first affine layer (Dense, Conv1D or Conv2D, channels last, ``groups=1``) may be
    preceded only by InputLayer, Flatten, Rescaling, Embedding or Reshape; its ReLU is
    either fused (``activation="relu"``) or the next layer (``ReLU()`` or
    ``Activation("relu")``); every later layer is the *head*. ``batch_size`` bounds the
    rows sent to TensorFlow at once.
    """

    def __init__(self, model: keras.Model, *, batch_size: int = 512) -> None:
        keras = import_keras()
        if not isinstance(model, keras.Model):
            raise TypeError(f"model must be a keras.Model, got {type(model).__name__}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        chain = _layer_chain(model)
        position = _first_affine_position(chain)
        layer = chain[position]
        head_start = position + 1 + _separate_relu(layer, chain[position + 1 : position + 2])
        if head_start == len(chain):
            raise ValueError(
                f"model {model.name!r} has no layers after the first layer's ReLU "
                f"({_describe(chain[head_start - 1])}); SMUG needs a head that scores classes"
            )
        output_shape = tuple(model.outputs[0].shape[1:])
        if len(output_shape) != 1:
            raise ValueError(
                f"the model's output must be a vector of class scores per example, got "
                f"per-example shape {output_shape}"
            )
        self.model = model
        self.input_shape = _known_shape(model.inputs[0].shape[1:], "the model's input")
        self.affine = _affine_layer(layer)
        self.output_kind = _output_kind(chain[-1])
        self.num_outputs = int(output_shape[0])
        self.batch_size = batch_size
        self._preprocessing = chain[:position]
        self._dtype = layer.compute_dtype
        self._functions = _Functions(model, chain[position:head_start], chain[head_start:], self)

    def __repr__(self) -> str:
        return (
            f"KerasAdapter({self.model.name!r}, first layer {self.affine.kind} "
            f"{self.affine.input_shape}->{self.affine.output_shape}, "
            f"{self.num_outputs} {self.output_kind} outputs)"
        )

    def affine_input(self, x: np.ndarray) -> np.ndarray:
        """The first affine layer's input for one raw example, float64 (numpy, exact)."""
        value = self.check_input(x)
        for layer in self._preprocessing:
            value = _preprocess(layer, value)
        return np.asarray(value, dtype=np.float64)

    def head(self, h_batch: np.ndarray) -> np.ndarray:
        """Model outputs (batch, num_outputs) from post-ReLU activations, float64."""
        h_batch = self._check_batch(h_batch, self.affine.output_shape, "h_batch")
        return self._run(self._functions.head, h_batch)

    def head_gradient(self, h_batch: np.ndarray, target: int) -> tuple[np.ndarray, np.ndarray]:
        """``(scores, d score / d h)`` of class ``target`` for a batch of activations."""
        h_batch = self._check_batch(h_batch, self.affine.output_shape, "h_batch")
        weights, offset = self.score_weights(target)
        results = [
            self._functions.head_gradient(chunk, weights.astype(self._dtype))
            for chunk in self._chunks(h_batch)
        ]
        scores = np.concatenate([np.asarray(s, dtype=np.float64) for s, _ in results]) + offset
        grads = np.concatenate([np.asarray(g, dtype=np.float64) for _, g in results])
        return scores, grads

    def predict(self, x_batch: np.ndarray) -> np.ndarray:
        """Model outputs (batch, num_outputs) for raw inputs (batch, *input_shape), float64."""
        x_batch = self.check_input(x_batch, batched=True)
        return self._run(self._functions.forward, x_batch.astype(self.model.inputs[0].dtype))

    def predict_from_affine_input(self, xa_batch: np.ndarray) -> np.ndarray:
        """Model outputs when the first affine layer's input is given (e.g. masked)."""
        xa_batch = self._check_batch(xa_batch, self.affine.input_shape, "xa_batch")
        return self._run(self._functions.from_affine_input, xa_batch)

    def _check_batch(self, batch: np.ndarray, shape: tuple[int, ...], name: str) -> np.ndarray:
        batch = np.asarray(batch)
        if batch.shape[1:] != shape:
            raise ValueError(
                f"{name} must have shape (batch, {', '.join(map(str, shape))}), got {batch.shape}"
            )
        if not np.isfinite(batch).all():
            raise ValueError(f"{name} must be finite")
        return batch.astype(self._dtype)

    def _chunks(self, batch: np.ndarray) -> list[np.ndarray]:
        return [batch[i : i + self.batch_size] for i in range(0, len(batch), self.batch_size)]

    def _run(self, function: Callable[[Any], Any], batch: np.ndarray) -> np.ndarray:
        if len(batch) == 0:
            return np.zeros((0, self.num_outputs))
        return np.concatenate(
            [np.asarray(function(chunk), dtype=np.float64) for chunk in self._chunks(batch)]
        )


class _Functions:
    """The adapter's compiled TensorFlow functions (one trace each, any batch size)."""

    def __init__(self, model: keras.Model, first: list, head: list, adapter: KerasAdapter) -> None:
        import tensorflow as tf

        def spec(shape: tuple[int, ...], dtype: str) -> tf.TensorSpec:
            return tf.TensorSpec((None, *shape), dtype)

        def apply(layers: list, value: tf.Tensor) -> tf.Tensor:
            for layer in layers:
                value = layer(value, training=False)
            return value

        h_spec = spec(adapter.affine.output_shape, adapter._dtype)
        self.forward = tf.function(
            lambda x: model(x, training=False),
            input_signature=[spec(adapter.input_shape, model.inputs[0].dtype)],
        )
        self.from_affine_input = tf.function(
            lambda xa: apply(first + head, xa),
            input_signature=[spec(adapter.affine.input_shape, adapter._dtype)],
        )
        self.head = tf.function(lambda h: apply(head, h), input_signature=[h_spec])

        @tf.function(input_signature=[h_spec, tf.TensorSpec((adapter.num_outputs,), h_spec.dtype)])
        def head_gradient(h: tf.Tensor, weights: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
            with tf.GradientTape() as tape:
                tape.watch(h)
                scores = tf.linalg.matvec(apply(head, h), weights)
            return scores, tape.gradient(scores, h)

        self.head_gradient = head_gradient


def _class(layer: Any) -> str:
    """The class name of a built-in Keras layer; module-qualified for any other class, so a
    subclass or look-alike is never mistaken for the layer it resembles."""
    cls = type(layer)
    return cls.__name__ if cls.__module__.startswith("keras.") else f"{cls.__module__}.{cls.__qualname__}"


def _describe(layer: Any) -> str:
    return f"{_class(layer)} {layer.name!r}"


def _layer_chain(model: keras.Model) -> list:
    """The model's layers in order (no InputLayer), checking that they form one chain."""
    keras = import_keras()
    try:
        inputs, outputs = model.inputs, model.outputs
    except (AttributeError, ValueError):
        inputs = outputs = None
    if isinstance(model, keras.Sequential):
        if not inputs:
            raise ValueError(
                f"Sequential model {model.name!r} has no known input shape; start it with "
                "keras.Input(shape=...) or call model.build(input_shape)"
            )
        return list(model.layers)
    if not inputs or not outputs:
        raise ValueError(
            f"model {model.name!r} ({type(model).__name__}) is a subclassed model; only "
            "Sequential and linear-chain functional models are supported"
        )
    if len(inputs) != 1 or len(outputs) != 1:
        raise ValueError(
            f"model {model.name!r} has {len(inputs)} inputs and {len(outputs)} outputs; "
            "only single-input, single-output chains are supported"
        )
    chain = [layer for layer in model.layers if _class(layer) != "InputLayer"]
    previous = inputs[0]
    for layer in chain:
        if layer.input is not previous:
            raise ValueError(
                f"model {model.name!r} is not a linear chain of layers: {_describe(layer)} "
                "does not take the previous layer's output (branches, merges and shared "
                "layers are not supported)"
            )
        previous = layer.output
    if not chain or previous is not outputs[0]:
        raise ValueError(f"model {model.name!r} is not a linear chain of layers")
    return chain


def _first_affine_position(chain: list) -> int:
    for position, layer in enumerate(chain):
        name = _class(layer)
        if name in _AFFINE:
            return position
        if name not in _PREPROCESSING:
            break
    else:
        raise ValueError("the model has no Dense, Conv1D or Conv2D layer")
    raise ValueError(
        f"unsupported layer before the first affine layer: {_describe(layer)} at position "
        f"{position}; the first affine layer must be Dense, Conv1D or Conv2D, preceded only "
        f"by {', '.join(_PREPROCESSING)}"
    )


def _activation_name(function: Callable) -> str:
    keras = import_keras()
    for name in _ACTIVATIONS:
        if function is keras.activations.get(name):
            return name
    return getattr(function, "__name__", repr(function))


def _relu_layer(layer: Any) -> bool:
    """True for a plain ReLU layer (``ReLU()`` or ``Activation("relu")``)."""
    name = _class(layer)
    if name == "ReLU":
        return (layer.max_value, layer.negative_slope, layer.threshold) == (None, 0.0, 0.0)
    return name == "Activation" and _activation_name(layer.activation) == "relu"


def _separate_relu(layer: Any, following: list) -> int:
    """0 if ``layer`` has a fused ReLU, 1 if the next layer is its ReLU; else ValueError."""
    activation = _activation_name(layer.activation)
    if activation == "relu":
        return 0
    if activation == "linear" and following and _relu_layer(following[0]):
        return 1
    after = _describe(following[0]) if following else "nothing"
    raise ValueError(
        f"the first affine layer {_describe(layer)} must be followed by a ReLU (fused "
        f"activation='relu', or a ReLU()/Activation('relu') layer), but its activation is "
        f"{activation!r} and it is followed by {after}"
    )


def _known_shape(shape: tuple, what: str) -> tuple[int, ...]:
    if any(size is None for size in shape):
        raise ValueError(f"{what} must have a fully known shape per example, got {shape}")
    return tuple(int(size) for size in shape)


def _affine_layer(layer: Any) -> AffineLayer:
    """The float64 copy of a Keras Dense/Conv1D/Conv2D layer, with TF's padding resolved."""
    kind = _AFFINE[_class(layer)]
    kernel = np.asarray(layer.kernel.numpy(), dtype=np.float64)
    bias = np.zeros(kernel.shape[-1]) if layer.bias is None else layer.bias.numpy()
    input_shape = _known_shape(layer.input.shape[1:], f"the input of {_describe(layer)}")
    if kind == "dense":
        if len(input_shape) != 1:
            raise ValueError(
                f"the first affine layer {_describe(layer)} reads per-example inputs of shape "
                f"{input_shape}; a first Dense layer needs a flat input (add a Flatten layer)"
            )
        return AffineLayer(kind, kernel, bias, (), (), (), input_shape, (kernel.shape[-1],))
    if layer.data_format != "channels_last" or layer.groups != 1:
        raise ValueError(
            f"the first affine layer {_describe(layer)} must have data_format='channels_last' "
            f"and groups=1, got {layer.data_format!r} and {layer.groups}"
        )
    padding = tuple(
        resolve_padding(layer.padding, size, k, s, d)
        for size, k, s, d in zip(
            input_shape[:-1], kernel.shape[:-2], layer.strides, layer.dilation_rate, strict=True
        )
    )
    output_shape = _known_shape(layer.output.shape[1:], f"the output of {_describe(layer)}")
    return AffineLayer(
        kind,
        kernel,
        bias,
        tuple(layer.strides),
        tuple(layer.dilation_rate),
        padding,
        input_shape,
        output_shape,
    )


def _output_kind(layer: Any) -> OutputKind:
    """softmax/sigmoid from the last layer's activation; anything else is used as it is."""
    if _class(layer) == "Softmax":
        return "softmax"
    activation = getattr(layer, "activation", None)
    name = _activation_name(activation) if activation is not None else "linear"
    return name if name in ("softmax", "sigmoid") else "linear"


def _preprocess(layer: Any, value: np.ndarray) -> np.ndarray:
    """One pre-affine layer applied to one example in float64 numpy."""
    name = _class(layer)
    if name == "Flatten":
        if layer.data_format != "channels_last" and value.ndim > 1:
            raise ValueError(f"{_describe(layer)}: only data_format='channels_last' is supported")
        return value.reshape(-1)
    if name == "Reshape":
        return value.reshape(layer.target_shape)
    if name == "Rescaling":
        scale, offset = (np.asarray(v, dtype=np.float64) for v in (layer.scale, layer.offset))
        return np.asarray(value, dtype=np.float64) * scale + offset
    if name == "Embedding":
        return _embed(layer, value)
    return value  # InputLayer


def _embed(layer: Any, ids: np.ndarray) -> np.ndarray:
    if layer.mask_zero:
        raise ValueError(f"{_describe(layer)}: mask_zero=True is not supported")
    vocabulary = int(layer.input_dim)
    if (ids != np.round(ids)).any() or ids.min() < 0 or ids.max() >= vocabulary:
        raise ValueError(
            f"{_describe(layer)} needs integer token ids in [0, {vocabulary}), got values "
            f"{ids.min()}..{ids.max()}"
        )
    return np.asarray(layer.embeddings.numpy(), dtype=np.float64)[ids.astype(np.int64)]


@dataclass(frozen=True, eq=False)
class DenseLayer:
    """One layer of a Dense stack: ``activation(x @ W + b)``, float64."""

    W: np.ndarray
    b: np.ndarray
    activation: str


def mlp_layers(model: keras.Model) -> list[DenseLayer]:
    """The Dense layers of a model that is only a stack of them, for full-network encoding.

    Leading InputLayer/Flatten/Rescaling layers are allowed and left out: the first
    Dense layer's input is ``KerasAdapter(model).affine_input(x)``. A Dense layer without
    activation may be followed by its activation as a ``ReLU()``, ``Activation`` or
    ``Softmax`` layer. Activations are named ``relu``, ``linear``, ``softmax`` or
    ``sigmoid``; anything else raises ``ValueError``.
    """
    chain = _layer_chain(model)
    stack: list[DenseLayer] = []
    for layer in chain:
        name = _class(layer)
        if name in ("Flatten", "Rescaling", "InputLayer") and not stack:
            continue
        if name == "Dense":
            activation = _activation_name(layer.activation)
            if activation not in _ACTIVATIONS:
                raise ValueError(
                    f"{_describe(layer)} has activation {activation!r}; supported: {', '.join(_ACTIVATIONS)}"
                )
            bias = np.zeros(layer.units) if layer.bias is None else layer.bias.numpy()
            kernel = np.array(layer.kernel.numpy(), dtype=np.float64)
            stack.append(DenseLayer(kernel, np.array(bias, dtype=np.float64), activation))
            continue
        activation = _layer_activation(layer)
        if activation is None or not stack or stack[-1].activation != "linear":
            raise ValueError(
                f"mlp_layers needs a stack of Dense layers (optionally after Flatten, "
                f"InputLayer or Rescaling), but found {_describe(layer)}"
            )
        stack[-1] = DenseLayer(stack[-1].W, stack[-1].b, activation)
    if not stack:
        raise ValueError("mlp_layers found no Dense layer in the model")
    for layer in stack:
        for array in (layer.W, layer.b):
            array.flags.writeable = False
    return stack


def _layer_activation(layer: Any) -> str | None:
    """The activation a standalone activation layer applies, or None if it is not one."""
    name = _class(layer)
    if name == "Softmax" and layer.axis in (-1, (-1,), [-1]):
        return "softmax"
    if _relu_layer(layer):
        return "relu"
    if name == "Activation" and _activation_name(layer.activation) in _ACTIVATIONS:
        return _activation_name(layer.activation)
    return None


def load_model(path: str | Path) -> keras.Model:
    """Load a Keras model from a ``.keras`` or ``.h5`` file (for inference: not compiled)."""
    keras = import_keras()
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no model file at {path}")
    if path.suffix not in (".keras", ".h5", ".hdf5"):
        raise ValueError(f"a Keras model file must end in .keras or .h5, got {path.name!r}")
    try:
        return keras.saving.load_model(path, compile=False)
    except Exception as error:
        raise ValueError(
            f"could not read a Keras model from {path}: {type(error).__name__}: {error}"
        ) from error
