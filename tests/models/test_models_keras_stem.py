"""The stem of real Keras models: folding (BatchNorm, ZeroPadding, separable and depthwise
kernels), Normalization, every supported activation, functional heads with branches, and
the encoded rows against Keras' own first-layer output on masked inputs."""

import numpy as np
import pytest

from smug_opt.encode.first_layer import encode_first_layer
from smug_opt.explanation import explain
from smug_opt.models import KerasAdapter
from smug_opt.models._keras import import_keras

keras = import_keras()
layers = keras.layers


def _randomise_batch_norms(model, seed=0):
    """Give every BatchNormalization non-trivial inference statistics."""
    rng = np.random.default_rng(seed)
    for layer in model.layers:
        if isinstance(layer, layers.BatchNormalization):
            n = layer.moving_mean.shape[0]
            layer.gamma.assign(rng.uniform(0.5, 2.0, n))
            layer.beta.assign(rng.normal(0, 0.5, n))
            layer.moving_mean.assign(rng.normal(0, 0.5, n))
            layer.moving_variance.assign(rng.uniform(0.2, 3.0, n))
    return model


def bn_resnet(input_shape=(16, 16, 3), classes=5):
    """A ResNet-style functional model: padded Conv→BN→ReLU stem, a residual block, GAP."""
    keras.utils.set_random_seed(0)
    inputs = keras.Input(input_shape)
    x = layers.ZeroPadding2D(1)(inputs)
    x = layers.Conv2D(8, 3, strides=2, use_bias=False)(x)
    x = layers.BatchNormalization()(x)
    stem = layers.ReLU()(x)
    y = layers.Conv2D(8, 3, padding="same", activation="relu")(stem)
    y = layers.Conv2D(8, 3, padding="same")(y)
    x = layers.ReLU()(layers.Add()([stem, y]))
    shortcut = layers.Conv2D(4, 1)(x)
    x = layers.Concatenate()([layers.Conv2D(4, 3, padding="same")(x), shortcut])
    x = layers.GlobalAveragePooling2D()(x)
    return _randomise_batch_norms(keras.Model(inputs, layers.Dense(classes, activation="softmax")(x)))


def _stem_model(*stem, input_shape=(12, 12, 3), head=None):
    keras.utils.set_random_seed(1)
    inputs = keras.Input(input_shape)
    x = inputs
    for layer in stem:
        x = layer(x)
    rest = head or [layers.Flatten(), layers.Dense(4, activation="softmax")]
    branch = x
    for layer in rest:
        branch = layer(branch)
    return _randomise_batch_norms(keras.Model(inputs, branch))


def _normalization(mean, variance):
    layer = layers.Normalization(mean=mean, variance=variance)
    return layer


STEMS = {
    "bn-relu6": lambda: _stem_model(layers.Conv2D(6, 3, strides=2, padding="same", use_bias=False),
                                    layers.BatchNormalization(), layers.ReLU(6.0)),
    "normalization-zeropad-conv": lambda: _stem_model(
        layers.Rescaling(1 / 255.0), _normalization([0.4, 0.5, 0.6], [0.1, 0.2, 0.3]),
        layers.ZeroPadding2D(((1, 2), (0, 1))), layers.Conv2D(5, 3, strides=2, padding="same"),
        layers.BatchNormalization(), layers.Activation("swish")),
    "depthwise-bn-relu": lambda: _stem_model(layers.DepthwiseConv2D(3, depth_multiplier=2, padding="same"),
                                             layers.BatchNormalization(), layers.ReLU()),
    "separable-relu": lambda: _stem_model(layers.SeparableConv2D(5, 3, depth_multiplier=2,
                                                                 activation="relu")),
    "conv-leaky": lambda: _stem_model(layers.Conv2D(4, 3), layers.LeakyReLU(0.1)),
    "conv-elu": lambda: _stem_model(layers.Conv2D(4, 3), layers.ELU(0.5)),
    "conv-gelu-fused": lambda: _stem_model(layers.Conv2D(4, 3, dilation_rate=2, activation="gelu")),
    "conv-tanh": lambda: _stem_model(layers.Conv2D(4, 3, activation="tanh")),
    "conv-linear-layernorm": lambda: _stem_model(
        layers.Conv2D(6, 4, strides=4),
        head=[layers.LayerNormalization(), layers.GlobalAveragePooling2D(), layers.Dense(3)]),
    "conv1d-relu": lambda: _stem_model(layers.ZeroPadding1D(2), layers.Conv1D(4, 3, strides=2),
                                       layers.BatchNormalization(), layers.ReLU(), input_shape=(20, 3)),
    "dense-bn-sigmoid": lambda: _stem_model(layers.Flatten(), layers.Dense(7),
                                            layers.BatchNormalization(), layers.Activation("sigmoid"),
                                            input_shape=(5, 4), head=[layers.Dense(3)]),
    "bn-resnet": bn_resnet,
    "nested-sequential-stem": lambda: _stem_model(  # ConvNeXt's stem is a nested Sequential
        layers.Rescaling(1 / 255.0),
        keras.Sequential([layers.Conv2D(6, 4, strides=4), layers.LayerNormalization()], name="stem"),
        head=[layers.Conv2D(4, 1, activation="gelu"), layers.GlobalAveragePooling2D(), layers.Dense(3)]),
}


