"""The job process: ``python -m smug_opt.bench.child PARENT_PID FD`` runs one benchmark job.

It receives a :class:`~smug_opt.bench.job.Job` on the connection ``FD``, loads the problem
and warms up the backend's imports, times one exact check of a solution (untimed: the
harness's allowance for the checks that end a solve, :data:`smug_opt.bench.job.CHECKS_PAST_LIMIT`),
answers ``("ready", solver_version, start, check_seconds)`` (``start`` a
``time.monotonic()`` instant, a clock shared by all processes of the machine), then calls
:func:`smug_opt.solve` in this process (``isolate=False``: the harness kills this whole
process at the hard deadline), says ``("solved", end)`` when the solve returns (the
harness's re-check and the suite's check that follow are not timed against the limit) and
answers ``("result", Solved)`` or ``("failed", message)``.

Test hook: a problem whose metadata has ``_bench_fault`` set to ``"hang"``, ``"crash"`` or
``"oom"`` makes this process, instead of solving, sleep forever, abort (SIGABRT, like a
segfaulting solver) or allocate memory without bound; ``"slow-check"`` solves and then
spends :data:`SLOW_CHECK_SECONDS` before its checks (like a slow exact re-check of a large
problem). So the harness's kill, crash, memory-limit and check paths are exercised on real
processes.
"""

from __future__ import annotations

import os
import signal
import sys
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

import numpy as np

from smug_opt.bench.records import backend_name
from smug_opt.result import SolveResult
from smug_opt.spawn import exit_with_parent

if TYPE_CHECKING:
    from smug_opt.ir import Problem

__all__ = ["FAULT_KEY", "SLOW_CHECK", "SLOW_CHECK_SECONDS", "SolutionCheck", "Solved", "main"]

CERTIFY_SETTINGS: Mapping[str, bool | None] = {"auto": None, "on": True, "off": False}
"""A run's certify setting and the ``solve(certify=...)`` it stands for."""

FAULT_KEY = "_bench_fault"
SLOW_CHECK = "slow-check"
SLOW_CHECK_SECONDS = 4.0


SolutionCheck = Callable[["Problem", np.ndarray], Mapping[str, Any]]
"""A suite's extra check of a returned solution (e.g. the mask in the real model): a
picklable callable of (problem, solution) returning JSON-ready findings."""


@dataclass(frozen=True)
class Solved:
    """A finished solve (its solution dropped), the harness's re-check of that solution,
    and the findings of the job's :data:`SolutionCheck` (empty without one or a solution)."""

    result: SolveResult
    reverified: bool | None
    reverification: str
    checks: Mapping[str, Any] = field(default_factory=dict)


def _die_with_parent(parent_pid: int) -> None:
    """No job outlives a killed harness: on Linux SIGKILL when the parent dies; everywhere,
    the job and what it started (a race's solver workers) end once it is re-parented."""
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL(None).prctl(pr_set_pdeathsig, signal.SIGKILL)
    exit_with_parent(parent_pid)


def _fault(kind: str) -> None:
    if kind == "hang":
        while True:
            time.sleep(3600)
    if kind == "crash":
        os.abort()
    if kind == "oom":
        hog = []
        while True:
            block = bytearray(64 * 2**20)
            block[::4096] = b"x" * len(block[::4096])  # touch every page
            hog.append(block)
            time.sleep(0.02)
    raise ValueError(f"unknown {FAULT_KEY} {kind!r}; expected 'hang', 'crash' or 'oom'")


def main(fd: int, parent_pid: int) -> None:
    """Run the job the parent sends over connection ``fd``."""
    _die_with_parent(parent_pid)
    conn = Connection(fd)
    job = conn.recv()
    try:
        from smug_opt import load_problem, solve, verify
        from smug_opt.backend_choice import AUTO
        from smug_opt.portfolio import race_backends
        from smug_opt.registry import backend_class
        from smug_opt.solving import DEFAULT_GRACE
        from smug_opt.strengthen import Pieces
        from smug_opt.workers import warm_workers

        problem = load_problem(job.instance.problem_path)
        if backend_name(job.backend) == AUTO:  # a race: its workers' start-up is not solve time
            raced = race_backends(problem, AUTO)
            warm_workers(raced)
            version = "race of " + ", ".join(backend_class(name).solver_version() for name in raced)
        else:
            cls = backend_class(backend_name(job.backend))
            cls.warm_up()  # the backend's own start-up imports are not solve time
            version = cls.solver_version()
        check_seconds = _check_seconds(problem)
    except Exception as exc:
        conn.send(("failed", f"before the solve: {_describe(exc)}"))
        return
    # one system-wide clock: the parent times from here
    conn.send(("ready", version, time.monotonic(), check_seconds))
    fault = problem.metadata.get(FAULT_KEY)
    if fault is not None and fault != SLOW_CHECK:
        _fault(str(fault))
    try:
        setting = job.strengthen
        strengthen = (None if setting == "auto" else False if setting == "off"
                      else Pieces.parse(setting))
        result = solve(problem, backend_name(job.backend), time_limit=job.time_limit,
                       threads=job.threads, seed=job.seed, isolate=False,
                       grace=min(job.grace, DEFAULT_GRACE),  # a race's workers: the rest of
                       # the job's grace is left for verifying what they found
                       strengthen=strengthen, extras=dict(job.extras),
                       certify=CERTIFY_SETTINGS[job.certify])
        conn.send(("solved", time.monotonic()))  # the harness's own checks are not solve time
        if fault == SLOW_CHECK:
            time.sleep(SLOW_CHECK_SECONDS)
        reverified, summary = None, "no solution"
        if result.x is not None:
            check = verify(problem, result.x)
            reverified, summary = check.ok, check.summary()
    except Exception as exc:
        conn.send(("failed", f"during the solve: {_describe(exc)}"))
        return
    checks: dict[str, Any] = {}
    if job.check is not None and result.x is not None:
        try:
            checks = dict(job.check(problem, result.x))
        except Exception as exc:
            checks = {"check_error": _describe(exc)}
    conn.send(("result", Solved(replace(result, x=None), reverified, summary, checks)))


def _check_seconds(problem: Problem) -> float:
    """Wall seconds of one exact check of a solution of ``problem`` (the all-zero one: a
    check's work is the problem's rows and ReLUs, whatever the values), at this moment's load."""
    from smug_opt.verification import verify

    start = time.monotonic()
    verify(problem, np.zeros(problem.num_vars))
    return time.monotonic() - start


def _describe(exc: BaseException) -> str:
    return "".join(traceback.format_exception_only(type(exc), exc)).strip()


if __name__ == "__main__":
    from smug_opt.bench import child  # pickle Solved under its module name, not __main__

    child.main(int(sys.argv[2]), int(sys.argv[1]))
