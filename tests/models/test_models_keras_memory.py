"""The memory footprint of a gradient through a Keras head (it sizes the IG batches): read
from the traced graph, so what a layer computes inside it counts, and XLA-compiled parts
get their batch-independent reserve."""

import math

import pytest

from smug_opt.models import KerasAdapter
from smug_opt.models._keras import import_keras
from smug_opt.models.keras_memory import (
    IG_MEMORY_BUDGET,
    MAX_BATCH,
    XLA_RESERVE,
    HeadFootprint,
    footprint_batch,
    head_footprint,
)

keras = import_keras()
layers = keras.layers
WIDEN = 16


class _WidenAndMean(layers.Layer):
    """Output shaped like its input, but computes a ``WIDEN`` times larger tensor inside
    (as LayerNormalization, GELU or an MLP expansion do)."""

    def call(self, x):
        wide = keras.ops.tile(keras.ops.expand_dims(x, -1), (1, 1, 1, 1, WIDEN))
        return keras.ops.mean(keras.ops.sin(wide), axis=-1)


def _adapter(*middle, input_shape=(10, 10, 3)):
    keras.utils.set_random_seed(0)
    inputs = keras.Input(input_shape)
    x = layers.Conv2D(4, 3, activation="relu")(inputs)
    for layer in middle:
        x = layer(x)
    outputs = layers.Dense(5)(layers.Flatten()(x))
    return KerasAdapter(keras.Model(inputs, outputs))


def _footprint(adapter):
    graph = adapter._functions.head.get_concrete_function().graph
    return head_footprint(graph, adapter.affine.output_shape)


def test_what_a_layer_computes_inside_it_counts():
    plain, widened = _adapter(), _adapter(_WidenAndMean())
    h_bytes = 4 * math.prod(plain.affine.output_shape)
    # the widened head keeps at least its WIDEN-fold tensor per row more than the plain one
    assert _footprint(widened).per_row - _footprint(plain).per_row >= WIDEN * h_bytes
    assert _footprint(plain).fixed == _footprint(widened).fixed == 0


def test_xla_compiled_parts_reserve_their_fixed_memory():
    # Keras runs a grouped convolution through XLA on CPU (TF has no CPU kernel for it)
    grouped = _adapter(layers.Conv2D(4, 3, padding="same", groups=4))
    footprint = _footprint(grouped)
    assert footprint.xla_calls >= 1 and footprint.fixed == XLA_RESERVE
    assert _footprint(_adapter(layers.DepthwiseConv2D(3, padding="same"))).xla_calls == 0


@pytest.mark.parametrize("per_row, fixed, rows", [
    (2**20, 0, MAX_BATCH),  # small rows: capped
    (100 * 2**20, 0, 7),
    (100 * 2**20, XLA_RESERVE, 3),
    (IG_MEMORY_BUDGET, XLA_RESERVE, 1),  # never below one row
])
def test_batches_keep_the_footprint_within_the_budget(per_row, fixed, rows):
    batch = footprint_batch(HeadFootprint(per_row, fixed, int(fixed > 0)))
    assert batch == rows
    assert batch == 1 or fixed + batch * per_row <= IG_MEMORY_BUDGET


def test_the_adapter_sizes_its_gradient_batch_from_the_footprint():
    adapter = _adapter(_WidenAndMean(), input_shape=(224, 224, 3))
    assert adapter.gradient_batch == footprint_batch(_footprint(adapter)) < MAX_BATCH
