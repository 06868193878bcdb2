"""The two CBC backends: status mapping, bounds, options reaching CBC, temp files, speed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from conftest import skip_unless_usable

from smug_opt import Problem, SolveOptions, Status, solve
from smug_opt.bridges import to_milp
from smug_opt.solving import DEFAULT_GRACE
from smug_opt.testing.instances import FIRST_LAYER, hard_instance

CBC = ["pulp-cbc", "mip-cbc"]
TINY = Problem.from_arrays([[1.0, 1.0]], ">=", 1.0)


def _cover(seed: int, n: int = 150, m: int = 12) -> Problem:
    """A covering problem CBC finds solutions for at once but cannot close in seconds."""
    rng = np.random.default_rng(seed)
    A = rng.integers(0, 100, size=(m, n)).astype(np.float64)
    return Problem.from_arrays(A, ">=", np.floor(A.sum(axis=1) / 2),
                               objective=rng.integers(50, 100, size=n).astype(np.float64))


@pytest.fixture(params=CBC)
def backend(request: pytest.FixtureRequest) -> str:
    skip_unless_usable(request.param)
    solve(TINY, request.param)  # a warm worker: the limits below are the solver's own
    return request.param


def test_time_limit_with_a_solution_is_feasible_never_optimal(backend: str) -> None:
    start = time.monotonic()
    result = solve(_cover(0), backend, time_limit=1.5)
    wall = time.monotonic() - start
    assert [a.status for a in result.attempts] == [Status.FEASIBLE], result.attempts
    assert result.status is Status.FEASIBLE and not result.killed
    assert result.bound is not None and result.bound <= result.objective
    assert 0 < result.gap < 1
    # CBC stopped itself (not killed) within the documented promise: limit + grace
    assert wall < 1.5 + DEFAULT_GRACE, f"CBC overran the limit: {wall:.2f}s"


def test_time_limit_without_a_solution_is_no_solution(backend: str) -> None:
    result = solve(hard_instance(), backend, time_limit=1.5)
    assert [a.status for a in result.attempts] == [Status.NO_SOLUTION], result.attempts
    assert result.status is Status.NO_SOLUTION and result.x is None and not result.killed


def test_stopped_before_a_bound_claims_none(backend: str) -> None:
    """CBC stopped at once (python-mip reported DBL_MAX as the bound of a problem whose
    optimum is 2): no bound, never one above the optimum."""
    problem = Problem.from_arrays([[1.0, 1.0, 1.0], [1.0, 0.0, 1.0]], ">=", [2.0, 1.0])
    for limit in (0.001, 0.01, 0.05):
        result = solve(problem, backend, time_limit=limit, isolate=False)
        assert result.bound is None or result.bound <= 2, (limit, result)


@pytest.mark.parametrize("label", list(FIRST_LAYER))
def test_small_first_layer_instances_are_solved_at_once(backend: str, label: str) -> None:
    problem, optimum = FIRST_LAYER[label]
    for _ in range(5):
        result = solve(problem, backend, time_limit=10)
        assert result.status is Status.OPTIMAL and result.objective == optimum
        assert result.times.total < 2.0, f"{result.times.total:.2f}s for 4 binaries"


def test_unknown_extra_is_a_clear_error(backend: str) -> None:
    bad = {"pulp-cbc": {"noSuchCbcOption": "1"}, "mip-cbc": {"no_such_setting": 1}}[backend]
    with pytest.raises(ValueError, match=f"does not accept the option.*{next(iter(bad))}.*accepts: .*cuts"):
        solve(TINY, backend, extras=bad)
    good = {"pulp-cbc": {"cuts": "off"}, "mip-cbc": {"cuts": 0}}[backend]
    assert solve(TINY, backend, extras=good).status is Status.OPTIMAL


# ----------------------------------------------------------------------- PuLP
def test_pulp_passes_cbc_the_intended_options(capfd: pytest.CaptureFixture[str]) -> None:
    skip_unless_usable("pulp-cbc")
    for threads, expected in ((1, None), (2, "-threads 2")):
        assert solve(TINY, "pulp-cbc", isolate=False, verbose=True, threads=threads,
                     seed=7).status is Status.OPTIMAL
        line = next(x for x in capfd.readouterr().err.splitlines() if x.startswith("command line"))
        for option in ("-preprocess off", "-integerTolerance 1e-09", "-ratio 0.0", "-allow 0.0",
                       "-timeMode elapsed", "-randomCbcSeed 7"):
            assert option in line, line
        assert (expected in line) if expected else "-threads" not in line, line


def _pulp_raw(sol_status: int, status: int, log: str, values: list[float] | None = None):
    import pulp
    from smug_opt_backends.pulp_backend import _PulpModel, _raw_result

    from smug_opt.bridges.milp import solver_objective

    form = to_milp(TINY, 0)
    variables = [SimpleNamespace(varValue=v) for v in (values or [None, None])]
    model = _PulpModel(SimpleNamespace(sol_status=sol_status, status=status), variables, form,
                       solver_objective(form))
    return _raw_result(pulp, model, log, SolveOptions())


def test_pulp_status_comes_from_cbc_not_from_pulps_summary() -> None:
    pulp = pytest.importorskip("pulp")
    stopped = "Result - Stopped on time limit\n\nObjective value: 2.0\nLower bound: 1.250\n"
    # PuLP's summary says "Optimal" for a time-limited run with a solution
    raw = _pulp_raw(pulp.LpSolutionIntegerFeasible, pulp.LpStatusOptimal, stopped, [1.0, 1.0])
    assert raw.status is Status.FEASIBLE and raw.objective == 2.0
    assert 1.249 - 1e-8 < raw.bound < 1.249  # printed with 3 decimals: lowered by 1e-3
    np.testing.assert_array_equal(raw.x, [1.0, 1.0])
    no_integer = "Result - Stopped on time limit\n\nNo feasible solution found\nLower bound: 0.500\n"
    raw = _pulp_raw(pulp.LpSolutionNoSolutionFound, pulp.LpStatusNotSolved, no_integer, [0.5, 0.5])
    assert raw.status is Status.NO_SOLUTION and raw.x is None  # CBC's LP values are dropped
    raw = _pulp_raw(pulp.LpSolutionNoSolutionFound, pulp.LpStatusInfeasible, "")
    assert raw.status is Status.INFEASIBLE
    raw = _pulp_raw(pulp.LpSolutionOptimal, pulp.LpStatusOptimal,
                    "Result - Optimal solution found\n", [1.0, 0.0])
    assert raw.status is Status.OPTIMAL and raw.bound == raw.objective == 1.0
    raw = _pulp_raw(pulp.LpSolutionNoSolutionFound, pulp.LpStatusNotSolved,
                    "Result - Stopped on iterations\n")
    assert raw.status is Status.ERROR and "Stopped on iterations" in raw.message


def test_pulp_leaves_no_files_behind(tmp_path: Path) -> None:
    skip_unless_usable("pulp-cbc")
    work = tmp_path / "cwd"
    temp = tmp_path / "tmp"
    work.mkdir()
    temp.mkdir()
    code = ("from smug_opt import Problem, solve\n"
            "p = Problem.from_arrays([[1.0, 1.0]], '>', 1.0)\n"
            "print(solve(p, 'pulp-cbc', isolate=False).status.name)\n")
    env = {**os.environ, "TMPDIR": str(temp), "TMP": str(temp)}
    done = subprocess.run([sys.executable, "-W", "ignore", "-c", code], cwd=work, env=env,
                          capture_output=True, text=True, check=True, timeout=120)
    assert done.stdout.strip() == "OPTIMAL"
    assert list(temp.iterdir()) == [] and list(work.iterdir()) == []


# ------------------------------------------------------------------ python-mip
_MIP_SETTINGS = """
import json
from smug_opt import Problem, SolveOptions
from smug_opt_backends.mip_backend import MipCbcBackend
problem = Problem.from_arrays([[0.0, 0.0], [1.0, 1.0], [0.0, 0.0]], [">=", ">", "<="], [-1.0, 1.0, 2.0])
backend = MipCbcBackend()
model = backend.lower(problem, SolveOptions(), 1)
raw = backend.optimize(model, problem, SolveOptions(threads=1, seed=3, relative_gap=0.0), None)
m = model.model
print(json.dumps({"status": raw.status.name, "x": raw.x.tolist(), "rows": m.num_rows,
                  "threads": m.threads, "seed": m.seed, "integer_tol": m.integer_tol,
                  "infeas_tol": m.infeas_tol, "gap": m.max_mip_gap, "gap_abs": m.max_mip_gap_abs}))
