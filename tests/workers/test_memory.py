"""Memory budgets: the worker that passes its budget dies (not a bystander), the solve keeps
its verified incumbent, warm workers give memory back or are replaced, z3 leaks nothing."""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from conftest import skip_unless_usable

from smug_opt import Problem, Status, solve
from smug_opt.spawn import default_memory_limit_mb, resident_mb, resolve_memory_limit

# optimum 2 (any two of three cells), which no single row proves by construction, so a killed
# worker's incumbent stays FEASIBLE
PROBLEM = Problem.from_arrays([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0], [1.0, 0.0, 1.0]], ">", [0.5, 0.5, 0.5])


def _process(result) -> str:
    """The worker process that produced the last attempt (the toy backends report it)."""
    return result.attempts[-1].solver_status.rsplit(" ", 1)[-1]


def test_default_budget_follows_the_machine() -> None:
    assert default_memory_limit_mb() >= 1024
    assert resolve_memory_limit(None) == default_memory_limit_mb()
    assert resolve_memory_limit(500) == 500.0
    assert resolve_memory_limit(math.inf) is None
    for bad in (0, -1.0, float("nan"), "1G", True):
        with pytest.raises(ValueError, match="memory_limit_mb must be positive megabytes"):
            resolve_memory_limit(bad)  # type: ignore[arg-type]


def test_over_budget_worker_is_killed_and_its_incumbent_kept(toy_plugin: str) -> None:
    start = time.monotonic()
    result = solve(PROBLEM, "toy-hog", time_limit=60, memory_limit_mb=300)
    assert time.monotonic() - start < 30, "the hog should be killed long before its time limit"
    assert result.status is Status.FEASIBLE and result.objective == 2 and result.killed
    assert "memory limit of 300 MB exceeded" in result.message
    assert result.peak_memory_mb is not None and result.peak_memory_mb >= 300


def test_over_budget_worker_without_incumbent_is_an_error(toy_plugin: str) -> None:
    result = solve(PROBLEM, "toy-hog", time_limit=60, memory_limit_mb=300, extras={"incumbent": False})
    assert result.status is Status.ERROR and result.x is None
    assert "memory limit" in result.message
    after = solve(PROBLEM, "toy-hog", time_limit=60, memory_limit_mb=300, extras={"leak_mb": 1})
    assert after.status is Status.OPTIMAL, "the killed worker was replaced by a working one"


def test_warm_worker_that_keeps_memory_is_recycled(toy_plugin: str) -> None:
    first = solve(PROBLEM, "toy-hog", time_limit=60, memory_limit_mb=2000, extras={"leak_mb": 400})
    second = solve(PROBLEM, "toy-hog", time_limit=60, memory_limit_mb=2000, extras={"leak_mb": 1})
    third = solve(PROBLEM, "toy-hog", time_limit=60, memory_limit_mb=2000, extras={"leak_mb": 1})
    assert first.status is second.status is third.status is Status.OPTIMAL
    assert _process(second) != _process(first), "a worker 400 MB above idle must be replaced"
    assert _process(third) == _process(second), "a worker back near idle stays warm"


def test_z3_over_budget_is_killed() -> None:
    """A real z3 that grows past its budget (the paper's Int/Real encoding of a random
    200x60 strict system reaches ~1 GB in 10 s) is killed at the budget."""
    skip_unless_usable("z3")
    rng = np.random.default_rng(1)
    A = rng.normal(size=(60, 200))
    problem = Problem.from_arrays(A, ">", A @ rng.integers(0, 2, 200) - 0.3)
    result = solve(problem, "z3", time_limit=60, memory_limit_mb=400, extras={"encoding": "paper"})
    assert result.status is Status.ERROR and "memory limit of 400 MB exceeded" in result.message
    assert result.times.total < 40


