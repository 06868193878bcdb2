"""One benchmark job — (backend, instance, repeat) — run in its own killable process.

:func:`run_job` starts a fresh interpreter (``python -m smug_opt.bench.child``, never a
fork), in its own session so that the whole process group (a solver's own helper
processes included) can be killed, hands it the :class:`Job`, and waits. The clock starts
when the job process has loaded the problem and the solver: a job with no answer
``time_limit + grace`` seconds later, plus :data:`CHECKS_PAST_LIMIT` times the seconds one
exact check of the problem took the job process before it started (a solve verifies what
its solvers hand back at the limit; at load 15 a large network's check takes seconds), is
killed, as is one whose process group's resident
memory passes its budget (:mod:`smug_opt.spawn`, the same as a solve's worker gets).
Crashes, hangs, memory blow-ups and exceptions all become a
:class:`~smug_opt.bench.records.RunRecord` with status ERROR; :func:`run_job` itself only
raises :class:`JobCancelled` (when ``cancel`` is set) or KeyboardInterrupt.

The job process's peak memory is its maximum resident set size (or its largest reaped
descendant's) as reported by ``wait4`` when it is reaped, so killed jobs have one too. POSIX only.
"""

from __future__ import annotations

import contextlib
import enum
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

from smug_opt import __version__
from smug_opt.backend import Status
from smug_opt.bench.child import SolutionCheck, Solved
from smug_opt.bench.records import RecordKey, RunRecord, machine_info
from smug_opt.bench.suites import Instance
from smug_opt.spawn import POLL_SECONDS, MemoryWatch, kill_group, spawn

__all__ = ["CHECKS_PAST_LIMIT", "CHECK_TIMEOUT", "JOB_GRACE", "START_TIMEOUT", "Job", "JobCancelled",
           "failed_record", "run_job"]

JOB_GRACE = 5.0  # not solve.DEFAULT_GRACE (1 s, a worker's): a job process is killed, not recycled
"""Seconds past the time limit before a job process that has not answered is killed."""

CHECKS_PAST_LIMIT = 3
"""Exact checks a solve may still run after its time limit (a race's backends' last
answers, each verified once): the job's allowance past ``time_limit + grace`` is this many
times the check the job process timed before it started."""

START_TIMEOUT = 300.0
"""Seconds a job process may take to load its problem and solver before it is killed."""

CHECK_TIMEOUT = 300.0
"""Seconds a job process may take, once its solve has returned, to re-check the answer
exactly and run the suite's check (untimed: not part of the solve) before it is killed."""

_EXIT_WAIT = 10.0
_OUTPUT_TAIL = 1500


class JobCancelled(Exception):
    """The run was interrupted while this job was running; its process was killed."""


@dataclass(frozen=True)
class Job:
    """Everything one job process needs. ``memory_limit_mb`` None: no memory limit (a
    :class:`~smug_opt.bench.harness.RunConfig` gives every job the default budget).
    ``extras`` are the backend's solver settings (:attr:`SolveOptions.extras`); ``check``
    (the suite's, if any) runs in the job process on a returned solution, untimed, and its
    findings become the record's ``checks``."""

    suite: str
    instance: Instance
    backend: str
    repeat: int
    time_limit: float
    threads: int = 1
    seed: int = 0
    grace: float = JOB_GRACE
    memory_limit_mb: float | None = None
    strengthen: str = "auto"  # "off" or the strengthening pieces: "all", "cuts,tables", ...
    extras: Mapping[str, Any] = field(default_factory=dict)
    check: SolutionCheck | None = None
    certify: str = "auto"  # solve's certify: "auto" (its default), "on" (True) or "off" (False)

    @property
    def key(self) -> RecordKey:
        return (self.suite, self.instance.name, self.backend, self.repeat)


class _Event(enum.Enum):
    DEADLINE = "deadline"
    DIED = "died"
    MEMORY = "memory"


