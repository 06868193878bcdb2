"""KerasAdapter on real Keras 3 models: the split into pre-processing, first affine layer,
ReLU and head; forward passes; gradients; clear errors; mlp_layers; load_model."""

import warnings

import numpy as np
import pytest

from smug_opt.data import load_digits, load_reviews
from smug_opt.models import KerasAdapter, load_model, mlp_layers, zoo
from smug_opt.models._keras import import_keras

keras = import_keras()
layers = keras.layers


def _seeded(model):
    """Give every weight (biases included) reproducible non-zero values."""
    rng = np.random.default_rng(7)
    for variable in model.weights:
        variable.assign(rng.normal(scale=0.5, size=variable.shape).astype(variable.dtype))
    return model


def _rescaled_mlp():
    return _seeded(keras.Sequential([
        keras.Input((4, 5, 1)), layers.Rescaling(1 / 255.0, offset=-0.5), layers.Flatten(),
        layers.Dense(6, activation="relu"), layers.Dense(3, activation="softmax"),
    ]))  # fmt: skip


def test_rescaling_and_flatten_are_applied_exactly_in_float64():
    adapter = KerasAdapter(_rescaled_mlp())
    x = np.random.default_rng(0).integers(0, 256, size=(4, 5, 1)).astype(np.float32)
    xa = adapter.affine_input(x)
    assert xa.dtype == np.float64 and xa.shape == (20,) == adapter.affine.input_shape
    np.testing.assert_array_equal(xa, x.reshape(-1).astype(np.float64) / 255.0 - 0.5)
    assert adapter.input_shape == (4, 5, 1) and adapter.spatial_shape == (20,)
    assert (adapter.output_kind, adapter.num_outputs) == ("softmax", 3)
    np.testing.assert_allclose(
        adapter.predict_from_affine_input(xa[None]), adapter.predict(x[None]), rtol=1e-6
    )


def test_functional_chain_with_reshape_conv1d_and_separate_relu():
    inputs = keras.Input((12,))
    value = layers.Reshape((6, 2))(inputs)
    value = layers.Conv1D(4, 3, padding="same")(value)
    value = layers.Activation("relu")(value)
    value = layers.GlobalMaxPooling1D()(value)
    model = _seeded(keras.Model(inputs, layers.Dense(1, activation="sigmoid")(value)))
    adapter = KerasAdapter(model)
    assert adapter.affine.kind == "conv1d" and adapter.affine.input_shape == (6, 2)
    assert adapter.spatial_shape == (6,) and adapter.output_kind == "sigmoid"
    x = np.random.default_rng(1).normal(size=(5, 12)).astype(np.float32)
    xa = np.stack([adapter.affine_input(row) for row in x])
    np.testing.assert_array_equal(xa, x.reshape(5, 6, 2))
    np.testing.assert_allclose(adapter.predict_from_affine_input(xa), adapter.predict(x), rtol=1e-6)
    o, h = adapter.first_layer(x[0])
    np.testing.assert_array_equal(h, np.maximum(o, 0))
    np.testing.assert_allclose(adapter.head(h[None]), adapter.predict(x[:1]), rtol=1e-5)


def test_embedding_lookup_gives_the_affine_input():
    vocab = 30
    model = _seeded(keras.Sequential([
        keras.Input((10,), dtype="int32"), layers.Embedding(vocab, 4), layers.Conv1D(5, 3),
        layers.ReLU(), layers.GlobalMaxPooling1D(), layers.Dense(1, activation="sigmoid"),
    ]))  # fmt: skip
    adapter = KerasAdapter(model)
    ids = np.random.default_rng(2).integers(0, vocab, size=(3, 10))
    table = model.layers[0].embeddings.numpy().astype(np.float64)
    np.testing.assert_array_equal(adapter.affine_input(ids[0]), table[ids[0]])
    assert adapter.spatial_shape == (10,) and adapter.affine.channels == 4
    xa = np.stack([adapter.affine_input(row) for row in ids])
    np.testing.assert_allclose(adapter.predict_from_affine_input(xa), adapter.predict(ids), rtol=1e-6)
    with pytest.raises(ValueError, match=r"integer token ids in \[0, 30\)"):
        adapter.affine_input(np.full(10, vocab))