def _inputs(adapter, n, seed=2):
    rng = np.random.default_rng(seed)
    scale = 255.0 if adapter.affine.kind == "conv2d" and adapter.input_shape[-1] == 3 else 1.0
    return rng.uniform(0, scale, size=(n, *adapter.input_shape))


@pytest.mark.parametrize("name", list(STEMS))
def test_the_folded_stem_is_the_models_own(name):
    """Folded float64 pre-activations equal Keras' (BatchNorm included), σ matches the
    Keras activation, and the head on h gives the model's outputs."""
    model = STEMS[name]()
    adapter = KerasAdapter(model)
    xs = _inputs(adapter, 3)
    xa = np.stack([adapter.affine_input(x) for x in xs])
    keras_o = adapter.stem_preactivation(xa)
    ours = np.stack([adapter.affine.preactivation(a) for a in xa])
    scale = np.abs(keras_o).max()
    np.testing.assert_allclose(ours, keras_o, rtol=1e-4, atol=1e-4 * scale)
    h = np.stack([adapter.first_layer(x)[1] for x in xs])
    np.testing.assert_allclose(adapter.head(h), adapter.predict(xs), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(adapter.predict_from_affine_input(xa), adapter.predict(xs), rtol=1e-4,
                               atol=1e-5)


@pytest.mark.parametrize("name", ["bn-resnet", "normalization-zeropad-conv", "depthwise-bn-relu",
                                  "separable-relu", "conv1d-relu"])
def test_encoded_rows_are_the_keras_preactivations_of_masked_inputs(name):
    """Row t's activity on a random cell mask equals Keras' pre-activation (after the
    folded BatchNorm) of the masked affine input, at neuron t."""
    adapter = KerasAdapter(STEMS[name]())
    x = _inputs(adapter, 1)[0]
    xa = adapter.affine_input(x)
    rng = np.random.default_rng(3)
    neurons = rng.choice(adapter.affine.num_neurons, size=min(40, adapter.affine.num_neurons), replace=False)
    encoding = encode_first_layer(adapter.affine, xa, neurons, gamma=0.0, grid=adapter.mask_grid(2))
    problem = encoding.problem
    for _ in range(4):
        m = (rng.random(encoding.grid.num_cells) < 0.6).astype(float)
        keep = m[encoding.grid.cell_of]
        masked = (xa.reshape(keep.size, -1) * keep[:, None]).reshape(xa.shape)
        keras_o = adapter.stem_preactivation(masked[None])[0].reshape(-1)[neurons]
        activity = problem.A @ m - problem.rhs  # rhs = γ·o − b with γ = 0
        np.testing.assert_allclose(activity, keras_o, rtol=1e-4, atol=1e-4 * np.abs(keras_o).max())


def test_explain_end_to_end_on_a_bn_resnet():
    """SMUG on a functional model with a BN stem and branches: a verified optimum whose
    mask keeps every selected neuron active in Keras' own first layer."""
    model = bn_resnet()
    adapter = KerasAdapter(model)
    x = _inputs(adapter, 1, seed=5)[0] / 255.0
    e = explain(model, x, k=60, cell=2, backend="highs", time_limit=30)
    assert e.ok and e.result.verified and e.result.status.name == "OPTIMAL"
    assert e.mask.shape == (16, 16) and e.grid.shape == (8, 8)
    masked = adapter.affine_input(x) * e.mask[..., None]
    keras_o = adapter.stem_preactivation(masked[None])[0].reshape(-1)[e.neurons]
    assert np.all(keras_o > -1e-5)
    assert int(np.sum(keras_o > 0)) >= e.neurons.size - 1  # float32 vs exact: at most a tie flips


def test_ig_batches_come_from_the_head_footprint():
    small = KerasAdapter(bn_resnet())
    assert small.gradient_batch == 512  # a tiny head: all 66 points at once
    big = KerasAdapter(bn_resnet(input_shape=(224, 224, 3)))
    assert 1 <= big.gradient_batch < 512
    assert KerasAdapter(bn_resnet(), gradient_batch=7).gradient_batch == 7


# -- the adapter owns the mask grid -------------------------------------------------------------


def _mlp(first):
    keras.utils.set_random_seed(0)
    return keras.Sequential([*first, layers.Dense(16, activation="relu"),
                             layers.Dense(10, activation="softmax")])


def test_an_mlp_reading_a_picture_gets_an_image_grid():
    flat_input = KerasAdapter(_mlp([keras.Input((784,))]))
    assert flat_input.mask_grid(4, (28, 28)).shape == (7, 7)
    assert flat_input.mask_grid(4, (28, 28, 1)).spatial_shape == (28, 28)
    assert flat_input.mask_grid(4, (784,)).shape == (196,)  # flat data stays flat
    flatten = KerasAdapter(_mlp([keras.Input((28, 28, 1)), layers.Flatten()]))
    assert flatten.mask_grid(4).shape == (7, 7)
    rgb = KerasAdapter(_mlp([keras.Input((8, 8, 3)), layers.Flatten()]))
    grid = rgb.mask_grid(2)
    assert grid.shape == (4, 4) and grid.spatial_shape == (8, 8, 3)
    assert grid.cell_of[0] == grid.cell_of[1] == grid.cell_of[2]  # a pixel's channels share a cell
    embedded = [keras.Input((10,), dtype="int32"), layers.Embedding(20, 4), layers.Flatten()]
    tokens = KerasAdapter(_mlp(embedded)).mask_grid(1)
    assert tokens.shape == (10,) and tokens.spatial_shape == (10, 4)  # a token's 4 values share a cell


def test_explain_draws_an_mlp_mask_on_the_picture():
    model = _mlp([keras.Input((784,))])
    picture = np.random.default_rng(0).uniform(0, 1, size=(28, 28))
    e = explain(model, picture, k=8, cell=4, backend="highs", time_limit=30)
    assert e.ok and e.mask.shape == (28, 28) and e.grid.shape == (7, 7)


@pytest.mark.slow
def test_the_trained_bn_resnet_digit_model_end_to_end():
    """The zoo's trained functional model (BN stem, residual block) on real digits."""
    from smug_opt.data.mnist import load_digits
    from smug_opt.models import zoo

    adapter = KerasAdapter(zoo.load("mnist-resnet", progress=False))
    digits = load_digits()
    for index in range(3):
        e = explain(adapter, digits.x_test[index], k=200, cell=2, backend="highs", time_limit=30)
        assert e.ok and e.result.verified and e.result.status.name == "OPTIMAL"
        masked = adapter.affine_input(digits.x_test[index]) * e.mask.reshape(28, 28, 1)
        keras_o = adapter.stem_preactivation(masked[None])[0].reshape(-1)[e.neurons]
        assert np.mean(keras_o > 0) > 0.99


def test_ig_is_traced_once_per_model_whatever_the_batch():
    from smug_opt.models import integrated_gradients

    adapter = KerasAdapter(bn_resnet())
    x = _inputs(adapter, 1)[0]
    for batch in (None, 5, 16):
        integrated_gradients(adapter, x, target=1, steps=16, batch_size=batch)
    assert adapter._functions.head_gradient.experimental_get_tracing_count() == 1
