"""SIGTERM and SIGHUP end every process smug-opt started, through the real command (a
solve, a batch explain on a pool, a benchmark race) and for a library caller killed
outright; a library never signals its caller's process group."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from smug_opt import save_problem
from smug_opt.testing.instances import hard_instance

ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
HELPERS = ("smug_opt.worker_main", "smug_opt.bench.child", "multiprocessing")


@pytest.fixture(scope="module")
def hard(tmp_path_factory) -> Path:
    """A market split z3's exact encoding does not decide in minutes."""
    folder = tmp_path_factory.mktemp("hard")
    save_problem(hard_instance(), folder / "hard.smug")
    return folder


def _helpers(pid: int) -> list[psutil.Process]:
    try:
        descendants = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    found = []
    for process in descendants:
        try:
            if any(name in " ".join(process.cmdline()) for name in HELPERS):
                found.append(process)
        except psutil.Error:
            continue
    return found


def _wait_for_helpers(proc: subprocess.Popen, *needed: str, timeout: float = 240,
                      settle: float = 3.0) -> list[psutil.Process]:
    """``settle`` seconds after a helper of each name in ``needed`` runs (its solve under
    way, past its start-up): every helper of ``proc``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"the command ended first: {proc.stderr.read()[-2000:]}"
        lines = [" ".join(p.cmdline()) for p in _helpers(proc.pid) if p.is_running()]
        if all(any(name in line for line in lines) for name in needed):
            time.sleep(settle)
            return _helpers(proc.pid)
        time.sleep(0.1)
    pytest.fail(f"no {needed} process started within {timeout} s")


def _wait_until_asleep(process: psutil.Process, timeout: float = 120) -> None:
    """Until ``process`` has slept, using no CPU, for a second (past its start-up)."""
    deadline, quiet, cpu = time.monotonic() + timeout, 0, None
    while time.monotonic() < deadline and quiet < 10:
        now = sum(process.cpu_times()[:2])
        quiet = quiet + 1 if process.status() == psutil.STATUS_SLEEPING and now == cpu else 0
        cpu = now
        time.sleep(0.1)
    assert quiet >= 10, f"{process} never went to sleep"


def _left(helpers: list[psutil.Process], timeout: float = 2.0) -> list[str]:
    """The helpers still running after ``timeout`` seconds (a dead one may be a zombie)."""
    deadline = time.monotonic() + timeout
    while True:
        alive = []
        for process in helpers:
            try:
                if process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
                    alive.append(f"{process.pid}: {' '.join(process.cmdline())}")
            except psutil.NoSuchProcess:
                continue
        if not alive or time.monotonic() > deadline:
            for process in helpers:  # never leave them behind, whatever the outcome
                with contextlib.suppress(psutil.NoSuchProcess):
                    process.kill()
            return alive
        time.sleep(0.1)


def _terminate(cmd: list[str], cwd: Path, needed: tuple[str, ...], sig: int = signal.SIGTERM):
    proc = subprocess.Popen([sys.executable, "-m", "smug_opt", *cmd], cwd=cwd, env=ENV,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        helpers = _wait_for_helpers(proc, *needed)
        proc.send_signal(sig)  # the command's pid only, as `timeout`, systemd and SLURM do
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    return code, proc.stderr.read(), _left(helpers)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_terminated_solve_leaves_no_worker(hard, sig):
    code, stderr, left = _terminate(["solve", "hard.smug", "--backend", "z3", "--option",
                                     "encoding=exact", "--time-limit", "300"], hard, ("worker_main",), sig)
    assert left == [], f"left running after {sig.name}: {left}"
    assert code == 128 + sig and "Traceback" not in stderr, stderr
    assert f"interrupted ({sig.name})" in stderr


@pytest.mark.slow
def test_terminated_batch_explain_on_a_pool_leaves_nothing(tmp_path):
    from PIL import Image

    from smug_opt.data.mnist import load_digits

    for i, image in enumerate(load_digits().x_test[:4]):
        Image.fromarray((image[..., 0] * 255).round().astype("uint8")).save(tmp_path / f"d{i}.png")
    cmd = ["explain", "--input", str(tmp_path), "--out", str(tmp_path / "run"), "--workers", "2",
           "--chunk", "1", "--backend", "z3", "--option", "encoding=exact", "--cell", "1",
           "--time-limit", "300", "--quiet"]
    code, stderr, left = _terminate(cmd, tmp_path, ("multiprocessing", "worker_main"))
    assert left == [], f"left running after SIGTERM: {left}"
    assert code == 143 and "Traceback" not in stderr, stderr
    assert (tmp_path / "run" / ".lock").read_text() == "", "the run folder's lock was not given back"


@pytest.mark.slow
def test_terminated_bench_race_leaves_nothing(hard):
    out = hard / "bench"
    cmd = ["bench", "run", "--instances", str(hard), "--backend", "auto", "--time-limit", "300",
           "--out", str(out), "--quiet"]
    code, stderr, left = _terminate(cmd, hard, ("bench.child", "worker_main"))  # a race's worker
    assert left == [], f"left running after SIGTERM: {left}"
    assert code == 143 and "Traceback" not in stderr, stderr


def test_library_caller_killed_outright_takes_its_workers(hard, toy_plugin):
    """A worker that never talks to its parent (toy-hang sleeps) still ends with it."""
    script = ("import numpy as np\nfrom smug_opt import Problem, solve\n"
              "solve(Problem.from_arrays(np.ones((1, 3)), '>=', 1.0), 'toy-hang', time_limit=300)\n")
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=hard, env=ENV,
                            stderr=subprocess.PIPE, text=True)
    try:
        helpers = _wait_for_helpers(proc, "worker_main", settle=0.0)
        _wait_until_asleep(next(p for p in helpers if "worker_main" in " ".join(p.cmdline())))
        proc.kill()  # no handler can run: the worker must notice on its own
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert _left(helpers) == []


def test_library_installs_no_signal_handler(hard):
    """Used as a library, smug-opt leaves SIGTERM to its caller (here: the default, death)."""
    from smug_opt import load_problem, solve

    before = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGHUP)}
    solve(load_problem(hard / "hard.smug"), "highs", time_limit=0.5)
    assert {sig: signal.getsignal(sig) for sig in before} == before


def _solve_hard(path: str) -> str:
    from smug_opt import load_problem, solve

    return solve(load_problem(path), "z3", time_limit=300, extras={"encoding": "exact"}).status.name


@pytest.mark.slow
def test_a_killed_dask_worker_takes_its_solver_workers(hard):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        (worker_pid,) = client.run(os.getpid).values()
        future = client.submit(_solve_hard, str(hard / "hard.smug"), pure=False)
        deadline = time.monotonic() + 240
        while not [p for p in _helpers(worker_pid) if "worker_main" in " ".join(p.cmdline())]:
            assert time.monotonic() < deadline and not future.done(), "no solver worker started"
            time.sleep(0.1)
        time.sleep(3.0)
        helpers = [p for p in _helpers(worker_pid) if "worker_main" in " ".join(p.cmdline())]
        os.kill(worker_pid, signal.SIGKILL)  # the Dask worker dies without any cleanup
        assert _left(helpers) == [], "a solver worker outlived its Dask worker"
        future.cancel()
