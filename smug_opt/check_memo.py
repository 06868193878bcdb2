"""Each solution of a problem verified exactly once, however many backends of a race hold it."""

from __future__ import annotations

import threading

import numpy as np

from smug_opt.ir import Problem
from smug_opt.verification import Verification, snap_binaries, verify

__all__ = ["CheckMemo"]


class CheckMemo:
    """Exact verifications of one problem, kept by solution: a solution seen again (the
    start every raced backend takes, an incumbent a solver streams and then returns as its
    answer) is not verified again, so the checks after the time limit are only of new
    solutions. Thread-safe: one check at a time (a race's threads share one)."""

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        self._lock = threading.Lock()
        self._done: dict[bytes, Verification] = {}

    def __call__(self, x: np.ndarray) -> Verification:
        """``x`` (its binaries snapped to 0/1) verified exactly; ValueError as :func:`verify`."""
        snapped = np.ascontiguousarray(snap_binaries(self.problem, x), dtype=np.float64)
        key = snapped.tobytes()
        with self._lock:
            v = self._done.get(key)
            if v is None:
                v = self._done[key] = verify(self.problem, snapped)
        return v
