"""Benchmark suites: named, deterministic lists of instances, built once and cached as ``.smug`` files.

A :class:`Suite` has a cheap ``specs`` callable (instance names and parameters, no heavy
imports) and a ``builder`` that turns one :class:`InstanceSpec` into a
:class:`~smug_opt.ir.Problem`, importing models, data and encoders only then. Built problems
are cached under ``<cache>/suites/<name>/`` (``<cache>``: :func:`smug_opt.cache.cache_dir`)
with a ``manifest.json`` of their features; a change of the suite's ``version`` rebuilds
them. Any folder of ``.smug`` files is a suite too (:func:`instances_from_dir`).

The built-in suites live in :mod:`smug_opt.bench.builtin_suites` (registered when
:mod:`smug_opt.bench` is imported). :func:`register_suite` adds a suite and
:func:`register_builder` swaps a suite's builder (e.g. a real encoder for ``paper-scale``).
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from smug_opt.cache import cache_dir
from smug_opt.filelock import exclusive_lock
from smug_opt.ir import Problem
from smug_opt.problem_file import load_problem, save_problem

__all__ = [
    "Instance",
    "InstanceSpec",
    "Suite",
    "SuiteBuildError",
    "SuiteUnavailableError",
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
def suite_dir(name: str) -> Path:
    """Where the problems of suite ``name`` are cached."""
    return cache_dir() / "suites" / name


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