"""


def test_mip_settings_and_empty_rows() -> None:
    """In a subprocess: python-mip's CBC must not meet OR-Tools in this one."""
    skip_unless_usable("mip-cbc")
    done = subprocess.run([sys.executable, "-W", "ignore", "-c", _MIP_SETTINGS], capture_output=True,
                          text=True, check=True, timeout=120)
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out == {"status": "OPTIMAL", "x": [1.0, 1.0], "rows": 1, "threads": 0, "seed": 3,
                   "integer_tol": 1e-9, "infeas_tol": 1e-7, "gap": 0.0, "gap_abs": 0.0}


# ------------------------------------------------------------------------ size
_BUILD = """
import json, sys, time
import numpy as np
from smug_opt import Problem, SolveOptions
from smug_opt.registry import backend_class
n = int(sys.argv[2])
rng = np.random.default_rng(0)
A = rng.normal(size=(n, n))
problem = Problem.from_arrays(A, ">", 0.1 * A.sum(axis=1))
backend = backend_class(sys.argv[1])()
start = time.perf_counter()
model = backend.lower(problem, SolveOptions(), 1)
out = {"lower": time.perf_counter() - start}
if sys.argv[1] == "pulp-cbc":
    import os, tempfile
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        model.problem.writeMPS(os.path.join(tmp, "m.mps"), rename=1)
        out["pulp_write_mps"] = time.perf_counter() - start
print(json.dumps(out))
"""


@pytest.mark.slow
@pytest.mark.parametrize("name", CBC)
def test_dense_3000_by_3000_build_time(name: str) -> None:
    """Model building at the 3,000-neuron scale, dense (9 million coefficients)."""
    skip_unless_usable(name)
    done = subprocess.run([sys.executable, "-W", "ignore", "-c", _BUILD, name, "3000"],
                          capture_output=True, text=True, check=True, timeout=900)
    timings = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"\n{name} 3000x3000 dense: " + ", ".join(f"{k} {v:.2f}s" for k, v in timings.items()))
    assert timings["lower"] < 300
