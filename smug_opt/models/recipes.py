"""The recipes of the embedded models trained here: each model's layers, data, training and
SMUG defaults (:mod:`smug_opt.models.zoo` trains, caches and loads them)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from smug_opt.models.description import IMAGE_EVALUATION_METHODS
from smug_opt.parameters import SmugParameters

__all__ = ["RECIPES", "Recipe", "TrainTest"]


TrainTest = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
"""A model's data: ``(x_train, y_train, x_test, y_test)``."""


@dataclass(frozen=True)
class Recipe:
    """How one zoo model is built and trained."""

    version: str
    description: str
    layers: Callable[[Any], list | Any]
    """The model's layers (made a Sequential model), or a functional model itself."""
    data: Callable[[], TrainTest]
    loss: str
    epochs: int
    smug: SmugParameters
    """SMUG defaults sized for the model's input (the paper's k = 3000 and 4×4 cells are
    sized for 224×224 ImageNet pictures; a digit is 28×28, a review 100 tokens)."""
    learning_rate: float = 1e-3
    batch_size: int = 32
    evaluation_methods: tuple[str, ...] = IMAGE_EVALUATION_METHODS
    class_names: tuple[str, ...] | None = None
    padding_token: int | None = None
    vocabulary: bool = False


def _flat_digits() -> TrainTest:
    x_train, y_train, x_test, y_test = _digits()
    return x_train.reshape(-1, 784), y_train, x_test.reshape(-1, 784), y_test


def _digits() -> TrainTest:
    from smug_opt.data import load_digits

    digits = load_digits()
    return digits.x_train, digits.y_train, digits.x_test, digits.y_test


def _reviews() -> TrainTest:
    from smug_opt.data import load_reviews

    reviews = load_reviews()
    return reviews.x_train, reviews.y_train, reviews.x_test, reviews.y_test


def _mlp(*hidden: int) -> Callable[[Any], list]:
    def layers(keras: Any) -> list:
        dense = keras.layers.Dense
        return [
            keras.Input((784,)),
            *(dense(n, activation="relu") for n in hidden),
            dense(10, activation="softmax"),
        ]

    return layers


def _cnn(keras: Any) -> list:
    conv = keras.layers.Conv2D
    return [
        keras.Input((28, 28, 1)),
        conv(16, 5, strides=2, padding="same", activation="relu"),
        conv(32, 3, padding="same", activation="relu"),
        keras.layers.MaxPooling2D(2),
        keras.layers.Flatten(),
        keras.layers.Dense(64, activation="relu"),
        keras.layers.Dense(10, activation="softmax"),
    ]


def _bn_resnet(keras: Any) -> Any:
    """A functional ResNet-style digit model: Conv→BN→ReLU stem (as ResNet50's), one
    residual block, global average pooling."""
    layers = keras.layers
    inputs = keras.Input((28, 28, 1))
    x = layers.Conv2D(16, 3, strides=2, padding="same", use_bias=False)(inputs)
    stem = layers.ReLU()(layers.BatchNormalization()(x))
    y = layers.Conv2D(16, 3, padding="same", activation="relu")(stem)
    y = layers.BatchNormalization()(layers.Conv2D(16, 3, padding="same")(y))
    x = layers.ReLU()(layers.Add()([stem, y]))
    x = layers.Conv2D(32, 3, strides=2, padding="same", activation="relu")(x)
    x = layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, layers.Dense(10, activation="softmax")(x), name="mnist_resnet")


def _text_cnn(keras: Any) -> list:
    from smug_opt.data import default_vocabulary

    vocab = default_vocabulary()
    return [
        keras.Input((vocab.seq_len,), dtype="int32"),
        keras.layers.Embedding(vocab.size, 32),
        keras.layers.Conv1D(64, 3, activation="relu"),
        keras.layers.GlobalMaxPooling1D(),
        keras.layers.Dense(1, activation="sigmoid"),
    ]


RECIPES = {
    "mnist-mlp": Recipe(
        version="1",
        description="784-32-10 MLP on flat digits in [0, 1] (the paper's full-network model)",
        layers=_mlp(32),
        data=_flat_digits,
        loss="sparse_categorical_crossentropy",
        epochs=10,
        smug=SmugParameters(k=32, cell=2),
    ),
    "mnist-mlp-deep": Recipe(
        version="1",
        description="784-64-64-10 MLP on flat digits in [0, 1]",
        layers=_mlp(64, 64),
        data=_flat_digits,
        loss="sparse_categorical_crossentropy",
        epochs=10,
        smug=SmugParameters(k=64, cell=2),
    ),
    "mnist-cnn": Recipe(
        version="1",
        description="28x28x1 digits: Conv2D(16, 5x5, stride 2, same, relu), "
        "Conv2D(32, 3x3, same, relu), MaxPooling2D(2), Dense(64, relu), Dense(10, softmax)",
        layers=_cnn,
        data=_digits,
        loss="sparse_categorical_crossentropy",
        epochs=8,
        # γ = 0.5: at γ = 0 a positive bias alone keeps many neurons active, and the mask
        # of a digit can be empty (no box for LSC)
        smug=SmugParameters(k=100, gamma=0.5, cell=2),
        evaluation_methods=(*IMAGE_EVALUATION_METHODS, "groundtruth"),
    ),
    "mnist-resnet": Recipe(
        version="1",
        description="28x28x1 digits, functional: Conv2D(16, 3x3, stride 2)→BatchNorm→ReLU stem, "
        "a residual block, Conv2D(32, stride 2), global average pooling, Dense(10, softmax)",
        layers=_bn_resnet,
        data=_digits,
        loss="sparse_categorical_crossentropy",
        epochs=8,
        smug=SmugParameters(k=200, cell=2),
        evaluation_methods=(*IMAGE_EVALUATION_METHODS, "groundtruth"),
    ),
    "text-cnn": Recipe(
        version="1",
        description="100 token ids: Embedding(32), Conv1D(64, 3, relu), global max pool, "
        "Dense(1, sigmoid); trained on the synthetic reviews",
        layers=_text_cnn,
        data=_reviews,
        loss="binary_crossentropy",
        epochs=10,
        smug=SmugParameters(k=25, cell=1),
        evaluation_methods=("smug", "smug_base", "ig", "sis"),
        class_names=("negative", "positive"),
        padding_token=0,  # smug_opt.data.text.PAD_ID (a test checks they agree)
        vocabulary=True,
    ),
}
