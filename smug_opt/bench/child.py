"""The job process: ``python -m smug_opt.bench.child PARENT_PID FD`` runs one benchmark job.

It receives a :class:`~smug_opt.bench.job.Job` on the connection ``FD``, loads the problem
and warms up the backend's imports, answers ``("ready", solver_version, start)`` (``start``
a ``time.monotonic()`` instant, a clock shared by all processes of the machine), then calls
:func:`smug_opt.solve` in this process (``isolate=False``: the harness kills this whole
process at the hard deadline) and answers ``("result", Solved)`` or ``("failed", message)``.

Test hook: a problem whose metadata has ``_bench_fault`` set to ``"hang"``, ``"crash"`` or
``"oom"`` makes this process, instead of solving, sleep forever, abort (SIGABRT, like a
segfaulting solver) or allocate memory without bound, so the harness's kill, crash and
memory-limit paths are exercised on real processes.
"""

from __future__ import annotations

import os
import signal
import sys
import time
import traceback
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection

from smug_opt.result import SolveResult

__all__ = ["FAULT_KEY", "Solved", "main"]

FAULT_KEY = "_bench_fault"


@dataclass(frozen=True)
class Solved:
    """A finished solve (its solution dropped) and the harness's re-check of that solution."""

    result: SolveResult
    reverified: bool | None
    reverification: str


def _die_with_parent(parent_pid: int) -> None:
    """Linux: get SIGKILL when the parent dies, so no job outlives a killed harness."""
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL(None).prctl(pr_set_pdeathsig, signal.SIGKILL)
    if os.getppid() != parent_pid:
        os._exit(1)


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
        from smug_opt.registry import backend_class
        from smug_opt.strengthen import Pieces

        problem = load_problem(job.instance.problem_path)
        cls = backend_class(job.backend)
        cls.warm_up()  # the backend's own start-up imports are not solve time
        version = cls.solver_version()
    except Exception as exc:
        conn.send(("failed", f"before the solve: {_describe(exc)}"))
        return
    conn.send(("ready", version, time.monotonic()))  # one system-wide clock: the parent times from here
    if FAULT_KEY in problem.metadata:
        _fault(str(problem.metadata[FAULT_KEY]))
    try:
        strengthen = False if job.strengthen == "off" else Pieces.parse(job.strengthen)
        result = solve(problem, job.backend, time_limit=job.time_limit, threads=job.threads,
                       seed=job.seed, isolate=False, grace=job.grace, strengthen=strengthen)
        reverified, summary = None, "no solution"
        if result.x is not None:
            check = verify(problem, result.x)
            reverified, summary = check.ok, check.summary()
    except Exception as exc:
        conn.send(("failed", f"during the solve: {_describe(exc)}"))
        return
    conn.send(("result", Solved(replace(result, x=None), reverified, summary)))


def _describe(exc: BaseException) -> str:
    return "".join(traceback.format_exception_only(type(exc), exc)).strip()


if __name__ == "__main__":
    from smug_opt.bench import child  # pickle Solved under its module name, not __main__

    child.main(int(sys.argv[2]), int(sys.argv[1]))
