"""AffineLayer: its own float64 pre-activations agree with real Keras layers, and its
tap contributions add up to them."""

import itertools
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from smug_opt.models import AffineLayer, KerasAdapter
from smug_opt.models._keras import import_keras
from smug_opt.models.base import conv_output_size, resolve_padding

keras = import_keras()


def _keras_first_layer(kind, input_shape, filters, kernel, strides, dilation, padding, use_bias, dtype):
    """A real model whose first layer is the given linear layer followed by ReLU()."""
    if kind == "dense":
        layer = keras.layers.Dense(filters, use_bias=use_bias, dtype=dtype)
    else:
        conv = keras.layers.Conv1D if kind == "conv1d" else keras.layers.Conv2D
        layer = conv(filters, kernel, strides=strides, dilation_rate=dilation, padding=padding,
                     use_bias=use_bias, dtype=dtype)  # fmt: skip
    model = keras.Sequential(
        [keras.Input(input_shape, dtype=dtype), layer, keras.layers.ReLU(dtype=dtype),
         keras.layers.Flatten(dtype=dtype), keras.layers.Dense(2, dtype=dtype)]
    )  # fmt: skip
    if use_bias:  # Keras initialises biases to zero: make them count
        layer.bias.assign(np.random.default_rng(1).normal(size=filters))
    return model, layer


def _check_against_keras(kind, input_shape, filters, kernel, strides, dilation, padding, use_bias, dtype):
    model, layer = _keras_first_layer(
        kind, input_shape, filters, kernel, strides, dilation, padding, use_bias, dtype
    )
    adapter = KerasAdapter(model)
    x = np.random.default_rng(0).normal(size=input_shape).astype(dtype)
    expected = np.asarray(layer(x[None]))[0]
    got = adapter.affine.preactivation(x)
    assert got.shape == expected.shape == adapter.affine.output_shape
    assert got.dtype == np.float64
    tol = 1e-12 if dtype == "float64" else 2e-5
    np.testing.assert_allclose(got, expected, rtol=tol, atol=tol * max(1.0, np.abs(expected).max()))
    return adapter.affine


CONV2D_GRID = [
    # input (H, W, C), filters, kernel, strides, dilation, padding
    ((7, 9, 1), 3, (3, 3), (1, 1), (1, 1), "valid"),
    ((7, 9, 1), 3, (3, 3), (2, 2), (1, 1), "same"),
    ((8, 6, 3), 2, (2, 5), (1, 1), (1, 1), "same"),
    ((8, 6, 3), 4, (4, 3), (2, 3), (1, 1), "same"),
    ((8, 6, 3), 4, (4, 3), (3, 2), (1, 1), "valid"),
    ((11, 5, 2), 2, (3, 2), (1, 1), (2, 1), "valid"),
    ((11, 5, 2), 2, (3, 2), (1, 1), (3, 2), "same"),
    ((10, 10, 3), 5, (7, 7), (2, 2), (1, 1), "same"),  # the paper's Inception-style first conv
    ((6, 13, 1), 1, (1, 1), (1, 2), (1, 1), "valid"),
    ((5, 5, 2), 3, (5, 5), (1, 1), (1, 1), "same"),
]


@pytest.mark.parametrize(("shape", "filters", "kernel", "strides", "dilation", "padding"), CONV2D_GRID)
@pytest.mark.parametrize("use_bias", [True, False])
def test_conv2d_matches_keras_in_float64(shape, filters, kernel, strides, dilation, padding, use_bias):
    affine = _check_against_keras("conv2d", shape, filters, kernel, strides, dilation, padding, use_bias,
                                  "float64")  # fmt: skip
    assert affine.kind == "conv2d" and affine.spatial_shape == shape[:2] and affine.channels == shape[2]


@pytest.mark.parametrize(
    ("shape", "filters", "kernel", "strides", "dilation", "padding"),
    [((12, 4), 3, (3,), (1,), (1,), "valid"), ((12, 4), 3, (3,), (2,), (1,), "same"),
     ((9, 2), 2, (4,), (1,), (2,), "same"), ((9, 2), 2, (2,), (1,), (3,), "causal"),
     ((10, 5), 6, (5,), (3,), (1,), "valid"), ((7, 1), 1, (1,), (1,), (1,), "same")],
)  # fmt: skip
def test_conv1d_matches_keras_in_float64(shape, filters, kernel, strides, dilation, padding):
    affine = _check_against_keras("conv1d", shape, filters, kernel, strides, dilation, padding, True,
                                  "float64")  # fmt: skip
    assert affine.spatial_shape == shape[:1] and affine.channels == shape[1]


@pytest.mark.parametrize("use_bias", [True, False])
def test_dense_matches_keras_in_float64(use_bias):
    affine = _check_against_keras("dense", (13,), 5, None, None, None, None, use_bias, "float64")
    assert affine.spatial_shape == (13,) and affine.channels == 1 and affine.num_neurons == 5


