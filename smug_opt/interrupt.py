"""Termination signals end a command the way Ctrl-C does.

``timeout``, SLURM, systemd, Kubernetes and Dask stop work with SIGTERM (a closed terminal
sends SIGHUP); Python's default for both is to die on the spot, leaving the solver workers
and job processes it started running with no parent. Inside :func:`signals_interrupt`
they raise :class:`Terminated`, a :class:`KeyboardInterrupt`, so every interrupt path
runs (finished work is kept, executors and workers are stopped). Only the command line
installs these handlers: a library never takes over its caller's signals (its children
end themselves when their parent goes, :func:`smug_opt.spawn.exit_with_parent`).
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from types import FrameType

__all__ = ["TERMINATING_SIGNALS", "Terminated", "TerminationState", "signals_interrupt"]

TERMINATING_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP arrived; unwinds like Ctrl-C."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@dataclass
class TerminationState:
    """Which terminating signal arrived, if any (``exit_code``: the shell's ``128 + N``)."""

    signum: int | None = None

    @property
    def exit_code(self) -> int | None:
        return None if self.signum is None else 128 + self.signum


@contextlib.contextmanager
def signals_interrupt() -> Iterator[TerminationState]:
    """While inside (main thread only), the first SIGTERM or SIGHUP raises
    :class:`Terminated`; later ones are ignored while the command cleans up."""
    state = TerminationState()

    def handler(signum: int, frame: FrameType | None) -> None:
        if state.signum is None:
            state.signum = signum
            raise Terminated(signum)

    previous = {sig: signal.signal(sig, handler) for sig in TERMINATING_SIGNALS}
    try:
        yield state
    finally:
        for sig, action in previous.items():
            signal.signal(sig, action)
