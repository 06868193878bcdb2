"""Integrated Gradients on first-layer activations: completeness on the real zoo models,
batching (counted head calls), an analytic case, and top-k selection."""

import warnings

import numpy as np
import pytest

from smug_opt.data import load_digits, load_reviews
from smug_opt.models import (
    Attribution,
    CompletenessWarning,
    KerasAdapter,
    integrated_gradients,
    top_k_neurons,
    zoo,
)
from smug_opt.models._keras import import_keras


class CountingAdapter(KerasAdapter):
    """The real adapter, recording every call into the head and its batch size."""

    def __init__(self, model):
        super().__init__(model)
        self.calls = []

    def head(self, h_batch):
        self.calls.append(("head", len(h_batch)))
        return super().head(h_batch)

    def head_gradient(self, h_batch, target, *, batch_size=None):
        self.calls.append(("head_gradient", len(h_batch)))
        return super().head_gradient(h_batch, target, batch_size=batch_size)


@pytest.fixture(scope="module", params=["mnist-mlp", "mnist-cnn"])
def digit_model(request):
    adapter = CountingAdapter(zoo.load(request.param, progress=False))
    x = load_digits().x_test[:8]
    return adapter, x.reshape(8, -1) if request.param == "mnist-mlp" else x


def test_completeness_on_real_digit_models(digit_model):
    adapter, digits = digit_model
    outputs = adapter.predict(digits)
    for x, output in zip(digits, outputs, strict=True):
        with warnings.catch_warnings():
            warnings.simplefilter("error", CompletenessWarning)
            attribution = integrated_gradients(adapter, x)
        assert attribution.values.shape == adapter.affine.output_shape
        assert attribution.target == int(np.argmax(output)) and attribution.steps == 64
        assert attribution.score_h == pytest.approx(output[attribution.target], rel=1e-4)
        total = attribution.values.sum()
        assert attribution.completeness_error == pytest.approx(
            abs(total - (attribution.score_h - attribution.score_0)) / abs(attribution.score_h)
        )
        assert attribution.completeness_error < 0.05
        assert np.all(attribution.values[adapter.first_layer(x)[1] == 0] == 0)  # inactive neurons get 0


def test_completeness_on_the_text_model():
    adapter = KerasAdapter(zoo.load("text-cnn", progress=False))
    reviews = load_reviews()
    for ids, label in zip(reviews.x_test[:4], reviews.y_test[:4], strict=True):
        attribution = integrated_gradients(adapter, ids, target=int(label))
        p = adapter.predict(ids[None])[0, 0]
        assert attribution.score_h == pytest.approx(p if label == 1 else 1 - p, rel=1e-4)
        assert attribution.completeness_error < 0.05


def test_the_head_is_called_in_one_batch(digit_model):
    adapter, digits = digit_model
    adapter.calls.clear()
    integrated_gradients(adapter, digits[0], steps=64)
    assert adapter.calls == [("head", 1), ("head_gradient", 66)]  # predicted target, then all 64 + 2 points
    adapter.calls.clear()
    integrated_gradients(adapter, digits[0], target=3, steps=200)
    assert adapter.calls == [("head_gradient", 202)]


def test_batched_points_give_the_same_attribution(digit_model):
    """IG in batches of 16 (as a 224² model needs) sums the same gradients as one batch."""
    adapter, digits = digit_model
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CompletenessWarning)  # a near-zero target score
        whole = integrated_gradients(adapter, digits[1], target=2)
        adapter.calls.clear()
        seen = []
        batched = integrated_gradients(adapter, digits[1], target=2, batch_size=16,
                                       progress=lambda done, total: seen.append((done, total)))
    assert adapter.calls == [("head_gradient", 16)] * 4 + [("head_gradient", 2)]
    assert seen == [(16, 66), (32, 66), (48, 66), (64, 66), (66, 66)]
    np.testing.assert_allclose(batched.values, whole.values, rtol=1e-5, atol=1e-9)
    assert batched.score_h == pytest.approx(whole.score_h, rel=1e-6)
    assert batched.score_0 == pytest.approx(whole.score_0, rel=1e-6)


def test_more_steps_shrink_the_completeness_error():
    adapter = KerasAdapter(zoo.load("mnist-cnn", progress=False))
    x = load_digits().x_test[1]
    with pytest.warns(CompletenessWarning, match="relative error"):
        coarse = integrated_gradients(adapter, x, steps=1, tolerance=1e-9)
    fine = integrated_gradients(adapter, x, steps=256)
    assert fine.completeness_error < coarse.completeness_error


def test_linear_head_has_the_exact_analytic_attribution():
    keras = import_keras()
    model = keras.Sequential([
        keras.Input((5,), dtype="float64"),
        keras.layers.Dense(6, activation="relu", dtype="float64"),
        keras.layers.Dense(1, dtype="float64"),
    ])  # fmt: skip
    rng = np.random.default_rng(0)
    for variable in model.weights:
        variable.assign(rng.normal(size=variable.shape))
    adapter = KerasAdapter(model)
    x = rng.normal(size=5)
    _, h = adapter.first_layer(x)
    attribution = integrated_gradients(adapter, x, steps=3)
    w = model.layers[1].kernel.numpy()[:, 0]
    np.testing.assert_allclose(attribution.values, h * w, rtol=1e-12, atol=1e-15)
    assert attribution.completeness_error < 1e-12 and attribution.target == 0


def test_integrated_gradients_rejects_bad_arguments(digit_model):
    adapter, digits = digit_model
    with pytest.raises(ValueError, match="steps must be positive"):
        integrated_gradients(adapter, digits[0], steps=0)
    with pytest.raises(ValueError, match=r"target must lie in \[0, 10\)"):
        integrated_gradients(adapter, digits[0], target=10)


def _attribution(values):
    return Attribution(np.asarray(values, dtype=np.float64), 1, 0.9, 0.1, 0.0, 64)


def test_top_k_is_sorted_descending_with_stable_ties():
    attribution = _attribution([[0.1, -2.0, 0.5], [0.5, 0.0, 3.0]])
    np.testing.assert_array_equal(top_k_neurons(attribution, 3), [5, 2, 3])
    np.testing.assert_array_equal(top_k_neurons(attribution, 1), [5])


def test_top_k_with_fewer_positive_attributions_warns_and_returns_them_all():
    with pytest.warns(UserWarning, match="only 2 neurons have a positive attribution, fewer than k = 5"):
        neurons = top_k_neurons(_attribution([0.0, 0.2, -1.0, 0.4]), 5)
    np.testing.assert_array_equal(neurons, [3, 1])


def test_top_k_without_positive_attributions_is_an_error():
    with pytest.raises(ValueError, match="no first-layer neuron has a positive attribution for target 1"):
        top_k_neurons(_attribution([0.0, -0.2, -1.0]), 2)
    with pytest.raises(ValueError, match="k must be positive"):
        top_k_neurons(_attribution([1.0]), 0)
