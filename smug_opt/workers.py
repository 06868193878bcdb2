"""Warm worker processes that run one backend's solves in isolation.

Each backend gets its own long-lived worker process (python-mip's CBC and OR-Tools cannot
share a process; z3 overruns its own timeout), started as ``python -m
smug_opt.worker_main`` through :mod:`smug_opt.spawn`, so a user's script is never
re-imported. The parent talks to it over a socket pair with pickled messages, enforces a
hard wall-clock deadline, and kills and replaces a worker that overruns it. Improving
solutions a backend reports while it runs are streamed back, so a killed solve still hands
over the best solution it had.

Memory: each solve runs under a budget (:mod:`smug_opt.spawn`): a worker whose process
group passes it is killed like one that overruns its deadline. Between solves a worker
collects its garbage (z3's Python objects form reference cycles that hold whole solver
contexts) and reports its resident size; one that stays :data:`RECYCLE_MB` above its idle
footprint is replaced, so no leak in a solver library accumulates across solves.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import math
import os
import resource
import subprocess
import sys
import threading
import time
import traceback
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from smug_opt.backend import Backend, RawResult, SolveOptions, Status
from smug_opt.deadline import Deadline
from smug_opt.ir import Problem
from smug_opt.spawn import POLL_SECONDS, MemoryWatch, exit_with_parent, kill_group, resident_mb, spawn

IncumbentListener = Callable[[np.ndarray, float], None]
"""Told of each improving solution a worker streams back: ``(x, objective)``."""

__all__ = ["RECYCLE_MB", "AttemptOutcome", "child_main", "run_attempt", "shutdown_workers",
           "warm_workers"]

CANCELLED = "cancelled"
STILL_STARTING = "worker did not start before the deadline"

RECYCLE_MB = 256.0
"""A worker still this many MB above its idle footprint after a solve is replaced."""

MIN_SECONDS = 1e-3
"""The least time limit a solver is handed (its deadline may already have passed)."""


@dataclass
class AttemptOutcome:
    """What one lowered-and-solved attempt produced, as seen by the parent."""

    raw: RawResult | None  # None when the worker was killed or died
    lower_seconds: float = 0.0
    solve_seconds: float = 0.0
    wall_seconds: float = 0.0
    incumbents: list[tuple[float, float, np.ndarray]] = field(default_factory=list)
    killed: bool = False  # overran the hard deadline: killed (or, still starting, left to start)
    crash: str | None = None  # the worker died (segfault, ...) or passed its memory limit
    peak_rss_mb: float | None = None
    memory_exceeded: bool = False  # killed for passing its memory limit (``crash`` says so)
    cancelled: bool = False  # stopped because the caller's ``cancel`` event was set


# ------------------------------------------------------------------ child side
def _execute(
    backend: Backend,
    problem: Problem,
    options: SolveOptions,
    level: int,
    deadline: Deadline,
    send: Any,
) -> tuple[RawResult, float, float]:
    """Lower and optimise in the current process by ``deadline`` (the solver's
    ``options.time_limit`` is what is left of it when it starts); ``send`` receives
    incumbent messages."""
    t0 = time.perf_counter()
    try:
        model = backend.lower(problem, replace(options, time_limit=deadline.seconds_left(MIN_SECONDS)),
                              level)
    except Exception as exc:
        return _error("lowering failed", exc), time.perf_counter() - t0, 0.0
    t1 = time.perf_counter()
    solve_options = replace(options, time_limit=deadline.seconds_left(MIN_SECONDS))

    def on_incumbent(x: np.ndarray, objective: float) -> None:
        send(("incumbent", time.perf_counter() - t0, float(objective),
              np.array(x, dtype=np.float64)))

    try:
        raw = backend.optimize(model, problem, solve_options, on_incumbent)
    except Exception as exc:
        raw = _error("solver failed", exc)
    return raw, t1 - t0, time.perf_counter() - t1


def _error(what: str, exc: BaseException) -> RawResult:
    detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    return RawResult(Status.ERROR, solver_status=type(exc).__name__, message=f"{what}: {detail}")


def _peak_rss_mb() -> float:
    """This process's peak resident memory in MB: Linux's VmHWM, which starts afresh at
    execve (getrusage's ru_maxrss does not: a worker started by a 1 GB parent would report
    that parent's size as its own peak)."""
    unreadable = (OSError, StopIteration, ValueError, IndexError)
    with contextlib.suppress(*unreadable), open("/proc/self/status") as status:
        return int(next(line for line in status if line.startswith("VmHWM:")).split()[1]) / 1024.0
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def child_main(backend_name: str, fd: int) -> None:
    """The worker loop: load the backend, then lower and solve what the parent sends."""
    from smug_opt.registry import backend_class

    exit_with_parent()  # a parent killed by SIGTERM or SIGKILL takes this worker with it
    conn = Connection(fd)
    devnull = os.open(os.devnull, os.O_WRONLY)
    stdout = os.dup(1)  # the parent's stderr (see _Worker._spawn)
    os.dup2(devnull, 1)  # solver banners and logs are shown only when asked for (verbose)
    try:
        cls = backend_class(backend_name)
        cls.warm_up()  # while the parent is busy elsewhere
        backend = cls()
    except Exception as exc:
        conn.send(("fatal", f"{type(exc).__name__}: {exc}"))
        return
    gc.collect()
    try:
        conn.send(("ready", os.getpid(), resident_mb()))
    except OSError:  # the parent stopped it (or exited) while it started: nothing to do
        return
    cached: tuple[int, Problem] | None = None
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg[0] == "stop":
            return
        _, token, problem, options, level, deadline = msg
        if problem is not None:
            cached = (token, problem)
        if cached is None or cached[0] != token:
            conn.send(("result", RawResult(Status.ERROR, message="worker lost the problem"),
                       0.0, 0.0, _peak_rss_mb(), resident_mb()))
            continue
        os.dup2(stdout if options.verbose else devnull, 1)
        raw, lower_s, solve_s = _execute(backend, cached[1], options, level, deadline, conn.send)
        sys.stdout.flush()
        os.dup2(devnull, 1)
        gc.collect()  # solver objects in reference cycles (z3's) hold native memory
        conn.send(("result", raw, lower_s, solve_s, _peak_rss_mb(), resident_mb()))


# ----------------------------------------------------------------- parent side
class _Worker:
    """One warm worker process for one backend."""

    def __init__(self, backend_name: str) -> None:
        self.backend_name = backend_name
        self.lock = threading.Lock()
        self.cached_token: int | None = None
        self._spawn()

    def _spawn(self) -> None:
        child = spawn("smug_opt.worker_main", self.backend_name,
                      stdout=sys.__stderr__.fileno() if sys.__stderr__ else subprocess.DEVNULL)
        self.proc, self.conn = child.proc, child.conn
        self.ready = False
        self.idle_mb: float | None = None
        self.cached_token = None

    def _await_ready(self, deadline: Deadline, watch: MemoryWatch,
                     cancel: threading.Event | None = None) -> str | None:
        while not self.ready:
            if watch.over():
                return watch.message()
            if cancel is not None and cancel.is_set():
                return CANCELLED
            if deadline.passed():
                return STILL_STARTING
            timeout = min(POLL_SECONDS, deadline.remaining() or POLL_SECONDS)
            try:
                if not self.conn.poll(timeout):
                    continue
                msg = self.conn.recv()
            except (EOFError, OSError):
                return f"worker exited during start-up (exit code {self.proc.wait()})"
            if msg[0] == "fatal":
                return msg[1]
            if msg[0] == "ready":
                self.ready, self.idle_mb = True, msg[2]
        return None

    def restart(self) -> None:
        self.kill()
        self._spawn()

    def kill(self) -> None:
        """Kill the worker and every process it started (e.g. a CBC executable)."""
        kill_group(self.proc)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
        self.conn.close()

    def stop(self) -> None:
        try:
            self.conn.send(("stop",))
            self.proc.wait(timeout=2)
        except (OSError, subprocess.TimeoutExpired, ValueError):
            self.kill()

    def run(self, token: int, problem: Problem, options: SolveOptions, level: int,
            deadline: Deadline, hard_deadline: Deadline, memory_limit_mb: float | None,
            cancel: threading.Event | None = None,
            on_incumbent: IncumbentListener | None = None) -> AttemptOutcome:
        start = time.monotonic()
        watch = MemoryWatch(self.proc.pid, memory_limit_mb)
        failure = self._await_ready(hard_deadline, watch, cancel)
        if failure in (CANCELLED, STILL_STARTING):  # left to finish starting, warm for the next solve
            # (killed and restarted, a worker whose start-up outlasts the time limit on a loaded
            # machine would make every later solve start one afresh, and time out the same way)
            return AttemptOutcome(None, cancelled=failure == CANCELLED, killed=failure == STILL_STARTING,
                                  wall_seconds=time.monotonic() - start)
        if failure is not None:
            killed = hard_deadline.passed()
            self.restart()
            return AttemptOutcome(None, killed=killed, crash=None if killed else failure,
                                  memory_exceeded=watch.peak_mb > (memory_limit_mb or math.inf),
                                  wall_seconds=time.monotonic() - start)
        if watch.over():  # a warm worker that already holds more than the budget never solves within it
            self.restart()
            return AttemptOutcome(None, crash=watch.message(), memory_exceeded=True,
                                  peak_rss_mb=watch.peak_mb, wall_seconds=time.monotonic() - start)
        payload = problem if self.cached_token != token else None
        outcome = AttemptOutcome(None)
        try:  # a cold start was spent from the solve's own time: the deadline is absolute
            self.conn.send(("solve", token, payload, options, level, deadline))
            self.cached_token = token
            while True:
                if hard_deadline.passed():
                    outcome.killed = True
                    self.restart()
                    break
                timeout = min(POLL_SECONDS, hard_deadline.remaining() or POLL_SECONDS)
                if cancel is not None and cancel.is_set():
                    outcome.cancelled = True
                    self.restart()  # the replacement warms up while the caller goes on
                    break
                if not self.conn.poll(timeout):
                    if watch.over():
                        outcome.crash, outcome.memory_exceeded = watch.message(), True
                        outcome.peak_rss_mb = watch.peak_mb
                        self.restart()
                        break
                    continue
                msg = self.conn.recv()
                if msg[0] == "incumbent":
                    outcome.incumbents.append(msg[1:])
                    if on_incumbent is not None:
                        on_incumbent(msg[3], msg[2])
                    continue
                _, outcome.raw, outcome.lower_seconds, outcome.solve_seconds, peak, now = msg
                outcome.peak_rss_mb = max(peak, watch.peak_mb)
                if self.idle_mb is not None and now > self.idle_mb + RECYCLE_MB:
                    self.restart()  # did not give its memory back: a fresh one next time
                break
        except (EOFError, OSError, BrokenPipeError):
            code = self.proc.wait()
            outcome.crash = f"worker process died (exit code {code})"
            self._spawn()
        outcome.wall_seconds = time.monotonic() - start
        return outcome


_workers: dict[str, _Worker] = {}
_workers_lock = threading.Lock()
_tokens: weakref.WeakKeyDictionary[Problem, int] = weakref.WeakKeyDictionary()
_next_token = iter(range(1, sys.maxsize))


def _token(problem: Problem) -> int:
    with _workers_lock:
        if problem not in _tokens:
            _tokens[problem] = next(_next_token)
        return _tokens[problem]


def _worker(backend_name: str) -> _Worker:
    with _workers_lock:
        worker = _workers.get(backend_name)
        if worker is None or worker.proc.poll() is not None:
            worker = _workers[backend_name] = _Worker(backend_name)
        return worker


def run_attempt(
    backend_name: str,
    problem: Problem,
    options: SolveOptions,
    level: int,
    *,
    deadline: Deadline,
    hard_deadline: Deadline,
    isolate: bool = True,
    memory_limit_mb: float | None = None,
    cancel: threading.Event | None = None,
    on_incumbent: IncumbentListener | None = None,
) -> AttemptOutcome:
    """Run one tightening level of one solve: the solver is asked to stop by ``deadline``
    (wherever the worker runs), and an isolated worker still busy at ``hard_deadline`` is
    killed, as is one whose process group holds more than ``memory_limit_mb`` resident
    (None: no budget; not enforced with ``isolate=False``, where the caller's own process
    would be the victim). An isolated worker is also killed as soon as ``cancel`` is set (a
    race was decided elsewhere), and each improving solution it streams goes to ``on_incumbent(x, objective)``
    as it arrives."""
    if not isolate:
        from smug_opt.registry import backend_class

        incumbents: list[tuple[float, float, np.ndarray]] = []
        start = time.monotonic()
        raw, lower_s, solve_s = _execute(backend_class(backend_name)(), problem, options, level,
                                         deadline, lambda msg: incumbents.append(msg[1:]))
        return AttemptOutcome(raw, lower_s, solve_s, time.monotonic() - start, incumbents,
                              peak_rss_mb=_peak_rss_mb())
    worker = _worker(backend_name)
    with worker.lock:
        return worker.run(_token(problem), problem, options, level, deadline, hard_deadline,
                          memory_limit_mb, cancel, on_incumbent)


def warm_workers(backend_names: list[str], timeout: float = 60.0) -> None:
    """Start (if needed) and wait for the workers of ``backend_names``, so that a race's
    first solve is not charged their start-up (imports), as a single backend's is not."""
    deadline = Deadline.after(timeout)
    for name in backend_names:
        worker = _worker(name)
        with worker.lock:
            worker._await_ready(deadline, MemoryWatch(worker.proc.pid, None))


def shutdown_workers() -> None:
    """Stop every worker process (also done at interpreter exit)."""
    with _workers_lock:
        workers = list(_workers.values())
        _workers.clear()
    for worker in workers:
        worker.stop()


atexit.register(shutdown_workers)

