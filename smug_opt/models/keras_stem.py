"""Reading a Keras model's stem: the layers from its input to the first affine layer's
activation, folded into one exact :class:`AffineLayer`, and the head that follows.

Supported stem (anything after the activation is the head, any graph):
``Input → [Rescaling | Normalization | Reshape | Flatten | Embedding]* → [ZeroPadding]*
→ Dense | Conv1D | Conv2D | DepthwiseConv2D | SeparableConv2D → [BatchNormalization]
→ [activation]``. Rescaling, Normalization, Reshape, Flatten and Embedding are applied
in float64 to give the affine input (the mask acts there: a masked pixel is 0 after
Rescaling/Normalization, as in the paper's preprocessed inputs); ZeroPadding goes into
the affine layer's padding, BatchNormalization (inference statistics) into its kernel
and bias, a SeparableConv2D's two kernels into one. A nested Sequential model on that path
(ConvNeXt's stem) is walked as if its layers were the outer model's.

The graph walk and the head live here; folding the layers it finds into one affine layer
is :mod:`smug_opt.models.keras_fold`'s.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from smug_opt.models._keras import import_keras
from smug_opt.models.activations import Activation
from smug_opt.models.base import AffineLayer
from smug_opt.models.keras_fold import (
    ACTIVATION_LAYERS,
    AFFINE,
    describe,
    fold_affine,
    fused_activation,
    layer_activation,
    layer_class,
)

__all__ = ["Stem", "describe", "layer_class", "read_stem"]

PASS_THROUGH_LAYERS = ("InputLayer", "Flatten", "Rescaling", "Normalization", "Embedding", "Reshape")
"""Layers before the first affine layer that the stem reads through (folded or reshaped)."""
PADDING = ("ZeroPadding1D", "ZeroPadding2D")
_STEM_HELP = (
    "the input must reach the first affine layer (Dense, Conv1D, Conv2D, DepthwiseConv2D or "
    "SeparableConv2D) through a chain of InputLayer, Rescaling, Normalization, Reshape, "
    "Flatten, Embedding and (last) ZeroPadding layers"
)


@dataclass(frozen=True, eq=False)
class Stem:
    """What the adapter needs from a model.

    ``preprocessing``: layers applied in float64 numpy to give the affine input;
    ``padding``, ``affine_layer``, ``batch_norm`` and ``activation_layer`` (None when
    absent or fused): the Keras layers from the affine input to ``h``; ``affine``: them
    folded; ``head``: ``h`` → model outputs (a functional sub-model, or a Sequential
    model's remaining layers); ``flattened_shape``: what a Flatten made flat before a Dense layer;
    ``tokens``: the values are token embeddings.
    """

    preprocessing: list
    padding: list
    affine_layer: Any
    batch_norm: Any | None
    activation_layer: Any | None
    affine: AffineLayer
    activation: Activation
    head: Callable[[Any], Any]
    flattened_shape: tuple[int, ...] | None
    tokens: bool

    @property
    def tf_stem(self) -> list:
        """The Keras layers from the affine input to ``h``, in order."""
        return [*self.padding, self.affine_layer,
                *(layer for layer in (self.batch_norm, self.activation_layer) if layer is not None)]


def read_stem(model: Any) -> Stem:
    """Walk ``model`` from its input to the first affine layer's activation; see the module."""
    keras = import_keras()
    graph = _Walker(_Graph(model, keras))
    layer = graph.first()
    preprocessing: list = []
    padding: list = []
    position = 0
    while layer_class(layer) not in AFFINE:
        name = layer_class(layer)
        if name in PADDING:
            padding.append(layer)
        elif name in PASS_THROUGH_LAYERS and not padding:
            preprocessing.append(layer)
        else:
            late = padding and name in PASS_THROUGH_LAYERS
            where = "after a ZeroPadding layer" if late else "before the first affine layer"
            raise ValueError(
                f"unsupported layer {where}: {describe(layer)} at position {position}; {_STEM_HELP}"
            )
        layer = graph.after(layer, _STEM_HELP)
        position += 1
    affine_layer = layer
    batch_norm = activation_layer = None
    activation = fused_activation(affine_layer)
    last = affine_layer
    if activation.name == "linear":
        follower = graph.peek()
        if follower is not None and layer_class(follower) == "BatchNormalization":
            batch_norm = last = graph.take()
            follower = graph.peek()
        if follower is not None and layer_class(follower) in ACTIVATION_LAYERS:
            activation = layer_activation(follower)
            activation_layer = last = graph.take()
    affine = fold_affine(affine_layer, padding, batch_norm)
    head = graph.head(last)
    flattened, tokens = _flattened_shape(preprocessing)
    return Stem(preprocessing, padding, affine_layer, batch_norm, activation_layer, affine, activation,
                head, flattened, tokens)


class _Walker:
    """Steps through the stem's layers, entering a nested Sequential model (ConvNeXt's
    stem is one) as if its layers were the outer model's; the nested model's remaining
    layers then open the head."""

    def __init__(self, graph: _Graph) -> None:
        self.graph = graph
        self.outer: Any = None  # the current layer of the outer model
        self.pending: list = []  # the rest of the nested Sequential being walked
        self.inside = False

    def _enter(self, layer: Any) -> Any:
        self.outer = layer
        inner = [lay for lay in getattr(layer, "layers", []) if layer_class(lay) != "InputLayer"]
        if layer_class(layer) != "Sequential" or not inner:
            self.inside = False
            return layer
        self.inside, self.pending = True, inner[1:]
        return inner[0]

    def first(self) -> Any:
        return self._enter(self.graph.first())

    def after(self, layer: Any, help_text: str) -> Any:
        if self.pending:
            return self.pending.pop(0)
        return self._enter(self.graph.after(self.outer, help_text))

    def peek(self) -> Any | None:
        """The layer that alone reads the current layer's output, if one does."""
        if self.pending:
            return self.pending[0]
        return self.graph.single_follower(self.outer)

    def take(self) -> Any:
        if self.pending:
            return self.pending.pop(0)
        follower = self.graph.single_follower(self.outer)
        self.outer, self.inside = follower, False
        return follower

    def head(self, last: Any) -> Callable[[Any], Any]:
        if not self.inside:
            return self.graph.head(last)
        prefix = list(self.pending)
        outer = self.graph.head(self.outer)

        def apply(value: Any) -> Any:
            for layer in prefix:
                value = layer(value, training=False)
            return outer(value)

        return apply


class _Graph:
    """Who consumes whose output, for a Sequential list or a functional graph."""

    def __init__(self, model: Any, keras: Any) -> None:
        self.model = model
        self.keras = keras
        self.sequential = isinstance(model, keras.Sequential)
        try:
            inputs, outputs = model.inputs, model.outputs
        except (AttributeError, ValueError):
            inputs = outputs = None
        if self.sequential and not inputs:
            raise ValueError(
                f"Sequential model {model.name!r} has no known input shape; start it with "
                "keras.Input(shape=...) or call model.build(input_shape)"
            )
        if not inputs or not outputs:
            raise ValueError(
                f"model {model.name!r} ({type(model).__name__}) is a subclassed model; only "
                "Sequential and functional models are supported"
            )
        if len(inputs) != 1 or len(outputs) != 1:
            raise ValueError(
                f"model {model.name!r} has {len(inputs)} inputs and {len(outputs)} outputs; "
                "only single-input, single-output models are supported"
            )
        self.layers = [layer for layer in model.layers if layer_class(layer) != "InputLayer"]
        if not self.layers:
            raise ValueError(f"model {model.name!r} has no layers")
        self.consumers: dict[int, list] = {}
        if self.sequential:
            self._input_key = id(model)
            for producer, layer in zip([model, *self.layers], self.layers, strict=False):
                self.consumers[id(producer)] = [layer]
        else:
            self._input_key = id(inputs[0]._keras_history.operation)
            for layer in model.layers:
                for node in self._nodes(layer):
                    for tensor in node.input_tensors:
                        self.consumers.setdefault(id(tensor._keras_history.operation), []).append(layer)

    def first(self) -> Any:
        return self._only(self._input_key, "the model's input", _STEM_HELP)

    def after(self, layer: Any, help_text: str) -> Any:
        if self._is_output(layer):
            raise ValueError(f"the model has no Dense, Conv1D or Conv2D layer; {help_text}")
        return self._only(id(layer), describe(layer), help_text)

    def single_follower(self, layer: Any) -> Any | None:
        """The one layer that reads ``layer``'s output, if exactly one does (unshared)."""
        users = self.consumers.get(id(layer), [])
        if len(users) == 1 and len(self._nodes(users[0])) == 1 and not self._is_output(layer):
            return users[0]
        return None

    def head(self, last: Any) -> Callable[[Any], Any]:
        """Everything after ``last`` (the activation, or the affine layer/BN), as one callable."""
        if self._is_output(last):
            raise ValueError(
                f"model {self.model.name!r} has no layers after the first layer's activation "
                f"({describe(last)}); SMUG needs a head that scores classes"
            )
        if self.sequential:
            layers = self.layers[self.layers.index(last) + 1 :]

            def apply(value: Any) -> Any:
                for layer in layers:
                    value = layer(value, training=False)
                return value

            return apply
        try:
            head = self.keras.Model(last.output, self.model.outputs[0], name=f"{self.model.name}_head")
        except ValueError as error:
            raise ValueError(
                f"the layers after {describe(last)} do not form a head that reads only its "
                f"output: {error}. SMUG needs every path from the input to the output to pass "
                "through the first layer's activation (no skip connection around it)"
            ) from error
        return lambda value: head(value, training=False)

    def _nodes(self, layer: Any) -> list:
        """The calls of ``layer`` in this model's graph (one per layer in a Sequential)."""
        if self.sequential:
            return [None]
        graph = getattr(self.model, "_nodes", None)  # keys "<id(layer)>_ib-<call index>"
        return [node for index, node in enumerate(layer._inbound_nodes)
                if graph is None or f"{id(layer)}_ib-{index}" in graph]

    def _is_output(self, layer: Any) -> bool:
        output = self.model.outputs[0]._keras_history.operation
        return layer is output or (self.sequential and layer is self.layers[-1])

    def _only(self, key: int, what: str, help_text: str) -> Any:
        users = self.consumers.get(key, [])
        if len(users) != 1:
            names = ", ".join(describe(u) for u in users) or "nothing"
            raise ValueError(
                f"{what} feeds {len(users)} layers ({names}) before the first affine layer; {help_text}"
            )
        layer = users[0]
        calls = len(self._nodes(layer))
        if calls != 1:
            raise ValueError(
                f"{describe(layer)} is shared (called {calls} times) before "
                f"the first affine layer's activation; {help_text}"
            )
        return layer


def _flattened_shape(preprocessing: list) -> tuple[tuple[int, ...] | None, bool]:
    """The per-example shape a Flatten/Reshape made flat before a Dense layer (None if the
    model's input is already flat), and whether the values are token embeddings."""
    tokens = any(layer_class(layer) == "Embedding" for layer in preprocessing)
    shape = None
    for layer in preprocessing:
        if layer_class(layer) in ("Flatten", "Reshape"):
            before = tuple(int(s) for s in layer.input.shape[1:])
            after = tuple(int(s) for s in layer.output.shape[1:])
            if len(after) == 1 and len(before) >= 2:
                shape = before
    return shape, tokens
