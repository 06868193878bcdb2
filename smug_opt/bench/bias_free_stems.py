"""The ``bias-free-stems`` suite: SMUG's first-layer problem at the paper's scale (224×224×3,
k = 3000, 4×4 cells: 3,136 binaries) on convolution stems without bias or BatchNorm, the
family whose rows at γ = 0 are all homogeneous (``a·M > 0``) and whose solves stay hard.

Two kinds of instance, each reproducible from its name:

- ``conv{K}s{S}-f{F}-{input}-s{seed}``: a seeded random Conv2D ``K×K/S`` with ``F`` filters
  (3×3/2 on a random image; 7×7/2 on it and on every photo: with 4×4 cells a 7×7 window
  reads up to 9 cells, and these are the hard ones),
  He-normal weights, no bias (:func:`~smug_opt.bench.generators.random_first_layer_problem`),
  on a random image in [0, 1] or a real photo (scikit-learn's ``china``/``flower``,
  scikit-image's ``chelsea``/``coffee``) resized to 224×224 and scaled to [-1, 1];
  neurons ranked by pre-activation.
- ``keras-{Arch}-china``: a ``keras.applications`` architecture with ``weights=None``
  (seed 0; zero biases and identity BatchNorm, so its folded stem is bias-free), on
  ``china.jpg`` with the architecture's own preprocessing, neurons ranked by Integrated
  Gradients of its predicted class, as ``benchmarks/keras_applications/run.py`` builds them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from smug_opt.bench.suites import InstanceSpec, Suite, SuiteUnavailableError
from smug_opt.ir import Problem

__all__ = ["KERAS_STEMS", "PHOTOS", "STEMS", "bias_free_stems_suite", "photo"]

STEMS = ((3, 2, 32), (7, 2, 64))
"""(kernel, stride, filters): a MobileNet/EfficientNet-like stem and the ResNet/Inception one."""

PHOTOS = ("china", "flower", "chelsea", "coffee")
KERAS_STEMS = {"ResNet50": "caffe", "DenseNet121": "torch", "MobileNetV2": "tf"}
"""Architectures whose stems the suite takes, with their ``preprocess_input`` mode."""

_K = 3000
_CELL = 4
_SIZE = 224


def photo(name: str) -> np.ndarray:
    """A real photo as 224×224×3 uint8 pixels (bilinear resize), from a wheel installed here."""
    from PIL import Image

    if name in ("china", "flower"):
        import sklearn

        path = Path(sklearn.__file__).parent / "datasets" / "images" / f"{name}.jpg"
        with Image.open(path) as opened:
            img = opened.convert("RGB")
    elif name in ("chelsea", "coffee"):
        try:
            import skimage.data
        except ImportError as exc:
            raise SuiteUnavailableError(f"photo {name!r} needs scikit-image ({exc})") from exc
        img = Image.fromarray(getattr(skimage.data, name)()).convert("RGB")
    else:
        raise ValueError(f"unknown photo {name!r}; choose from {', '.join(PHOTOS)}")
    return np.asarray(img.resize((_SIZE, _SIZE), resample=Image.Resampling.BILINEAR))


def _specs() -> list[InstanceSpec]:
    specs = [InstanceSpec(f"conv{k}s{s}-f{f}-{source}-s0",
                          {"kernel": k, "stride": s, "filters": f, "input": source, "seed": 0,
                           "k": _K, "cell": _CELL, "gamma": 0.0})
             for k, s, f in STEMS for source in ("random", *(PHOTOS if k > 3 else ()))]
    specs += [InstanceSpec(f"keras-{arch}-china", {"arch": arch, "input": "china", "k": _K,
                                                  "cell": _CELL, "gamma": 0.0})
              for arch in KERAS_STEMS]
    return specs


def _build(spec: InstanceSpec) -> Problem:
    p = spec.params
    if "arch" in p:
        return _keras_stem(p["arch"], p["input"], k=p["k"], cell=p["cell"], gamma=p["gamma"])
    from smug_opt.bench.generators import random_first_layer_problem

    image = None if p["input"] == "random" else photo(p["input"]) / 127.5 - 1.0
    return random_first_layer_problem(p["k"], cell=p["cell"], gamma=p["gamma"], seed=p["seed"],
                                      kernel=p["kernel"], stride=p["stride"], filters=p["filters"],
                                      use_bias=False, image=image)


def _keras_stem(arch: str, source: str, *, k: int, cell: int, gamma: float) -> Problem:
    """The problem ``explain`` builds for ``arch`` (``weights=None``, seed 0) on a photo."""
    from smug_opt.encode.first_layer import build_problem
    from smug_opt.inputs import preprocess
    from smug_opt.models._keras import import_keras
    from smug_opt.models.integrated_gradients import integrated_gradients, top_k_neurons
    from smug_opt.models.keras_adapter import KerasAdapter

    keras = import_keras()
    keras.utils.set_random_seed(0)
    model: Any = getattr(keras.applications, arch)(weights=None, input_shape=(_SIZE, _SIZE, 3))
    adapter = KerasAdapter(model)
    x = preprocess(photo(source), KERAS_STEMS[arch])
    grid = adapter.mask_grid(cell, x.shape)
    x = adapter.model_input(x)
    # The first top score's class, as np.argmax gives it: random weights can tie every class
    # (MobileNetV2 under Keras 3.15: all 1,000 at 0.001), and this workload needs a target anyway.
    target = int(np.argmax(adapter.predict(x[None])[0]))
    neurons = top_k_neurons(integrated_gradients(adapter, x, target=target), k)
    return build_problem(adapter.affine, adapter.affine_input(x), neurons, gamma=gamma, grid=grid)


bias_free_stems_suite = Suite(
    "bias-free-stems",
    "224x224x3 conv stems without bias (random 3x3/2 and 7x7/2 on random and real photos; "
    "keras.applications ResNet50/DenseNet121/MobileNetV2 with weights=None), k 3000, cell 4, "
    "gamma 0",
    _specs, _build, requires=("sklearn", "PIL"))
