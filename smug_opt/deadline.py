"""When a solve must end: one point in time (the monotonic clock) that every step of a
solve shares, instead of each recomputing its remaining seconds from a float."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

__all__ = ["Deadline"]


@dataclass(frozen=True)
class Deadline:
    """A moment on :func:`time.monotonic`'s clock, or none (``at`` None: no limit)."""

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

    def remaining(self) -> float | None:
        """Seconds left (negative once passed), or None without a limit."""
        return None if self.at is None else self.at - time.monotonic()

    def passed(self, margin: float = 0.0) -> bool:
        """Whether fewer than ``margin`` seconds are left (never, without a limit)."""
        left = self.remaining()
        return left is not None and left <= margin

    def share(self, fraction: float) -> Deadline:
        """A deadline ``fraction`` of the remaining time from now (no limit stays none)."""
        left = self.remaining()
        return self if left is None else Deadline.after(max(left, 0.0) * fraction)