@dataclass
class _Ending:
    """How the job process's answer (or silence) ended the wait."""

    message: Any  # the child's message tuple, or an _Event
    wall: float | None = None  # seconds from the solve's start; None if it never started
    solver: str = ""
    checking: bool = False  # the solve had returned: the wait ended in the checks after it
    allowance: float = 0.0  # seconds past time limit + grace left for the solve's exact checks


class _JobProcess:
    """The job's interpreter: started in a new session, talked to over a socket pair."""

    def __init__(self, job: Job, output: IO[bytes]) -> None:
        self.job = job
        self.output = output
        child = spawn("smug_opt.bench.child", str(os.getpid()), stdout=output, stderr=subprocess.STDOUT)
        self.proc, self.conn = child.proc, child.conn
        self.conn.send(job)
        self.memory = MemoryWatch(self.proc.pid, job.memory_limit_mb)

    def receive(self, deadline: float, cancel: threading.Event | None) -> Any:
        """The next message, or the :class:`_Event` that ended the wait first."""
        while True:
            if cancel is not None and cancel.is_set():
                raise JobCancelled(f"job {self.job.key} cancelled")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return _Event.DEADLINE
            try:
                if self.conn.poll(min(remaining, POLL_SECONDS)):
                    return self.conn.recv()
            except (EOFError, OSError):
                return _Event.DIED
            if self.memory.over():
                return _Event.MEMORY

    def finish(self, *, let_exit: bool) -> tuple[int, float]:
        """Kill the process group (after up to ``_EXIT_WAIT`` s for the process to exit on its
        own if ``let_exit``) and reap it; returns (exit code, negative for a signal; peak
        resident memory in MB)."""
        end = time.monotonic() + (_EXIT_WAIT if let_exit and hasattr(os, "waitid") else 0.0)
        while time.monotonic() < end:
            flags = os.WEXITED | os.WNOHANG | os.WNOWAIT  # look, but leave it to wait4 to reap
            if os.waitid(os.P_PID, self.proc.pid, flags) is not None:
                break
            time.sleep(0.01)
        kill_group(self.proc)  # the unreaped leader keeps the group id ours
        _, status, usage = os.wait4(self.proc.pid, 0)
        self.proc.returncode = os.waitstatus_to_exitcode(status)
        self.conn.close()
        scale = 2**20 if sys.platform == "darwin" else 2**10  # ru_maxrss: bytes on macOS, else KiB
        return self.proc.returncode, usage.ru_maxrss / scale

    def output_tail(self) -> str:
        self.output.seek(0, os.SEEK_END)
        size = self.output.tell()
        self.output.seek(max(size - _OUTPUT_TAIL, 0))
        return self.output.read().decode(errors="replace").strip()


def run_job(job: Job, *, cancel: threading.Event | None = None) -> RunRecord:
    """Run ``job`` in a fresh process and record what happened (never raises for a failed
    job; see the module docstring)."""
    started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    path = job.instance.problem_path
    if not Path(path).is_file():
        return failed_record(job, f"problem file {path} not found on host {machine_info().hostname} "
                                  "(a distributed run needs the instances on a shared file system)")
    with tempfile.TemporaryFile() as output:
        process = _JobProcess(job, output)
        ending: _Ending | None = None
        try:
            ending = _wait(process, job, cancel)
        finally:
            let_exit = ending is not None and ending.message not in (_Event.DEADLINE, _Event.MEMORY)
            exit_code, peak_mb = process.finish(let_exit=let_exit)
        return _outcome(job, started_at, ending, exit_code, peak_mb, process.output_tail(),
                        process.memory.message())


