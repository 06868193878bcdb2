"""A Dense/ReLU stack read from a model: the network the stress case encodes whole.

:func:`mlp_layers` reads a Keras model that is only Dense layers (after Flatten,
InputLayer or Rescaling); :func:`as_mlp` turns that, or a list of ``(W, b)`` layers, into
an :class:`MLP` in float64 that knows its mask grid; :func:`verify_mask_in_model` checks a
mask on the actual weights.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from smug_opt.errors import ParameterError
from smug_opt.models.grid import CellGrid, data_grid, regular_grid
from smug_opt.models.keras_stem import describe, layer_class

if TYPE_CHECKING:
    import keras

    from smug_opt.models.base import ModelAdapter

__all__ = ["MLP", "DenseLayer", "as_mlp", "mlp_layers", "verify_mask_in_model"]

_HIDDEN = ("relu",)
_OUTPUT = ("linear", "softmax", "sigmoid")
_DENSE_ACTIVATIONS = ("relu", "linear", "softmax", "sigmoid")


@dataclass(frozen=True, eq=False)
class MLP:
    """A ReLU MLP in float64: ``layers[k] = (W, b)`` with ``W`` of shape ``(n_in, n_out)``;
    every layer but the last is followed by ReLU, the last gives the logits.

    ``adapter``: the Keras model's adapter (its Flatten/Rescaling give the first Dense
    layer's input, and it says the mask grid); None for plain layers (the input is
    flattened, the grid read from the data's shape). ``name`` and ``digest`` identify the
    weights.
    """

    layers: tuple[tuple[np.ndarray, np.ndarray], ...]
    output: str
    name: str
    digest: str
    adapter: ModelAdapter | None = None

    @property
    def num_inputs(self) -> int:
        return int(self.layers[0][0].shape[0])

    @property
    def num_outputs(self) -> int:
        return int(self.layers[-1][0].shape[1])

    def dense_input(self, x: np.ndarray) -> np.ndarray:
        """The first Dense layer's input for one raw input ``x``, float64, flat."""
        x = np.asarray(x)
        if x.dtype.kind not in "biuf":
            raise ValueError(f"x must be numeric, got dtype {x.dtype}")
        if not np.all(np.isfinite(x)):
            raise ValueError("x contains NaN or inf")
        if self.adapter is not None:
            if x.size != int(np.prod(self.adapter.input_shape)):
                raise ValueError(f"x has {x.size} values (shape {x.shape}) but the model's input has "
                                 f"shape {self.adapter.input_shape}")
            x = self.adapter.affine_input(self.adapter.model_input(x))
        flat = np.asarray(x, dtype=np.float64).reshape(-1)
        if flat.size != self.num_inputs:
            raise ValueError(f"x has {flat.size} values (shape {x.shape}) but the network's first "
                             f"layer takes {self.num_inputs} inputs")
        return flat

    def mask_grid(self, cell: int, data_shape: tuple[int, ...],
                  shape: tuple[int, ...] | None = None) -> CellGrid:
        """``cell``×``cell`` mask cells over the Dense input of data that came as
        ``data_shape``: on ``shape`` (H, W) if given, else the adapter's grid (a Keras
        model), else the data's picture (two or more axes), else one row; channels share
        their pixel's cell."""
        n_in = self.num_inputs
        if shape is None:
            grid = self.adapter.grid_shape(data_shape) if self.adapter is not None else None
            shape = grid or data_grid(n_in, data_shape) or (1, n_in)
        height, width = (int(v) for v in shape[:2])
        if height < 1 or width < 1 or n_in % (height * width):
            raise ValueError(f"a {height}x{width} grid does not divide the {n_in} inputs into channels")
        return regular_grid((height, width), cell, n_in // (height * width))

    def logits(self, inputs: np.ndarray) -> np.ndarray:
        """Logits ``(batch, n_out)`` of Dense inputs ``(batch, n_in)``, float64."""
        value = np.asarray(inputs, dtype=np.float64)
        for k, (W, b) in enumerate(self.layers):
            value = value @ W + b
            if k + 1 < len(self.layers):
                value = np.maximum(value, 0.0)
        return value

    def predicted(self, logits: np.ndarray) -> np.ndarray:
        """The class each row of ``logits`` predicts (single sigmoid output: 1 iff > 0)."""
        if self.num_outputs == 1:
            return (logits[:, 0] > 0).astype(np.int64)
        return np.argmax(logits, axis=1)

    def keeps(self, logits: np.ndarray, label: int) -> np.ndarray:
        """Whether each row of ``logits`` predicts ``label`` strictly (no tie)."""
        if self.num_outputs == 1:
            return logits[:, 0] > 0 if label == 1 else logits[:, 0] < 0
        others = np.delete(logits, label, axis=1)
        return logits[:, label] > others.max(axis=1)


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
    chain = _dense_chain(model)
    stack: list[DenseLayer] = []
    for layer in chain:
        name = layer_class(layer)
        if name in ("Flatten", "Rescaling", "InputLayer") and not stack:
            continue
        if name == "Dense":
            activation = _activation_name(layer.activation)
            if activation not in _DENSE_ACTIVATIONS:
                raise ValueError(
                    f"{describe(layer)} has activation {activation!r}; supported: "
                    f"{', '.join(_DENSE_ACTIVATIONS)}"
                )
            bias = np.zeros(layer.units) if layer.bias is None else layer.bias.numpy()
            kernel = np.array(layer.kernel.numpy(), dtype=np.float64)
            stack.append(DenseLayer(kernel, np.array(bias, dtype=np.float64), activation))
            continue
        separate = _layer_activation(layer)  # an activation layer after a linear Dense
        if separate is None or not stack or stack[-1].activation != "linear":
            raise ValueError(
                f"mlp_layers needs a stack of Dense layers (optionally after Flatten, "
                f"InputLayer or Rescaling), but found {describe(layer)}"
            )
        stack[-1] = DenseLayer(stack[-1].W, stack[-1].b, separate)
    if not stack:
        raise ParameterError("mlp_layers", "found no Dense layer in the model")
    for layer in stack:
        for array in (layer.W, layer.b):
            array.flags.writeable = False
    return stack


def _layer_activation(layer: Any) -> str | None:
    """The activation a standalone activation layer applies, or None if it is not one."""
    name = layer_class(layer)
    if name == "Softmax" and layer.axis in (-1, (-1,), [-1]):
        return "softmax"
    if _plain_relu(layer):
        return "relu"
    if name == "Activation" and _activation_name(layer.activation) in _DENSE_ACTIVATIONS:
        return _activation_name(layer.activation)
    return None


def _dense_chain(model: keras.Model) -> list:
    """The model's layers (no InputLayer), checking that they form one chain."""
    from smug_opt.models._keras import import_keras

    keras = import_keras()
    try:
        inputs, outputs = model.inputs, model.outputs
    except (AttributeError, ValueError):
        inputs = outputs = None
    if not inputs or not outputs or len(inputs) != 1 or len(outputs) != 1:
        raise ParameterError("mlp_layers", f"needs a single-input, single-output Keras model with a known "
                         f"input shape, got {getattr(model, 'name', type(model).__name__)!r}")
    chain = [layer for layer in model.layers if layer_class(layer) != "InputLayer"]
    if isinstance(model, keras.Sequential):
        return chain
    previous = inputs[0]
    for layer in chain:
        if layer.input is not previous:
            raise ParameterError("mlp_layers", f"needs a chain of layers, but {describe(layer)} does "
                                               "not take the previous layer's output")
        previous = layer.output
    return chain


def _activation_name(function: Any) -> str:
    from smug_opt.models._keras import import_keras

    name = import_keras().activations.serialize(function)
    return name if isinstance(name, str) else getattr(function, "__name__", repr(function))


def _plain_relu(layer: Any) -> bool:
    """True for a plain ReLU layer (``ReLU()`` or ``Activation("relu")``)."""
    name = layer_class(layer)
    if name == "ReLU":
        return (layer.max_value, layer.negative_slope, layer.threshold) == (None, 0.0, 0.0)
    return name == "Activation" and _activation_name(layer.activation) == "relu"


def as_mlp(model_or_layers: Any, name: str | None = None) -> MLP:
    """An :class:`MLP` from a Keras Dense stack, an :class:`MLP`, or a list of layers.

    A layer is ``(W, b)``, ``(W, b, activation)`` or has ``.W``, ``.b``, ``.activation``
    (:class:`DenseLayer`). Hidden layers must be ReLU; the
    last layer linear, softmax or sigmoid (plain ``(W, b)`` layers are taken as such).
    """
    if isinstance(model_or_layers, MLP):
        return model_or_layers
    adapter = None
    if isinstance(model_or_layers, (list, tuple)):
        raw = list(model_or_layers)
        default_name = "layers"
    else:
        try:
            from smug_opt.models.keras_adapter import KerasAdapter
        except ImportError as error:
            raise ValueError(
                f"full_network takes a Keras model or a list of (W, b) layers, got "
                f"{type(model_or_layers).__name__} (and the Keras adapter is unavailable: {error})"
            ) from error
        raw = mlp_layers(model_or_layers)
        adapter = KerasAdapter(model_or_layers)
        default_name = str(getattr(model_or_layers, "name", "keras"))
    if not raw:
        raise ValueError("the network has no layers")
    layers: list[tuple[np.ndarray, np.ndarray]] = []
    activations: list[str] = []
    for k, layer in enumerate(raw):
        W, b, act = _layer_parts(layer, k, last=k == len(raw) - 1)
        if layers and W.shape[0] != layers[-1][0].shape[1]:
            raise ValueError(f"layer {k} takes {W.shape[0]} inputs but layer {k - 1} gives "
                             f"{layers[-1][0].shape[1]}")
        layers.append((W, b))
        activations.append(act)
    for k, act in enumerate(activations[:-1]):
        if act not in _HIDDEN:
            raise ValueError(f"hidden layer {k} has activation {act!r}; full_network needs ReLU "
                             f"hidden layers (a Dense/ReLU MLP)")
    if activations[-1] not in _OUTPUT:
        raise ValueError(f"the last layer has activation {activations[-1]!r}; expected one of "
                         f"{', '.join(_OUTPUT)} (its logits are compared)")
    digest = hashlib.sha256()
    for (W, b), act in zip(layers, activations, strict=True):
        digest.update(act.encode())
        digest.update(np.ascontiguousarray(W).tobytes())
        digest.update(np.ascontiguousarray(b).tobytes())
    return MLP(tuple(layers), activations[-1], name or default_name, digest.hexdigest()[:16],
               adapter)


def _layer_parts(layer: Any, k: int, *, last: bool) -> tuple[np.ndarray, np.ndarray, str]:
    if hasattr(layer, "W") and hasattr(layer, "b"):
        W, b, act = layer.W, layer.b, str(getattr(layer, "activation", "linear" if last else "relu"))
    elif isinstance(layer, (tuple, list)) and len(layer) in (2, 3):
        W, b = layer[0], layer[1]
        act = str(layer[2]) if len(layer) == 3 else ("linear" if last else "relu")
    else:
        raise ValueError(f"layer {k} must be (W, b), (W, b, activation) or have .W/.b, got "
                         f"{type(layer).__name__}")
    W = np.array(W, dtype=np.float64)
    b = np.array(b, dtype=np.float64).reshape(-1)
    if W.ndim != 2 or b.shape != (W.shape[1],):
        raise ValueError(f"layer {k}: W must be (n_in, n_out) and b (n_out,), got {W.shape} and "
                         f"{b.shape}")
    if not (np.all(np.isfinite(W)) and np.all(np.isfinite(b))):
        raise ValueError(f"layer {k} has NaN or inf weights")
    W.flags.writeable = False
    b.flags.writeable = False
    return W, b, act




def verify_mask_in_model(model_or_layers: Any, x: np.ndarray, mask: np.ndarray, label: int) -> bool:
    """Whether the model, run in float64 on the actual weights, still predicts ``label``
    strictly (no tie) on ``x`` with the inputs outside ``mask`` set to zero.

    ``mask`` has ``x``'s shape, its grid's (first two axes; channels share it) or the
    Dense input's size; it is applied to the first Dense layer's input.
    """
    mlp = as_mlp(model_or_layers)
    xa = mlp.dense_input(x)
    m = np.asarray(mask)
    if m.size == xa.size:
        flat = m.reshape(-1)
    elif np.ndim(x) >= 2 and m.shape == np.shape(x)[:2] and xa.size % m.size == 0:
        flat = np.repeat(m.reshape(-1), xa.size // m.size)
    else:
        raise ValueError(f"mask of shape {m.shape} does not fit x of shape {np.shape(x)}")
    if not np.all(np.isin(flat, (0, 1))):
        raise ValueError("mask must hold only 0/1 (or booleans)")
    return bool(mlp.keeps(mlp.logits((xa * flat)[None, :]), int(label))[0])