@pytest.mark.parametrize("name", ["mnist-mlp", "mnist-cnn", "text-cnn"])
def test_zoo_models_predict_the_same_from_the_affine_input(name):
    adapter = KerasAdapter(zoo.load(name, progress=False))
    if name == "text-cnn":
        x = load_reviews().x_test[:16]
    else:
        x = load_digits().x_test[:16]
        x = x.reshape(16, -1) if name == "mnist-mlp" else x
    xa = np.stack([adapter.affine_input(row) for row in x])
    np.testing.assert_allclose(
        adapter.predict_from_affine_input(xa), adapter.predict(x), rtol=1e-6, atol=1e-7
    )
    h = np.stack([adapter.first_layer(row)[1] for row in x])
    np.testing.assert_allclose(adapter.head(h), adapter.predict(x), rtol=1e-4, atol=1e-6)


def test_predict_works_in_chunks_and_on_empty_batches():
    adapter = KerasAdapter(_rescaled_mlp(), batch_size=3)
    x = np.random.default_rng(3).uniform(0, 255, size=(10, 4, 5, 1))
    np.testing.assert_allclose(adapter.predict(x), KerasAdapter(_rescaled_mlp()).predict(x), rtol=1e-6)
    assert adapter.predict(np.zeros((0, 4, 5, 1))).shape == (0, 3)


def _float64_model(last_activation, outputs):
    return _seeded(keras.Sequential([
        keras.Input((3, 4, 2), dtype="float64"),
        layers.Conv2D(3, 2, activation="relu", dtype="float64"),
        layers.Flatten(dtype="float64"),
        layers.Dense(5, activation="tanh", dtype="float64"),
        layers.Dense(outputs, activation=last_activation, dtype="float64"),
    ]))  # fmt: skip


@pytest.mark.parametrize(("activation", "outputs", "target"), [("softmax", 4, 2), ("sigmoid", 1, 0),
                                                               ("sigmoid", 1, 1), (None, 3, 1)])  # fmt: skip
def test_head_gradient_matches_finite_differences(activation, outputs, target):
    adapter = KerasAdapter(_float64_model(activation, outputs))
    h = np.random.default_rng(4).uniform(0, 1, size=(2, *adapter.affine.output_shape))
    scores, grads = adapter.head_gradient(h, target)
    np.testing.assert_allclose(scores, adapter.target_score(adapter.head(h), target), rtol=1e-12)
    eps = 1e-6
    for index in [(0, 0, 0, 0), (1, 1, 2, 1), (1, 0, 1, 2)]:
        step = np.zeros_like(h)
        step[index] = eps
        up, down = (adapter.target_score(adapter.head(h + s), target) for s in (step, -step))
        assert grads[index] == pytest.approx((up - down)[index[0]] / (2 * eps), rel=1e-5, abs=1e-9)


def test_target_scores_per_output_kind():
    sigmoid = KerasAdapter(_float64_model("sigmoid", 1))
    outputs = np.array([[0.8], [0.3]])
    np.testing.assert_allclose(sigmoid.target_score(outputs, 1), [0.8, 0.3])
    np.testing.assert_allclose(sigmoid.target_score(outputs, 0), [0.2, 0.7])
    assert [sigmoid.predicted_target(row) for row in outputs] == [1, 0]
    softmax = KerasAdapter(_float64_model("softmax", 4))
    np.testing.assert_allclose(softmax.target_score(np.array([[0.1, 0.2, 0.3, 0.4]]), 2), [0.3])
    linear = KerasAdapter(_float64_model(None, 3))
    assert linear.output_kind == "linear" and linear.predicted_target(np.array([-1.0, 5.0, 2.0])) == 1
    with pytest.raises(ValueError, match=r"target must lie in \[0, 2\)"):
        sigmoid.score_weights(2)
    with pytest.raises(ValueError, match=r"target must lie in \[0, 4\)"):
        softmax.score_weights(-1)
    with pytest.raises(ValueError, match="target must be an int"):
        softmax.score_weights(1.0)


# -- errors -----------------------------------------------------------------------------------


def _sequential(*stack, input_shape=(6, 6, 1)):
    return keras.Sequential([keras.Input(input_shape), *stack])


class LookAlikeDense(layers.Dense):
    """A Dense subclass: it could compute anything, so it is not taken for a Dense layer."""


