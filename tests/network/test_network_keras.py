"""The Keras reader against Keras' own predictions on real digits: the embedded models
and a functional model using every layer the reader covers."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tensorflow")

from smug_opt.network.graph import AvgPool, Clip, Conv, LeakyRelu, MaxPool, Pad, Relu, Scale
from smug_opt.network.keras_reader import read_keras
from smug_opt.network.load import load_model
from smug_opt.network.lower import lower


@pytest.fixture(scope="module")
def digits() -> np.ndarray:
    from smug_opt.data import load_digits

    return load_digits().x_test[:32]  # (32, 28, 28, 1) float32 in [0, 1]


def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


@pytest.mark.parametrize("name", ["mnist-mlp", "mnist-cnn", "mnist-resnet"])
def test_embedded_models_match_keras_predict(name, digits):
    from smug_opt.models.zoo import load

    model = load(name, progress=False)
    net = load_model(name)
    assert net.output == "softmax" and net.input_range == (0.0, 1.0) and net.name == name
    x = digits.reshape(len(digits), *net.input_shape)
    expected = model.predict(x, verbose=0)
    np.testing.assert_allclose(_softmax(net.forward(x)), expected, rtol=0, atol=1e-5)
    pre, flat = lower(net)
    np.testing.assert_allclose(flat.forward(pre(x))[-1], net.forward(x), rtol=0, atol=1e-10)
    if name == "mnist-resnet":  # BatchNorm folded into the convolutions before it
        assert Scale not in [type(node.op) for node in net.nodes]


def _every_layer_model(softmax: bool = False):
    from smug_opt.models._keras import import_keras

    keras = import_keras()
    keras.utils.set_random_seed(0)
    layers = keras.layers
    inputs = keras.Input((14, 14, 1))
    x = layers.Rescaling(2.0, offset=-1.0)(inputs)
    norm = layers.Normalization(mean=0.1, variance=0.4)
    x = norm(x)
    x = layers.ZeroPadding2D(((1, 0), (2, 1)))(x)
    x = layers.Conv2D(4, 3, strides=2, padding="same", activation="relu6")(x)
    bn = layers.BatchNormalization()
    y = layers.DepthwiseConv2D(3, padding="same", depth_multiplier=1)(x)
    y = layers.LeakyReLU(negative_slope=0.1)(bn(y))
    x = layers.ReLU(max_value=6.0)(layers.Add()([x, y]))
    x = layers.SeparableConv2D(6, 3, padding="same", dilation_rate=2)(x)
    x = layers.Activation("relu")(x)
    x = layers.AveragePooling2D(2, padding="same")(x)
    x = layers.MaxPooling2D(2, strides=1, padding="same")(x)
    x = layers.Reshape((5, 4, 6))(x)  # (4, 5, 6) read as (5, 4, 6): a reshape that moves values
    x = layers.Dropout(0.5)(layers.Flatten()(x))
    x = layers.Dense(10, activation="leaky_relu")(x)
    outputs = layers.Dense(10, activation="relu")(x)  # a ReLU on the logits, as ERAN's nets
    model = keras.Model(inputs, layers.Softmax()(outputs) if softmax else outputs)
    bn.set_weights([np.linspace(0.5, 1.5, 4), np.linspace(-0.2, 0.2, 4), np.linspace(-0.1, 0.1, 4),
                    np.linspace(0.5, 2.0, 4)])
    return model


def test_every_layer_matches_keras(digits):
    model = _every_layer_model()
    net = read_keras(model)
    ops = [type(node.op) for node in net.nodes]
    for kind in (Scale, Pad, Conv, Clip, LeakyRelu, AvgPool, MaxPool, Relu):
        assert kind in ops
    assert net.output == "logits" and isinstance(net.nodes[-1].op, Relu)
    x = digits[:, 7:21, 7:21, :]
    expected = model(x, training=False).numpy()
    assert expected.max() > 0
    np.testing.assert_allclose(net.forward(x), expected, rtol=0, atol=1e-5 * max(1.0, np.abs(expected).max()))
    with_softmax = read_keras(_every_layer_model(softmax=True))  # a Softmax layer on the output
    assert with_softmax.output == "softmax" and with_softmax.digest == net.digest


def test_unsupported_layer_names_it():
    from smug_opt.models._keras import import_keras

    keras = import_keras()
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, activation="tanh", name="squash"),
                              keras.layers.Dense(2)])
    with pytest.raises(ValueError, match="Keras layer Dense 'squash': activation 'tanh' is not piecewise"):
        read_keras(model)
    model = keras.Sequential([keras.Input((4,)), keras.layers.UnitNormalization(name="unit"),
                              keras.layers.Dense(2)])
    with pytest.raises(ValueError, match="UnitNormalization 'unit' is not read by smug-opt"):
        read_keras(model)


@pytest.mark.parametrize(("axis", "read"), [(-1, True), (1, True), (0, False)])
def test_a_final_softmax_layer_is_read_only_over_the_class_scores(axis, read):
    """Softmax over the batch axis gives 1 at batch size 1 whatever the scores: comparisons of
    the scores say nothing about it."""
    from smug_opt.models._keras import import_keras

    keras = import_keras()
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(3, activation="relu"),
                              keras.layers.Dense(2), keras.layers.Softmax(axis=axis, name="final")])
    if read:
        assert read_keras(model).output == "softmax"
    else:
        with pytest.raises(ValueError, match="Softmax 'final': a Softmax layer over axis 0 .* is not read"):
            read_keras(model)


def test_load_model_reads_a_saved_keras_file(tmp_path, digits):
    model = _every_layer_model()
    path = tmp_path / "every.keras"
    model.save(path)
    net = load_model(str(path), input_range=(0.0, 1.0))
    assert net.name == "every" and net.input_range == (0.0, 1.0)
    assert net.digest == read_keras(model).digest  # the same weights, read from the file
    x = digits[:4, 7:21, 7:21, :]
    np.testing.assert_allclose(net.forward(x), read_keras(model).forward(x), rtol=0, atol=0)
