"""Toy third-party smug-opt backends, registered only through this package's entry points.

``toy-bruteforce`` is a complete (if tiny) backend; ``toy-hang``, ``toy-crash``,
``toy-hog`` and ``toy-missing-solver`` misbehave on purpose for the isolation, memory and
registry tests, and the ``toy-broken`` entry point names a module that does not exist.
"""

from __future__ import annotations

import importlib.metadata
import os
import time
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np

from smug_opt import Backend, Capabilities, Problem, RawResult, SolveOptions, Status
from smug_opt.backend import IncumbentCallback

_MAX_BINARIES = 16
_HOLDS = {0: lambda d: d <= 0, 1: lambda d: d >= 0, 2: lambda d: d == 0,  # Sense codes
          3: lambda d: d < 0, 4: lambda d: d > 0}


def _sums(coefs: list[int]) -> list[int]:
    """``sums[mask]`` = sum of ``coefs[k]`` over the bits k set in mask (doubling)."""
    sums = [0]
    for a in coefs:
        sums += [s + a for s in sums]
    return sums


def _integers(values: list[float]) -> list[int]:
    """The floats times the power of two that makes every one of them an exact integer."""
    exact = [Fraction(v) for v in values]
    scale = max(f.denominator for f in exact)
    return [int(f * scale) for f in exact]


class ToyBruteForce(Backend):
    """Every 0/1 assignment of at most 16 binaries, rows decided in exact integers."""

    name: ClassVar[str] = "toy-bruteforce"
    description: ClassVar[str] = "exhaustive search, exact arithmetic, <= 16 binaries (toy)"
    capabilities: ClassVar[Capabilities] = Capabilities(strict_inequalities=True, exact=True)
    known_failures: ClassVar[dict[str, str]] = {
        "check_time_limit": "enumerates every assignment: the hard instance has 50 binaries",
        "check_timeout_with_incumbent": "binaries only: the instance has continuous variables",
        "check_strict_row_binds_continuous": "binaries only: the instances have continuous variables"}

    @classmethod
    def solver_version(cls) -> str:
        return f"toy brute force {importlib.metadata.version('smug-opt-toy-backend')}"

    def lower(self, problem: Problem, options: SolveOptions, level: int) -> Any:
        if not problem.binary.all() or problem.num_vars > _MAX_BINARIES:
            raise ValueError(f"{self.name} takes only binaries, at most {_MAX_BINARIES}; got {problem!r}")
        dense = problem.A.toarray().tolist()
        rows = [_integers([*row, rhs]) for row, rhs in zip(dense, problem.rhs.tolist(), strict=True)]
        return [(_sums(r[:-1]), r[-1], int(s)) for r, s in zip(rows, problem.senses, strict=True)]

    def optimize(self, model: Any, problem: Problem, options: SolveOptions,
                 on_incumbent: IncumbentCallback) -> RawResult:
        costs = _sums(_integers(problem.objective.tolist()))
        feasible = [m for m in range(len(costs))
                    if all(_HOLDS[sense](sums[m] - rhs) for sums, rhs, sense in model)]
        done = f"exhausted in process {os.getpid()}"  # the isolation tests watch the process
        if not feasible:
            return RawResult(Status.INFEASIBLE, solver_status=done)
        best = min(feasible, key=costs.__getitem__)
        x = np.array([(best >> k) & 1 for k in range(problem.num_vars)], dtype=np.float64)
        return RawResult(Status.OPTIMAL, x, float(problem.objective @ x), solver_status=done)


class ToyHang(ToyBruteForce):
    """Sleeps, ignoring its time limit, unless ``extras={"hang": False}``."""

    name: ClassVar[str] = "toy-hang"
    options: ClassVar[dict[str, str]] = {"hang": "sleep past the time limit (default True)"}

    def optimize(self, model: Any, problem: Problem, options: SolveOptions,
                 on_incumbent: IncumbentCallback) -> RawResult:
        if options.extras.get("hang", True):
            time.sleep(1e6)
        return super().optimize(model, problem, options, on_incumbent)


class ToyCrash(ToyBruteForce):
    """Kills its own process (like a segfaulting solver) unless ``extras={"crash": False}``."""

    name: ClassVar[str] = "toy-crash"
    options: ClassVar[dict[str, str]] = {"crash": "kill the worker process (default True)"}

    def optimize(self, model: Any, problem: Problem, options: SolveOptions,
                 on_incumbent: IncumbentCallback) -> RawResult:
        if options.extras.get("crash", True):
            os._exit(1)
        return super().optimize(model, problem, options, on_incumbent)


_KEPT: list[bytearray] = []  # what toy-hog "leaks" across solves


def _touched(mb: int) -> bytearray:
    block = bytearray(mb * 2**20)
    block[::4096] = b"x" * len(block[::4096])  # touch every page: resident, not just reserved
    return block


class ToyHog(ToyBruteForce):
    """Finds the optimum, reports it as an incumbent unless ``extras={"incumbent": False}``,
    then allocates memory without bound, ignoring its time limit; with
    ``extras={"leak_mb": N}`` it instead answers normally but keeps N MB alive afterwards."""

    name: ClassVar[str] = "toy-hog"
    options: ClassVar[dict[str, str]] = {
        "incumbent": "report the optimum as an incumbent before hogging (default True)",
        "leak_mb": "answer normally but keep this many MB alive afterwards"}
    options: ClassVar[dict[str, str]] = {
        "incumbent": "report the optimum as an incumbent (default True)",
        "leak_mb": "MB to keep alive after answering"}

    def optimize(self, model: Any, problem: Problem, options: SolveOptions,
                 on_incumbent: IncumbentCallback) -> RawResult:
        raw = super().optimize(model, problem, options, on_incumbent)
        leak = int(options.extras.get("leak_mb", 0))
        if leak:
            _KEPT.append(_touched(leak))
            return raw
        if raw.x is not None and options.extras.get("incumbent", True):
            on_incumbent(raw.x, float(raw.objective))
        hog = []
        while True:
            hog.append(_touched(32))
            time.sleep(0.01)


class ToyMissingSolver(ToyBruteForce):
    """Needs a solver package that is not installed."""

    name: ClassVar[str] = "toy-missing-solver"
    requires: ClassVar[tuple[str, ...]] = ("smug_opt_toy_solver_not_installed",)
    pip_extra: ClassVar[str] = "toy-solver"
