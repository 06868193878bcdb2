"""The Keras 3 (TensorFlow backend) model adapter and model loading."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from smug_opt.models._keras import import_keras
from smug_opt.models.base import LayerKind, ModelAdapter, OutputKind
from smug_opt.models.grid import CellGrid, data_grid, regular_grid
from smug_opt.models.keras_memory import IG_MEMORY_BUDGET, footprint_batch, head_footprint
from smug_opt.models.keras_stem import Stem, describe, layer_class, read_stem

if TYPE_CHECKING:
    import keras

__all__ = ["IG_MEMORY_BUDGET", "KerasAdapter", "load_model"]


class KerasAdapter(ModelAdapter):
    """A Keras 3 Sequential or functional model, seen as SMUG needs it.

    The path from the input to the first affine layer's activation must be a chain (see
    :mod:`smug_opt.models.keras_stem`); after it, any graph (branches, merges, shared
    layers) is the *head*, run as a functional sub-model. ``batch_size`` bounds the rows
    sent to TensorFlow at once by forward passes; gradient batches through the head are
    sized from its memory footprint (:attr:`gradient_batch`, read from the traced head:
    :mod:`smug_opt.models.keras_memory`) unless ``gradient_batch`` is given.
    """

    def __init__(
        self, model: keras.Model, *, batch_size: int = 512, gradient_batch: int | None = None
    ) -> None:
        keras = import_keras()
        if not isinstance(model, keras.Model):
            raise TypeError(f"model must be a keras.Model, got {type(model).__name__}")
        if batch_size < 1 or (gradient_batch is not None and gradient_batch < 1):
            raise ValueError(f"batch sizes must be positive, got {batch_size} and {gradient_batch}")
        stem = read_stem(model)
        output_shape = tuple(model.outputs[0].shape[1:])
        if len(output_shape) != 1:
            raise ValueError(
                f"the model's output must be a vector of class scores per example, got "
                f"per-example shape {output_shape}"
            )
        self.model = model
        self.input_shape = _known_shape(model.inputs[0].shape[1:], "the model's input")
        self.affine = stem.affine
        self.activation = stem.activation
        self.output_kind = _output_kind(model)
        self.num_outputs = int(output_shape[0])
        self.batch_size = batch_size
        self._stem = stem
        self._dtype = stem.tf_stem[-1].compute_dtype
        self._gradient_batch = gradient_batch
        self._functions = _Functions(model, stem, self)

    def __repr__(self) -> str:
        return (
            f"KerasAdapter({self.model.name!r}, first layer {self.affine.kind} "
            f"{self.affine.input_shape}->{self.affine.output_shape} ({self.activation.label}), "
            f"{self.num_outputs} {self.output_kind} outputs)"
        )

    @property
    def gradient_batch(self) -> int:
        """Rows per gradient batch through the head: the ``gradient_batch`` given, else as
        many as keep the head's footprint within :data:`IG_MEMORY_BUDGET` (traces the head
        once, on first use)."""
        if self._gradient_batch is None:
            graph = self._functions.head.get_concrete_function().graph
            self._gradient_batch = footprint_batch(head_footprint(graph, self.affine.output_shape))
        return self._gradient_batch

    def grid_shape(self, data_shape: tuple[int, ...] | None = None) -> tuple[int, ...] | None:
        """A flat dense input read as the image it came from: the shape a Flatten made flat,
        else the data's own shape (a 28×28 picture for an ``Input(784)`` MLP)."""
        if self.affine.kind is not LayerKind.DENSE:
            return None
        flattened = self._stem.flattened_shape
        if flattened is not None:
            if self._stem.tokens:
                return None
            return data_grid(math.prod(flattened), flattened)
        return data_grid(self.affine.input_shape[0], data_shape)

    def mask_grid(self, cell: int | tuple[int, ...], data_shape: tuple[int, ...] | None = None) -> CellGrid:
        """As :meth:`ModelAdapter.mask_grid`; token embeddings flattened for a Dense layer
        are cut per token (a token's values share its cell)."""
        flattened = self._stem.flattened_shape
        if self.affine.kind is LayerKind.DENSE and flattened is not None and self._stem.tokens:
            return regular_grid(flattened[:1], cell, math.prod(flattened[1:]))
        return super().mask_grid(cell, data_shape)

    def affine_input(self, x: np.ndarray) -> np.ndarray:
        """The first affine layer's input for one raw example, float64 (numpy, exact)."""
        value = self.check_input(x)
        for layer in self._stem.preprocessing:
            value = _preprocess(layer, value)
        return np.asarray(value, dtype=np.float64)

    def head(self, h_batch: np.ndarray) -> np.ndarray:
        """Model outputs (batch, num_outputs) from first-layer activations, float64."""
        h_batch = self._check_batch(h_batch, self.affine.output_shape, "h_batch")
        return self._run(self._functions.head, h_batch, self.gradient_batch)

    def head_gradient(
        self, h_batch: np.ndarray, target: int, *, batch_size: int | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(scores, d score / d h)`` of class ``target`` for a batch of activations,
        in batches of ``batch_size`` rows (default :attr:`gradient_batch`)."""
        if batch_size is not None and batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        h_batch = self._check_batch(h_batch, self.affine.output_shape, "h_batch")
        weights, offset = self.score_weights(target)
        results = [
            self._functions.head_gradient(chunk, weights.astype(self._dtype))
            for chunk in self._chunks(h_batch, batch_size or self.gradient_batch)
        ]
        scores = np.concatenate([np.asarray(s, dtype=np.float64) for s, _ in results]) + offset
        grads = np.concatenate([np.asarray(g, dtype=np.float64) for _, g in results])
        return scores, grads

    def predict(self, x_batch: np.ndarray) -> np.ndarray:
        """Model outputs (batch, num_outputs) for raw inputs (batch, *input_shape), float64."""
        x_batch = self.check_input(x_batch, batched=True)
        return self._run(self._functions.forward, x_batch.astype(self.model.inputs[0].dtype), self.batch_size)

    def predict_from_affine_input(self, xa_batch: np.ndarray) -> np.ndarray:
        """Model outputs when the first affine layer's input is given (e.g. masked)."""
        xa_batch = self._check_batch(xa_batch, self.affine.input_shape, "xa_batch")
        return self._run(self._functions.from_affine_input, xa_batch, self.batch_size)

    def stem_preactivation(self, xa_batch: np.ndarray) -> np.ndarray:
        """The first affine layer's output (after folded BatchNorm, before the activation)
        as Keras computes it from affine inputs: the check of the folding."""
        xa_batch = self._check_batch(xa_batch, self.affine.input_shape, "xa_batch")
        return self._run(self._functions.preactivation, xa_batch, self.batch_size)

    def _check_batch(self, batch: np.ndarray, shape: tuple[int, ...], name: str) -> np.ndarray:
        batch = np.asarray(batch)
        if batch.shape[1:] != shape:
            raise ValueError(
                f"{name} must have shape (batch, {', '.join(map(str, shape))}), got {batch.shape}"
            )
        if not np.isfinite(batch).all():
            raise ValueError(f"{name} must be finite")
        return batch.astype(self._dtype)

    @staticmethod
    def _chunks(batch: np.ndarray, size: int) -> list[np.ndarray]:
        return [batch[i : i + size] for i in range(0, len(batch), size)]

    def _run(self, function: Callable[[Any], Any], batch: np.ndarray, size: int) -> np.ndarray:
        if len(batch) == 0:
            return np.zeros((0, self.num_outputs))
        return np.concatenate(
            [np.asarray(function(chunk), dtype=np.float64) for chunk in self._chunks(batch, size)]
        )


class _Functions:
    """The adapter's compiled TensorFlow functions (one trace each, any batch size)."""

    def __init__(self, model: keras.Model, parts: Stem, adapter: KerasAdapter) -> None:
        import tensorflow as tf

        def spec(shape: tuple[int, ...], dtype: str) -> tf.TensorSpec:
            return tf.TensorSpec((None, *shape), dtype)

        def apply(layers: list, value: tf.Tensor) -> tf.Tensor:
            for layer in layers:
                value = layer(value, training=False)
            return value

        h_spec = spec(adapter.affine.output_shape, adapter._dtype)
        xa_spec = spec(adapter.affine.input_shape, adapter._dtype)
        self.forward = tf.function(
            lambda x: model(x, training=False),
            input_signature=[spec(adapter.input_shape, model.inputs[0].dtype)],
        )
        stem, head = parts.tf_stem, parts.head
        linear = [*parts.padding, _without_activation(parts.affine_layer),
                  *([parts.batch_norm] if parts.batch_norm is not None else [])]
        self.from_affine_input = tf.function(lambda xa: head(apply(stem, xa)), input_signature=[xa_spec])
        self.preactivation = tf.function(lambda xa: apply(linear, xa), input_signature=[xa_spec])
        self.head = tf.function(head, input_signature=[h_spec])

        @tf.function(input_signature=[h_spec, tf.TensorSpec((adapter.num_outputs,), h_spec.dtype)])
        def head_gradient(h: tf.Tensor, weights: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
            with tf.GradientTape() as tape:
                tape.watch(h)
                scores = tf.linalg.matvec(head(h), weights)
            return scores, tape.gradient(scores, h)

        self.head_gradient = head_gradient


def _without_activation(layer: Any) -> Any:
    """``layer`` itself if its activation is linear, else a copy that shares its weights'
    values but applies no activation (to read the pre-activation Keras computes)."""
    if import_keras().activations.serialize(layer.activation) == "linear":
        return layer
    copy = type(layer).from_config({**layer.get_config(), "activation": "linear"})
    copy.build(layer.input.shape)
    copy.set_weights(layer.get_weights())
    return copy


def _known_shape(shape: tuple, what: str) -> tuple[int, ...]:
    if any(size is None for size in shape):
        raise ValueError(f"{what} must have a fully known shape per example, got {shape}")
    return tuple(int(size) for size in shape)


def _output_kind(model: Any) -> OutputKind:
    """softmax/sigmoid from the output layer's activation; anything else is used as it is."""
    layer = model.outputs[0]._keras_history.operation
    if layer_class(layer) == "Softmax":
        return "softmax"
    activation = getattr(layer, "activation", None)
    if activation is None:
        return "linear"
    name = import_keras().activations.serialize(activation)
    return name if name in ("softmax", "sigmoid") else "linear"


def _preprocess(layer: Any, value: np.ndarray) -> np.ndarray:
    """One pre-affine layer applied to one example in float64 numpy."""
    name = layer_class(layer)
    if name == "Flatten":
        if layer.data_format != "channels_last" and value.ndim > 1:
            raise ValueError(f"{describe(layer)}: only data_format='channels_last' is supported")
        return value.reshape(-1)
    if name == "Reshape":
        return value.reshape(layer.target_shape)
    if name == "Rescaling":
        scale, offset = (np.asarray(v, dtype=np.float64) for v in (layer.scale, layer.offset))
        return np.asarray(value, dtype=np.float64) * scale + offset
    if name == "Normalization":
        return _normalize(layer, np.asarray(value, dtype=np.float64))
    if name == "Embedding":
        return _embed(layer, value)
    return value  # InputLayer


def _normalize(layer: Any, value: np.ndarray) -> np.ndarray:
    """Keras' Normalization in float64: ``(x − mean) / max(√var, ε)`` (or its inverse)."""
    keras = import_keras()
    mean = np.asarray(layer.mean, dtype=np.float64).reshape(np.shape(layer.mean)[1:] or ())
    variance = np.asarray(layer.variance, dtype=np.float64).reshape(np.shape(layer.variance)[1:] or ())
    std = np.maximum(np.sqrt(variance), keras.backend.epsilon())
    return mean + value * std if layer.invert else (value - mean) / std


def _embed(layer: Any, ids: np.ndarray) -> np.ndarray:
    if layer.mask_zero:
        raise ValueError(f"{describe(layer)}: mask_zero=True is not supported")
    vocabulary = int(layer.input_dim)
    if (ids != np.round(ids)).any() or ids.min() < 0 or ids.max() >= vocabulary:
        raise ValueError(
            f"{describe(layer)} needs integer token ids in [0, {vocabulary}), got values "
            f"{ids.min()}..{ids.max()}"
        )
    return np.asarray(layer.embeddings.numpy(), dtype=np.float64)[ids.astype(np.int64)]


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
