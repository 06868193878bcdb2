"""Start the project's helper processes and hold each one to a memory budget.

Solver workers (:mod:`smug_opt.workers`) and benchmark jobs (:mod:`smug_opt.bench.job`)
are both fresh interpreters (``python -m MODULE ... FD``, never a fork), each in a new
session so that one ``killpg`` takes the solver's own helper processes too (a CBC
executable), talking to the parent over a socket pair. :func:`spawn` starts one;
:class:`MemoryWatch` is the budget: the parent samples the resident memory of the child's
whole process group and kills that group, and nothing else, when it passes the limit.

Why a resident-size watchdog and not ``RLIMIT_AS``: an address-space limit makes z3 and
CBC fail inside an allocation (an exception deep in native code, or an abort that looks
like a crash) and counts reserved but untouched memory (TensorFlow reserves gigabytes),
so it hits the wrong processes for the wrong reasons. Sampling every
:data:`POLL_SECONDS` lets a process overshoot by what it allocates in that time (z3's
worst measured growth, 18 GB in 50 s, is ~40 MB per 0.1 s).

Nothing outlives its parent: a child calls :func:`exit_with_parent` first thing, and once
its parent is gone (SIGTERM or SIGKILL to a library caller, a killed Dask worker) it ends
every process it started and exits. :func:`end_descendants` is the parent's side: it kills
what this process started, each by its own pid or session, never the caller's group.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import IO, Any

from smug_opt.errors import ParameterError

__all__ = [
    "POLL_SECONDS",
    "Child",
    "MemoryWatch",
    "default_memory_limit_mb",
    "end_descendants",
    "exit_with_parent",
    "kill_group",
    "resident_mb",
    "resolve_memory_limit",
    "spawn",
]

POLL_SECONDS = 0.1
"""How often a parent waiting on a child samples its memory."""

PARENT_POLL_SECONDS = 0.2
"""How often a child looks whether its parent is still there."""

_PARENT_ENV = "SMUG_OPT_PARENT_PID"
_MIN_DEFAULT_MB = 1024.0
_SHARE_OF_RAM = 8  # the default budget is this fraction of the machine's RAM


def default_memory_limit_mb() -> float:
    """The default budget of one worker: 1/8 of the machine's RAM, at least 1 GiB
    (3 GiB on a 24 GiB machine: a portfolio racing five backends stays within 2/3 of it)."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**20
    return max(_MIN_DEFAULT_MB, round(total / _SHARE_OF_RAM))


def resolve_memory_limit(memory_limit_mb: float | None) -> float | None:
    """MB as given; None: the default budget; ``math.inf``: no budget (returns None)."""
    if memory_limit_mb is None:
        return default_memory_limit_mb()
    if isinstance(memory_limit_mb, bool) or not isinstance(memory_limit_mb, (int, float)) \
            or math.isnan(memory_limit_mb) or memory_limit_mb <= 0:
        raise ParameterError("memory_limit_mb", f"must be positive megabytes, None (the default budget, "
                                                f"{default_memory_limit_mb():g} MB here) or math.inf (no "
                                                f"budget); got {memory_limit_mb!r}")
    return None if math.isinf(memory_limit_mb) else float(memory_limit_mb)


def resident_mb(pid: int | None = None) -> float:
    """Resident memory (MB) of process ``pid`` (this process by default), from /proc."""
    with open(f"/proc/{pid or 'self'}/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


@dataclass
class Child:
    """A started helper process and the parent's end of its socket pair."""

    proc: subprocess.Popen[bytes]
    conn: Connection


def spawn(module: str, *args: str, stdout: IO[bytes] | int | None = None,
          stderr: IO[bytes] | int | None = None) -> Child:
    """Start ``python -m module *args FD`` in a new session with this checkout importable;
    ``FD`` (the last argument) is the child's end of a socket pair."""
    parent_sock, child_sock = socket.socketpair()
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
    env[_PARENT_ENV] = str(os.getpid())
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", module, *args, str(child_sock.fileno())],
            pass_fds=(child_sock.fileno(),), env=env, stdin=subprocess.DEVNULL,
            stdout=stdout, stderr=stderr,
            start_new_session=True,  # its own process group: a kill takes solver children too
        )
    finally:
        child_sock.close()
    return Child(proc, Connection(parent_sock.detach()))


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL ``proc`` and every process of its group (it leads a session of its own)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


class MemoryWatch:
    """The memory budget of one child: ``over()`` samples the resident memory of the child
    and its descendants and says whether together they hold more than ``limit_mb``."""

    def __init__(self, pid: int, limit_mb: float | None) -> None:
        self.limit_mb = limit_mb
        self.peak_mb = 0.0
        self._process: Any = None
        if limit_mb is not None:
            import psutil

            with contextlib.suppress(psutil.Error):
                self._process = psutil.Process(pid)

    def sample(self) -> float:
        """The group's resident memory now, in MB (0 when the child is gone)."""
        if self._process is None:
            return 0.0
        import psutil

        rss = 0
        try:
            for process in [self._process, *self._process.children(recursive=True)]:
                with contextlib.suppress(psutil.Error):
                    rss += process.memory_info().rss
        except psutil.Error:  # the child is gone: the caller sees its closed socket
            return 0.0
        mb = rss / 2**20
        self.peak_mb = max(self.peak_mb, mb)
        return mb

    def over(self) -> bool:
        return self.limit_mb is not None and self.sample() > self.limit_mb

    def message(self) -> str:
        """What to report when :meth:`over` said yes."""
        if self.limit_mb is None:
            return "no memory limit"
        return (f"memory limit of {self.limit_mb:g} MB exceeded (resident {self.peak_mb:.0f} MB): "
                "the worker was killed")


def end_descendants(pid: int | None = None) -> None:
    """SIGKILL every process that ``pid`` (this process by default) started, directly or not:
    one leading a session of its own (a solver worker, a benchmark job) with its whole
    process group, any other by its pid alone; ``pid`` itself and its group are spared, as
    is multiprocessing's resource tracker (it ends with its parent, freeing what it tracks)."""
    import psutil

    try:
        descendants = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return
    tracker = sys.modules.get("multiprocessing.resource_tracker")
    spared = getattr(getattr(tracker, "_resource_tracker", None), "_pid", None)
    for process in descendants:
        if process.pid == spared:
            continue
        with contextlib.suppress(ProcessLookupError, PermissionError, psutil.Error):
            if os.getpgid(process.pid) == process.pid:
                os.killpg(process.pid, signal.SIGKILL)
            process.kill()


def exit_with_parent(parent_pid: int | None = None) -> None:
    """In a child: end it, and every process it started, as soon as its parent is gone.

    ``parent_pid``: the parent expected (default: the one :func:`spawn` recorded in the
    environment, else the current one). A daemon thread looks every
    :data:`PARENT_POLL_SECONDS`; when the process has been re-parented it kills its
    descendants, then its own process group if it leads one (else itself alone)."""
    if parent_pid is None:
        parent_pid = int(os.environ.get(_PARENT_ENV, os.getppid()))
    if os.getppid() != parent_pid:
        _end_self()

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(PARENT_POLL_SECONDS)
        _end_self()

    threading.Thread(target=watch, name="smug-opt-exit-with-parent", daemon=True).start()


def _end_self() -> None:
    end_descendants()
    if os.getpgid(0) == os.getpid():  # a session of our own (spawn): its helpers go too
        os.killpg(0, signal.SIGKILL)
    os._exit(1)
