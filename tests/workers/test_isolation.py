"""Process isolation: incompatible solvers in one session, hard kills, crashes, overhead."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time

import pytest
from conftest import skip_unless_usable

from smug_opt import Problem, Status, solve

PROBLEM = Problem.from_arrays([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0]], ">", [1.0, 0.5])  # optimum 2

_ONE_SESSION = """
import json, sys
from smug_opt import Problem, solve
problem = Problem.from_arrays([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0]], ">", [1.0, 0.5])
answers = [[name, solve(problem, name, time_limit=60).status.name,
            solve(problem, name, time_limit=60).objective] for name in sys.argv[1:]]
print(json.dumps({"answers": answers,
                  "parent_imported": sorted(m for m in ("mip", "ortools", "cbcbox") if m in sys.modules)}))
"""


@pytest.mark.parametrize("order", [("mip-cbc", "cpsat", "mip-cbc"), ("cpsat", "mip-cbc", "cpsat")],
                         ids=["mip-cbc-first", "cpsat-first"])
def test_cbc_and_ortools_backends_work_in_one_session(order: tuple[str, ...]) -> None:
    """python-mip's CBC and OR-Tools crash when they share a process; the workers keep them
    apart, so both work in either order and the parent imports neither."""
    for name in set(order):
        skip_unless_usable(name)
    done = subprocess.run([sys.executable, "-W", "ignore", "-c", _ONE_SESSION, *order],
                          capture_output=True, text=True, timeout=180, check=True)
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["answers"] == [[name, "OPTIMAL", 2.0] for name in order], done.stderr[-2000:]
    assert out["parent_imported"] == []


def _process(result) -> str:
    """The worker process that produced the last attempt (the toy backends report it)."""
    return result.attempts[-1].solver_status.rsplit(" ", 1)[-1]


def test_hanging_backend_is_killed_and_replaced(toy_plugin: str) -> None:
    warm = solve(PROBLEM, "toy-hang", time_limit=30, extras={"hang": False})
    assert warm.status is Status.OPTIMAL and warm.objective == 2
    limit, grace = 1.0, 0.5
    start = time.monotonic()
    hung = solve(PROBLEM, "toy-hang", time_limit=limit, grace=grace)
    wall = time.monotonic() - start
    assert hung.status is Status.NO_SOLUTION and hung.killed and hung.x is None
    assert limit + grace <= wall <= limit + grace + 1.0, f"returned after {wall:.2f}s"
    assert "killed" in hung.message
    after = solve(PROBLEM, "toy-hang", time_limit=30, extras={"hang": False})
    assert after.status is Status.OPTIMAL and after.objective == 2
    assert _process(after) != _process(warm), "the killed worker was not replaced"


def test_a_worker_still_starting_at_the_time_limit_is_left_to_start(toy_plugin: str, tmp_path,
                                                                    monkeypatch) -> None:
    """A solve whose time limit ends while its worker is still starting gives up without
    killing it, and the next solve finds that worker (killed and replaced, a start-up that
    outlasts the limit on a loaded machine would time every later solve out the same way)."""
    import psutil

    from smug_opt.workers import shutdown_workers

    (tmp_path / "sitecustomize.py").write_text("import sys, time\nif 'toy-hang' in sys.argv:\n"
                                               "    time.sleep(4)  # a start-up slower than the limit\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))  # the worker's start reads it (after the checkout)
    shutdown_workers()
    limit = grace = 1.0
    asked = time.time()
    cut = solve(PROBLEM, "toy-hang", time_limit=limit, grace=grace, extras={"hang": False})
    assert cut.status is Status.NO_SOLUTION and cut.killed and cut.x is None
    (starting,) = [p for p in psutil.Process().children() if "toy-hang" in p.cmdline()]
    assert starting.create_time() < asked + limit, "the starting worker was replaced at the deadline"
    after = solve(PROBLEM, "toy-hang", time_limit=30, extras={"hang": False})
    assert after.status is Status.OPTIMAL and _process(after) == str(starting.pid)


def test_crashing_backend_is_an_error_and_is_replaced(toy_plugin: str) -> None:
    warm = solve(PROBLEM, "toy-crash", time_limit=30, extras={"crash": False})
    crashed = solve(PROBLEM, "toy-crash", time_limit=30)
    assert crashed.status is Status.ERROR and crashed.x is None and not crashed.killed
    assert "worker process died (exit code 1)" in crashed.message
    after = solve(PROBLEM, "toy-crash", time_limit=30, extras={"crash": False})
    assert after.status is Status.OPTIMAL and after.objective == 2
    assert _process(after) != _process(warm)


def test_worker_overhead_on_a_tiny_problem() -> None:
    """Per-solve cost of the warm worker process (hand-off, pickling, polling) on HiGHS."""
    skip_unless_usable("highs")
    tiny = Problem.from_arrays([[1.0, 1.0]], ">=", 1.0)  # one attempt: level 0 verifies
    solve(tiny, "highs")  # start the worker
    results = [solve(tiny, "highs") for _ in range(50)]
    assert all(len(r.attempts) == 1 for r in results)
    total = statistics.median(r.times.total for r in results)
    overhead = statistics.median(r.times.overhead for r in results)
    in_process = statistics.median(solve(tiny, "highs", isolate=False).times.total for _ in range(50))
    print(f"\nhighs, tiny problem, median of 50: {total * 1e3:.1f} ms per isolated solve "
          f"({overhead * 1e3:.1f} ms worker overhead); {in_process * 1e3:.1f} ms in process")
    assert all(r.status is Status.OPTIMAL for r in results)
    assert total < 1.0, "a warm worker should answer a tiny problem well within a second"