@pytest.mark.parametrize(
    ("model", "message"),
    [
        (lambda: _sequential(layers.Conv2D(2, 3, activation="softmax"), layers.Flatten(), layers.Dense(2)),
         r"has activation 'softmax'; SMUG needs an element-wise activation that is non-decreasing"),
        (lambda: _sequential(layers.Conv2D(2, 3), layers.ReLU(threshold=0.5), layers.Flatten(),
                             layers.Dense(2)), r"threshold 0.5; only threshold=0"),
        (lambda: _sequential(layers.Conv2D(2, 3), layers.BatchNormalization(axis=1), layers.ReLU(),
                             layers.Flatten(), layers.Dense(2)), r"normalises axis 1; only the channel axis"),
        (lambda: _sequential(layers.ZeroPadding2D(1), layers.Rescaling(2.0),
                             layers.Conv2D(2, 3, activation="relu"), layers.Flatten(), layers.Dense(2)),
         r"unsupported layer after a ZeroPadding layer"),
        (lambda: _sequential(layers.MaxPooling2D(), layers.Conv2D(2, 3, activation="relu"), layers.Flatten(),
                             layers.Dense(2)), r"unsupported layer before .*MaxPooling2D"),
        (lambda: _sequential(layers.Flatten(), layers.Activation("relu")),
         r"unsupported layer before .*Activation 'activation.*' at position 1"),
        (lambda: _sequential(layers.Flatten(), layers.Reshape((6, 6))), r"no Dense, Conv1D or Conv2D"),
        (lambda: _sequential(layers.Flatten(), LookAlikeDense(4, activation="relu"), layers.Dense(2)),
         r"unsupported layer before the first affine layer: .*LookAlikeDense"),
        (lambda: _sequential(layers.Dense(4, activation="relu"), layers.Flatten(), layers.Dense(2)),
         r"first affine layer .*needs a flat input \(add a Flatten layer\)"),
        (lambda: _sequential(layers.Flatten(), layers.Dense(4, activation="relu")), r"no layers after"),
        (lambda: _sequential(layers.Conv2D(2, 3, activation="relu", data_format="channels_first"),
                             layers.Flatten(), layers.Dense(2), input_shape=(1, 6, 6)),
         r"data_format='channels_last'"),
        (lambda: _sequential(layers.Conv2D(2, 3, activation="relu"), layers.Dense(2)),
         r"vector of class scores per example"),
    ],
    ids=["softmax-stem", "relu-threshold", "bn-wrong-axis", "padding-then-rescaling", "pooling-first",
         "activation-first",
         "no-affine", "dense-subclass",
         "dense-on-image", "no-head", "channels-first", "image-output"],
)  # fmt: skip
def test_unsupported_models_get_clear_errors(model, message):
    with pytest.raises(ValueError, match=message):
        KerasAdapter(model())


def test_a_skip_connection_around_the_first_layer_is_rejected():
    inputs = keras.Input((8,))
    hidden = layers.Dense(8, activation="relu")(inputs)
    output = layers.Dense(2)(layers.Add()([hidden, inputs]))
    with pytest.raises(ValueError, match=r"the model's input feeds 2 layers \(Dense .*, Add .*\)"):
        KerasAdapter(keras.Model(inputs, output))


def test_a_branch_before_the_first_layer_is_rejected():
    inputs = keras.Input((8,))
    scaled = layers.Rescaling(0.5)(inputs)
    merged = layers.Add()([layers.Dense(4, activation="relu")(scaled), layers.Dense(4)(scaled)])
    with pytest.raises(ValueError, match=r"Rescaling 'rescaling.*' feeds 2 layers"):
        KerasAdapter(keras.Model(inputs, layers.Dense(2)(merged)))


def test_subclassed_and_unbuilt_models_are_rejected():
    class Custom(keras.Model):
        def __init__(self):
            super().__init__()
            self.dense = layers.Dense(2)

        def call(self, x):
            return self.dense(x)

    custom = Custom()
    custom(np.zeros((1, 3)))
    with pytest.raises(ValueError, match="subclassed model"):
        KerasAdapter(custom)
    with pytest.raises(ValueError, match="no known input shape"):
        KerasAdapter(keras.Sequential([layers.Dense(3, activation="relu"), layers.Dense(2)]))
    with pytest.raises(TypeError, match="must be a keras.Model"):
        KerasAdapter("model.keras")