def _z3_solves_of_huge_and_tiny_coefficients() -> tuple[Callable[[], None], Any]:
    """One z3 solve of a tiny problem with coefficients up to 1e±300 per call, and z3."""
    skip_unless_usable("z3")
    import z3

    from smug_opt.backend import SolveOptions
    from smug_opt.registry import backend_class

    backend = backend_class("z3")()
    rng = np.random.default_rng(0)
    options = SolveOptions(time_limit=5)

    def one() -> None:
        A = rng.normal(size=(3, 8)) * 10.0 ** rng.integers(-300, 300, size=(3, 8))
        p = Problem.from_arrays(A, [">", "<", ">="], rng.normal(size=3))
        backend.optimize(backend.lower(p, options, 0), p, options, lambda x, f: None)

    return one, z3


def test_z3_backend_registers_no_model_callback_that_outlives_its_solve() -> None:
    """z3py keeps every ``set_on_model`` callback (and with it the solve's whole context)
    in a global dict: the backend drops that reference after each solve."""
    one, z3 = _z3_solves_of_huge_and_tiny_coefficients()
    one()
    registered = len(z3.z3._on_models)
    for _ in range(3):
        one()
    assert len(z3.z3._on_models) == registered


@pytest.mark.slow
def test_z3_backend_keeps_no_context_alive_between_solves() -> None:
    """40 solves of tiny problems with huge and tiny coefficients leaked ~700 MB before the
    backend dropped z3py's reference to each solve's context: the resident memory stays."""
    one, z3 = _z3_solves_of_huge_and_tiny_coefficients()
    one()
    gc.collect()
    before, registered = resident_mb(), len(z3.z3._on_models)
    for _ in range(40):
        one()
        gc.collect()  # as the worker does after each solve
    assert len(z3.z3._on_models) == registered
    assert resident_mb() - before < 100


def test_memory_limit_mb_is_the_one_name_from_the_flag_to_the_worker(tmp_path) -> None:
    """``--memory-limit`` becomes ``memory_limit_mb`` once, and explain hands it to the
    solver worker under that name: a 1 MB budget kills the worker at once."""
    torch = pytest.importorskip("torch")
    from smug_opt import explain
    from smug_opt.cli import build_parser, flag_for
    from smug_opt.cli.solve import solver_kwargs
    from smug_opt.errors import ParameterError
    from smug_opt.explain_settings import ExplainSettings

    kwargs = solver_kwargs(build_parser().parse_args(["solve", "p.smug", "--memory-limit", "300"]))
    assert kwargs["memory_limit_mb"] == 300 and "memory_limit" not in kwargs
    with pytest.raises(ParameterError) as bad:
        resolve_memory_limit(-1)
    assert bad.value.named(flag_for(bad.value.parameter)).startswith("--memory-limit must be positive")
    settings = ExplainSettings(memory_limit_mb=1, time_limit=30)
    assert settings.explain_kwargs()["memory_limit_mb"] == 1
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3)).eval()
    model.input_shape = (16,)
    x = np.random.default_rng(0).uniform(0, 1, 16)
    e = explain(model, x, k=2, cell=1, steps=4, **settings.explain_kwargs())
    assert e.result is not None and "memory limit of 1 MB exceeded" in e.result.message, e.result


def test_the_old_memory_limit_keyword_still_works_with_a_deprecation_warning() -> None:
    from smug_opt.explain_settings import ExplainSettings

    with pytest.warns(DeprecationWarning, match="memory_limit_mb"):
        result = solve(PROBLEM, "highs", time_limit=30, memory_limit=1)
    assert "memory limit of 1 MB exceeded" in result.message, result.message
    with pytest.raises(ValueError, match="memory_limit_mb only"):
        solve(PROBLEM, "highs", memory_limit=1, memory_limit_mb=2)
    with pytest.warns(DeprecationWarning, match="memory_limit_mb"):
        settings = ExplainSettings(solver_options={"memory_limit": 300, "threads": 2})
    assert settings.memory_limit_mb == 300 and settings.solver_options == {"threads": 2}
    assert settings.to_dict()["solver_options"] == {"threads": 2, "memory_limit": 300}  # as recorded before
