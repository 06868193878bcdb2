"""When a solve must end: one point in time, made once from the caller's time limit in
seconds (:meth:`Deadline.after`) and handed down to every step and worker process of the
solve, each asking it what is left, instead of each recomputing its remaining seconds."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

__all__ = ["Deadline"]


@dataclass(frozen=True)
class Deadline:
    """A moment on :func:`time.monotonic`'s clock, or none (``at`` None: no limit).

    Pickled, it travels as a wall-clock (:func:`time.time`) moment and is turned back into
    the receiving process's monotonic clock, so a worker in another process (or on another
    machine) ends at the same wall time as its parent."""

    at: float | None

    @classmethod
    def after(cls, seconds: float | None) -> Deadline:
        """The deadline ``seconds`` from now (None: no limit). Seconds must not be NaN."""
        if seconds is None:
            return cls(None)
        if math.isnan(seconds):
            raise ValueError("a time limit must be a number of seconds or None, got nan")
        return cls(time.monotonic() + seconds)

    @classmethod
    def none(cls) -> Deadline:
        """No limit."""
        return cls(None)

    @classmethod
    def at_wall_time(cls, wall: float | None) -> Deadline:
        """The deadline at :func:`time.time` moment ``wall`` (None: no limit)."""
        return cls(None) if wall is None else cls(time.monotonic() + (wall - time.time()))

    def wall_time(self) -> float | None:
        """This deadline as a :func:`time.time` moment (None: no limit)."""
        return None if self.at is None else time.time() + (self.at - time.monotonic())

    def __reduce__(self) -> tuple[object, tuple[float | None]]:
        return Deadline.at_wall_time, (self.wall_time(),)

    def remaining(self) -> float | None:
        """Seconds left (negative once passed), or None without a limit."""
        return None if self.at is None else self.at - time.monotonic()

    def seconds_left(self, floor: float) -> float | None:
        """Seconds left but at least ``floor`` (a time limit a solver accepts), or None
        without a limit."""
        left = self.remaining()
        return None if left is None else max(left, floor)

    def passed(self, margin: float = 0.0) -> bool:
        """Whether fewer than ``margin`` seconds are left (never, without a limit)."""
        left = self.remaining()
        return left is not None and left <= margin

    def share(self, fraction: float) -> Deadline:
        """A deadline ``fraction`` of the remaining time from now (no limit stays none)."""
        left = self.remaining()
        return self if left is None else Deadline.after(max(left, 0.0) * fraction)

    def capped(self, seconds: float) -> Deadline:
        """This deadline or ``seconds`` from now, whichever comes first."""
        cap = Deadline.after(seconds)
        return cap if self.at is None or (cap.at is not None and cap.at < self.at) else self

    def shifted(self, seconds: float) -> Deadline:
        """This deadline moved ``seconds`` later (earlier when negative); none stays none."""
        return self if self.at is None else Deadline(self.at + seconds)