@st.composite
def layer_configs(draw):
    kind = draw(st.sampled_from(["dense", "conv1d", "conv2d"]))
    channels, filters = draw(st.integers(1, 3)), draw(st.integers(1, 4))
    if kind == "dense":
        return kind, (draw(st.integers(1, 20)),), filters, None, None, None, None
    rank = 1 if kind == "conv1d" else 2
    size = tuple(draw(st.integers(1, 9)) for _ in range(rank))
    strided = draw(st.booleans())
    strides = tuple(draw(st.integers(1, 3)) if strided else 1 for _ in range(rank))
    dilation = tuple(1 if strided else draw(st.integers(1, 3)) for _ in range(rank))
    paddings = ["same", "valid"] + (["causal"] if kind == "conv1d" else [])
    padding = draw(st.sampled_from(paddings))
    kernel = tuple(
        draw(st.integers(1, max(1, (n - 1) // d + 1) if padding == "valid" else 4))
        for n, d in zip(size, dilation, strict=True)
    )
    return kind, (*size, channels), filters, kernel, strides, dilation, padding


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layer_configs(), st.booleans())
def test_preactivation_matches_keras_float32_random_layers(config, use_bias):
    _check_against_keras(*config, use_bias, "float32")


@pytest.mark.parametrize(
    ("size", "kernel", "stride", "dilation", "expected"),
    [(224, 7, 2, 1, (2, 3)), (28, 5, 2, 1, (1, 2)), (28, 3, 1, 1, (1, 1)), (5, 4, 1, 2, (3, 3)),
     (7, 1, 3, 1, (0, 0)), (4, 7, 1, 1, (3, 3))],
)  # fmt: skip
def test_same_padding_is_tensorflows(size, kernel, stride, dilation, expected):
    before, after = resolve_padding("same", size, kernel, stride, dilation)
    assert (before, after) == expected
    assert conv_output_size(size, kernel, stride, dilation, before + after) == math.ceil(size / stride)


def test_resolve_padding_rejects_unknown_modes():
    assert resolve_padding("valid", 9, 3, 1, 1) == (0, 0)
    assert resolve_padding("causal", 9, 3, 1, 2) == (4, 0)
    with pytest.raises(ValueError, match="'valid', 'same' or 'causal'"):
        resolve_padding("full", 9, 3, 1, 1)


def _random_layer(rng, kind, size, channels, filters, kernel, strides, dilation, mode):
    """An AffineLayer built directly (no framework), with random weights."""
    if kind == "dense":
        return AffineLayer("dense", rng.normal(size=(size[0], filters)), rng.normal(size=filters),
                           (), (), (), size, (filters,))  # fmt: skip
    padding = tuple(
        resolve_padding(mode, n, k, s, d) for n, k, s, d in zip(size, kernel, strides, dilation, strict=True)
    )
    out = tuple(
        conv_output_size(n, k, s, d, sum(p))
        for n, k, s, d, p in zip(size, kernel, strides, dilation, padding, strict=True)
    )
    return AffineLayer(kind, rng.normal(size=(*kernel, channels, filters)), rng.normal(size=filters), strides,
                       dilation, padding, (*size, channels), (*out, filters))  # fmt: skip


def _naive_contributions(layer, x):
    """{(neuron, spatial index): Σ_c kernel·x} by explicit loops over positions and taps."""
    rank = len(layer.spatial_shape) if layer.kind != "dense" else 0
    grid = x.reshape(-1, layer.channels)
    result = {}
    if rank == 0:
        for f in range(layer.filters):
            for j in range(grid.shape[0]):
                result[f, j] = grid[j, 0] * layer.kernel[j, f]
        return result
    out = layer.output_shape[:-1]
    for position in itertools.product(*map(range, out)):
        for tap in itertools.product(*map(range, layer.kernel.shape[:rank])):
            axes = zip(position, layer.strides, layer.padding, tap, layer.dilation, strict=True)
            coord = [p * s - pad[0] + t * d for p, s, pad, t, d in axes]
            if not all(0 <= c < n for c, n in zip(coord, layer.spatial_shape, strict=True)):
                continue
            j = int(np.ravel_multi_index(coord, layer.spatial_shape))
            p = int(np.ravel_multi_index(position, out))
            for f in range(layer.filters):
                result[p * layer.filters + f, j] = grid[j] @ layer.kernel[tap][:, f]
    return result


TAP_CASES = [
    ("dense", (11,), 1, 3, None, None, None, None),
    ("conv1d", (9,), 2, 3, (3,), (2,), (1,), "same"),
    ("conv1d", (9,), 3, 2, (2,), (1,), (3,), "causal"),
    ("conv2d", (6, 7), 2, 3, (3, 2), (2, 1), (1, 1), "same"),
    ("conv2d", (8, 5), 3, 2, (2, 2), (1, 1), (2, 2), "valid"),
    ("conv2d", (5, 5), 1, 4, (5, 5), (3, 3), (1, 1), "same"),
]


@pytest.mark.parametrize("case", TAP_CASES, ids=lambda c: f"{c[0]}-{c[1]}-{c[-1]}")
def test_tap_contributions_match_brute_force_and_sum_to_preactivation(case):
    rng = np.random.default_rng(3)
    layer = _random_layer(rng, *case)
    x = rng.normal(size=layer.input_shape)
    naive = _naive_contributions(layer, x)
    neurons = rng.permutation(layer.num_neurons)[: max(1, layer.num_neurons // 2)]
    rows, spatial, values = layer.tap_contributions(x, neurons)
    got = {(int(neurons[r]), int(j)): v for r, j, v in zip(rows, spatial, values, strict=True)}
    assert len(got) == len(rows)  # no (row, spatial index) pair repeats
    assert got.keys() == {key for key in naive if key[0] in set(neurons.tolist())}
    for key, value in got.items():
        assert value == pytest.approx(naive[key], rel=1e-12, abs=1e-12)
    sums = np.bincount(rows, weights=values, minlength=len(neurons)) + layer.bias[neurons % layer.filters]
    o = layer.preactivation(x).reshape(-1)[neurons]
    np.testing.assert_allclose(sums, o, rtol=1e-13, atol=1e-13 * np.abs(o).max())


@settings(max_examples=40, deadline=None)
@given(layer_configs(), st.integers(0, 2**32 - 1))
def test_tap_contributions_sum_to_preactivation_random_layers(config, seed):
    rng = np.random.default_rng(seed)
    kind, shape, filters, kernel, strides, dilation, padding = config
    size, channels = (shape, 1) if kind == "dense" else (shape[:-1], shape[-1])
    layer = _random_layer(rng, kind, size, channels, filters, kernel, strides, dilation, padding)
    x = rng.normal(size=layer.input_shape)
    neurons = np.arange(layer.num_neurons)
    rows, spatial, values = layer.tap_contributions(x, neurons)
    # (no valid tap at all happens: a dilated kernel on a 1-pixel 'same' input reads only padding)
    assert np.all((spatial >= 0) & (spatial < math.prod(layer.spatial_shape)))
    sums = np.bincount(rows, weights=values, minlength=len(neurons)) + layer.bias[neurons % layer.filters]
    o = layer.preactivation(x).reshape(-1)
    np.testing.assert_allclose(sums, o, rtol=1e-12, atol=1e-12 * max(1.0, np.abs(o).max()))


def test_receptive_field_is_read_only_and_cached():
    layer = _random_layer(np.random.default_rng(0), "conv2d", (6, 6), 2, 3, (3, 3), (2, 2), (1, 1), "same")
    field = layer.receptive_field_taps()
    assert field is layer.receptive_field_taps()
    assert field.index.shape == field.valid.shape == (9, 9) and field.kernel.shape == (9, 2, 3)
    # TensorFlow pads (0, 1) here: the first window fits, the last one overhangs by a row and column
    assert field.valid[0].all() and field.valid[4].all() and field.valid[-1].sum() == 4
    with pytest.raises(ValueError):
        field.index[0, 0] = 1
    with pytest.raises(ValueError):
        layer.kernel[0, 0, 0, 0] = 1.0


def test_affine_layer_validates_its_fields():
    kernel, bias = np.ones((3, 3, 2, 4)), np.zeros(4)
    with pytest.raises(ValueError, match="bias must have shape"):
        AffineLayer("conv2d", kernel, np.zeros(3), (1, 1), (1, 1), ((0, 0),) * 2, (5, 5, 2), (3, 3, 4))
    with pytest.raises(ValueError, match="output_shape"):
        AffineLayer("conv2d", kernel, bias, (1, 1), (1, 1), ((0, 0),) * 2, (5, 5, 2), (5, 5, 4))
    with pytest.raises(ValueError, match="does not fit"):
        AffineLayer("conv2d", kernel, bias, (1, 1), (1, 1), ((0, 0),) * 2, (5, 5, 3), (3, 3, 4))
    with pytest.raises(ValueError, match="kind"):
        AffineLayer("conv3d", kernel, bias, (1, 1), (1, 1), ((0, 0),) * 2, (5, 5, 2), (3, 3, 4))
    with pytest.raises(ValueError, match="non-negative"):
        AffineLayer("conv2d", kernel, bias, (1, 1), (1, 1), ((-1, 1), (0, 0)), (5, 5, 2), (3, 3, 4))
    with pytest.raises(ValueError, match="strides and dilations must be positive"):
        AffineLayer("conv2d", kernel, bias, (0, 1), (1, 1), ((0, 0),) * 2, (5, 5, 2), (3, 3, 4))
    with pytest.raises(ValueError, match="needs 2 strides"):
        AffineLayer("conv2d", kernel, bias, (1,), (1, 1), ((0, 0),) * 2, (5, 5, 2), (3, 3, 4))


def test_preactivation_and_taps_reject_bad_arguments():
    layer = _random_layer(np.random.default_rng(0), "conv1d", (8,), 2, 3, (3,), (1,), (1,), "valid")
    with pytest.raises(ValueError, match=r"shape \(8, 2\), got \(8, 3\)"):
        layer.preactivation(np.zeros((8, 3)))
    with pytest.raises(ValueError, match=r"\[0, 18\)"):
        layer.tap_contributions(np.zeros((8, 2)), np.array([18]))
    with pytest.raises(ValueError, match="1-D integer"):
        layer.tap_contributions(np.zeros((8, 2)), np.array([0.5]))