def _wait(process: _JobProcess, job: Job, cancel: threading.Event | None) -> _Ending:
    message = process.receive(time.monotonic() + START_TIMEOUT, cancel)
    if not (isinstance(message, tuple) and message[0] == "ready"):
        return _Ending(message)
    start = min(message[2], time.monotonic())  # the child's start, not when we heard of it
    allowance = CHECKS_PAST_LIMIT * message[3]
    answer = process.receive(start + job.time_limit + job.grace + allowance, cancel)
    if not (isinstance(answer, tuple) and answer[0] == "solved"):
        return _Ending(answer, time.monotonic() - start, message[1], allowance=allowance)
    wall = min(answer[1], time.monotonic()) - start  # the solve's own seconds
    answer = process.receive(time.monotonic() + CHECK_TIMEOUT, cancel)
    return _Ending(answer, wall, message[1], checking=True)


def _outcome(job: Job, started_at: str, ending: _Ending, exit_code: int, peak_mb: float,
             output: str, memory_message: str) -> RunRecord:
    common: dict[str, Any] = {
        "wall_seconds": ending.wall, "peak_memory_mb": peak_mb, "exit_code": exit_code,
        "solver": ending.solver,
        "overshoot": None if ending.wall is None else ending.wall - job.time_limit,
    }
    message = ending.message
    if isinstance(message, tuple) and message[0] == "result":
        solved: Solved = message[1]
        r = solved.result
        return _record(
            job, started_at, r.status, objective=r.objective, bound=r.bound, gap=r.gap,
            times=r.times, verified=r.verified, proof=r.proof, verification=r.verification,
            reverified=solved.reverified, checks=dict(solved.checks), attempts=len(r.attempts),
            incumbents=r.incumbents,
            strengthening=None if r.strengthening is None else r.strengthening.to_dict(),
            message=r.message if solved.reverified is not False else
            f"harness re-check failed: {solved.reverification}; {r.message}",
            **{**common, "solver": r.solver or ending.solver},
        )
    phase = "during the solve" if ending.wall is not None else "before the solve"
    if isinstance(message, tuple) and message[0] == "failed":
        text = message[1]
    elif message is _Event.DEADLINE and ending.checking:
        text = (f"the solve returned after {ending.wall:.1f} s, but re-checking its answer did not "
                f"finish within {CHECK_TIMEOUT:g} s: killed")
    elif message is _Event.DEADLINE and ending.wall is not None:
        text = (f"no answer {job.time_limit + job.grace + ending.allowance:.1f} s after the solve "
                f"started (time limit {job.time_limit:g} s + grace {job.grace:g} s + "
                f"{ending.allowance:.1f} s for {CHECKS_PAST_LIMIT} exact checks): killed")
    elif message is _Event.DEADLINE:
        text = f"the job process did not load its problem and solver within {START_TIMEOUT:g} s: killed"
    elif message is _Event.MEMORY:
        text = f"{phase}: {memory_message}"
    else:
        text = f"the job process died {phase} ({_exit_text(exit_code)})"
        if output:
            text += f"; its last output: {output[-600:]}"
    killed = message in (_Event.DEADLINE, _Event.MEMORY)
    return _record(job, started_at, Status.ERROR, message=text, killed=killed, **common)


def _exit_text(code: int) -> str:
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"signal {signal.Signals(-code).name}"
        return f"signal {-code}"
    return f"exit code {code}"


def failed_record(job: Job, message: str, **values: Any) -> RunRecord:
    """An ERROR record for ``job`` that never got to solve."""
    return _record(job, datetime.now(timezone.utc).isoformat(timespec="seconds"), Status.ERROR,
                   message=message, **values)


def _record(job: Job, started_at: str, status: Status, **values: Any) -> RunRecord:
    fields: dict[str, Any] = {"machine": machine_info(), **values}
    return RunRecord(
        suite=job.suite, instance=job.instance.name, backend=job.backend, repeat=job.repeat,
        status=status, time_limit=job.time_limit, threads=job.threads, seed=job.seed,
        features=dict(job.instance.features), started_at=started_at,
        smug_opt_version=__version__, **fields,
    )