@pytest.mark.parametrize(
    ("x", "message"),
    [(np.zeros((4, 5)), r"x must have shape \(4, 5, 1\), got \(4, 5\)"),
     (np.zeros((1, 4, 5, 1)), r"x must have shape \(4, 5, 1\), got \(1, 4, 5, 1\)"),
     (np.full((4, 5, 1), np.nan), "x must be finite, got nan at index"),
     (np.full((4, 5, 1), np.inf), "x must be finite, got inf"),
     (np.full((4, 5, 1), "a"), "x must be numeric")],
)  # fmt: skip
def test_bad_inputs_get_clear_errors(x, message):
    adapter = KerasAdapter(_rescaled_mlp())
    with pytest.raises(ValueError, match=message):
        adapter.first_layer(x)
    with pytest.raises(
        ValueError, match=message.replace(r"shape \(4", r"shape \(batch, 4").replace(r"got \(", r"got \(1, ")
    ):
        adapter.predict(x[None])


def test_bad_activation_batches_get_clear_errors():
    adapter = KerasAdapter(_rescaled_mlp())
    with pytest.raises(ValueError, match=r"h_batch must have shape \(batch, 6\), got \(6,\)"):
        adapter.head(np.zeros(6))
    with pytest.raises(ValueError, match="h_batch must be finite"):
        adapter.head_gradient(np.full((1, 6), np.nan), 0)
    with pytest.raises(ValueError, match=r"xa_batch must have shape \(batch, 20\)"):
        adapter.predict_from_affine_input(np.zeros((1, 4, 5, 1)))


# -- mlp_layers ---------------------------------------------------------------------------------


def test_mlp_layers_reproduce_the_model_in_numpy():
    model = _seeded(keras.Sequential([
        keras.Input((4, 3)), layers.Flatten(), layers.Dense(7), layers.ReLU(),
        layers.Dense(5, activation="relu"), layers.Dense(3), layers.Softmax(),
    ]))  # fmt: skip
    stack = mlp_layers(model)
    assert [layer.activation for layer in stack] == ["relu", "relu", "softmax"]
    assert [layer.W.shape for layer in stack] == [(12, 7), (7, 5), (5, 3)]
    assert all(layer.W.dtype == layer.b.dtype == np.float64 for layer in stack)
    x = np.random.default_rng(5).normal(size=(4, 3))
    value = KerasAdapter(model).affine_input(x)
    for layer in stack[:-1]:
        value = np.maximum(value @ layer.W + layer.b, 0)
    logits = value @ stack[-1].W + stack[-1].b
    probabilities = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
    np.testing.assert_allclose(probabilities, KerasAdapter(model).predict(x[None])[0], rtol=1e-5)


def test_mlp_layers_of_the_zoo_mlp():
    stack = mlp_layers(zoo.load("mnist-mlp", progress=False))
    assert [(layer.W.shape, layer.activation) for layer in stack] == [
        ((784, 32), "relu"),
        ((32, 10), "softmax"),
    ]


@pytest.mark.parametrize(
    ("stack", "message"),
    [((layers.Conv2D(2, 3), layers.Flatten(), layers.Dense(2)), r"stack of Dense layers .*Conv2D"),
     ((layers.Flatten(), layers.Dense(4, activation="tanh"), layers.Dense(2)), r"activation 'tanh'"),
     ((layers.Flatten(), layers.Dense(4, activation="relu"), layers.ReLU(), layers.Dense(2)),
      r"found ReLU"),
     ((layers.Flatten(), layers.Dense(4), layers.Dropout(0.5), layers.Dense(2)), r"found Dropout")],
    ids=["conv", "tanh", "double-activation", "dropout"],
)  # fmt: skip
def test_mlp_layers_rejects_other_models(stack, message):
    with pytest.raises(ValueError, match=message):
        mlp_layers(_sequential(*stack))


# -- load_model ---------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".keras", ".h5"])
def test_load_model_round_trip(tmp_path, suffix):
    model = _rescaled_mlp()
    path = tmp_path / f"model{suffix}"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Keras calls .h5 legacy
        model.save(path)
    loaded = load_model(str(path))
    x = np.random.default_rng(6).uniform(0, 255, size=(2, 4, 5, 1))
    np.testing.assert_array_equal(KerasAdapter(loaded).predict(x), KerasAdapter(model).predict(x))


def test_load_model_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no model file at"):
        load_model(tmp_path / "missing.keras")
    other = tmp_path / "model.txt"
    other.write_text("x")
    with pytest.raises(ValueError, match=r"must end in .keras or .h5, got 'model.txt'"):
        load_model(other)
    broken = tmp_path / "broken.keras"
    broken.write_bytes(b"not a zip file")
    with pytest.raises(ValueError, match="could not read a Keras model from .*broken.keras"):
        load_model(broken)
