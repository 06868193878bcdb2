"""HiGHS's verified root cuts for certification's safe search, computed while the solve runs.

``solve(..., certify=True)`` on one HiGHS thread leaves the second core idle until
certification starts, and the safe search's hard trees shrink with more rounds of HiGHS's
root cuts (headline instance's part, two workers: 29,077 nodes after one round, 16,183
after five) that cost ~4 CPU s a round before the tree can be split. So while the solve
runs, a process of its own (:mod:`smug_opt.safe_search.ahead_worker`) strengthens the
problem as certification will and runs up to :data:`AHEAD_ROUNDS` rounds
(:func:`~smug_opt.safe_search.verified_cuts.root_cut_rounds`) on each part the search will
take, sending each round's new proven cuts (read by a thread of the solve's process as they
come). When the solve ends the process is ended and the rounds finished are taken
(:meth:`CutsAhead.collect`: by the parts' fingerprints, so only where certification
searches the same problem); a search on such a
part takes them at its root (:class:`~smug_opt.safe_search.search.Settings`'
``highs_cuts_after`` becomes 0). Every cut was proven by the part's rows (one row, or probing), as
before: only when the search gets them depends on the machine, never what it proves.
"""

from __future__ import annotations

import threading
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING

from smug_opt.deadline import Deadline
from smug_opt.ir import Problem
from smug_opt.spawn import Child, kill_group, spawn

if TYPE_CHECKING:
    from smug_opt.safe_search.covers import Cut

__all__ = ["AHEAD_ROUNDS", "MIN_BINARIES", "CutsAhead", "cuts_ahead", "searched_problems"]

AHEAD_ROUNDS = 10
"""Rounds of HiGHS's root computed ahead for each part, as many as the solve leaves time
for (each is sent when done; the helper is ended when the solve returns). Headline
instance's part, two workers (benchmarks/certify/headline_certify_cnn-d0-c1-k100-g0.5.md):
5 rounds (179 cuts, 17.0 CPU s) leave 16,183 nodes and ~47 CPU s of search, 10 rounds
(234 cuts, 37.2 CPU s) 10,523 nodes and ~34."""

MIN_BINARIES = 100
"""Problems (and parts) with fewer binaries get no cuts ahead: their searches are short,
and the solve's process would start a helper for nothing."""


def searched_problems(problem: Problem, min_binaries: int) -> list[Problem]:
    """The problems certification's safe search takes for ``problem`` (its strengthened parts,
    or itself), at least ``min_binaries`` binaries each, the largest first."""
    from smug_opt.strengthen.reuse import strengthen_reused

    s = strengthen_reused(problem)
    problems = [part.problem for part in s.parts] if s.applied else [problem]
    large = [p for p in problems if int(p.binary.sum()) >= min_binaries]
    return sorted(large, key=lambda p: -int(p.binary.sum()))


class CutsAhead:
    """The helper process computing the cuts; :meth:`collect` takes what it finished. It
    ends itself once its resident memory passes ``limit_mb`` (the caller's worker budget;
    None: no budget). A thread of this process reads its messages as they come (each
    round's new cuts), so the helper never waits on a full socket buffer."""

    def __init__(self, problem: Problem, deadline: Deadline, rounds: int = AHEAD_ROUNDS,
                 min_binaries: int = MIN_BINARIES, limit_mb: float | None = None) -> None:
        self.child: Child | None = spawn("smug_opt.safe_search.ahead_worker")
        self._received: dict[bytes, tuple[int, list[Cut]]] = {}
        self._lock = threading.Lock()
        left = deadline.seconds_left(0.0)
        seconds = 3600.0 if left is None else left
        try:
            self.child.conn.send((problem, rounds, seconds, min_binaries, limit_mb))
        except BaseException:
            self.close()
            raise
        self._reader = threading.Thread(target=self._read, args=(self.child.conn,), name="cuts-ahead-reader",
                                        daemon=True)
        self._reader.start()

    def _read(self, conn: Connection) -> None:
        """Put each part's rounds together as they arrive, until the helper ends."""
        try:
            while True:
                key, rounds, new = conn.recv()
                with self._lock:
                    _, cuts = self._received.get(key, (0, []))
                    self._received[key] = (rounds, cuts + new)
        except (EOFError, OSError):  # it ended (an error, every part done, or ended by close)
            pass

    def received(self) -> dict[bytes, tuple[int, list[Cut]]]:
        """What has arrived so far: each part's rounds done and cuts, by fingerprint."""
        with self._lock:
            return dict(self._received)

    def collect(self) -> int:
        """Remember the rounds finished so far, end the helper; the number of cuts taken."""
        from smug_opt.safe_search.verified_cuts import remember

        self.close()
        latest = self.received()
        for key, (rounds, cuts) in latest.items():
            remember(key, rounds, cuts, ahead=True)
        return sum(len(cuts) for _, cuts in latest.values())

    def close(self) -> None:
        """End the helper (at once: it only computes) and the thread reading it."""
        child, self.child = self.child, None
        if child is None:
            return
        if child.proc.poll() is None:
            kill_group(child.proc)
        child.proc.wait()
        reader = getattr(self, "_reader", None)
        if reader is not None:
            reader.join()  # the helper's end of the socket is closed: its read ends
        child.conn.close()


def cuts_ahead(problem: Problem, deadline: Deadline, memory_limit_mb: float | None) -> CutsAhead | None:
    """The cuts computed ahead for ``problem``'s certification, when its safe search may
    need them (no ReLUs, rows, :data:`MIN_BINARIES` binaries, too many to enumerate) and
    HiGHS is installed; else None. The helper keeps to the solve's worker budget
    ``memory_limit_mb`` (None: no budget)."""
    from smug_opt.exact_enumeration import enumerable

    if (problem.num_relus or not problem.num_rows or int(problem.binary.sum()) < MIN_BINARIES
            or enumerable(problem) or deadline.passed(1.0)):
        return None
    try:
        import highspy  # noqa: F401
    except ImportError:
        return None
    try:
        return CutsAhead(problem, deadline, limit_mb=memory_limit_mb)
    except OSError:  # the helper did not start, or died before it read the problem: no cuts ahead
        return None
