"""HiGHS's verified root cuts for certification's safe search, computed while the solve runs.

``solve(..., certify=True)`` on one HiGHS thread leaves the second core idle until
certification starts, and the safe search's hard trees shrink with more rounds of HiGHS's
root cuts (headline instance's part, two workers: 29,077 nodes after one round, 16,183
after five) that cost ~4 CPU s a round before the tree can be split. So while the solve
runs, a process of its own (:mod:`smug_opt.safe_search.ahead_worker`) strengthens the
problem as certification will and runs up to :data:`AHEAD_ROUNDS` rounds
(:func:`~smug_opt.safe_search.verified_cuts.root_cut_rounds`) on each part the search will
take, sending every part's proven cuts after each round. When the solve ends the rounds
finished are taken (:meth:`CutsAhead.collect`: by the parts' fingerprints, so only where
certification searches the same problem) and the process is ended; a search on such a
part takes them at its root (:class:`~smug_opt.safe_search.search.Settings`'
``highs_cuts_after`` becomes 0). Every cut was proven by a single row of the part, as
before: only when the search gets them depends on the machine, never what it proves.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from smug_opt.deadline import Deadline
from smug_opt.ir import Problem
from smug_opt.spawn import Child, default_memory_limit_mb, kill_group, spawn

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
    ends itself once its resident memory passes ``limit_mb`` (None: the default worker
    budget, :func:`~smug_opt.spawn.default_memory_limit_mb`)."""

    def __init__(self, problem: Problem, deadline: Deadline, rounds: int = AHEAD_ROUNDS,
                 min_binaries: int = MIN_BINARIES, limit_mb: float | None = None) -> None:
        self.child: Child | None = spawn("smug_opt.safe_search.ahead_worker")
        left = deadline.seconds_left(0.0)
        seconds = 3600.0 if left is None else left
        limit = default_memory_limit_mb() if limit_mb is None else limit_mb
        try:
            self.child.conn.send((problem, rounds, seconds, min_binaries, limit))
        except BaseException:
            self.close()
            raise

    def collect(self) -> int:
        """Remember the rounds finished so far (the last message of each part), end the
        helper; the number of cuts taken."""
        from smug_opt.safe_search.verified_cuts import remember

        latest: dict[bytes, tuple[int, list[Cut]]] = {}
        try:
            while self.child is not None and self.child.conn.poll(0):
                key, rounds, cuts = self.child.conn.recv()
                latest[key] = (rounds, cuts)
        except (EOFError, OSError):  # it ended (an error, or every part done)
            pass
        finally:
            self.close()
        for key, (rounds, cuts) in latest.items():
            remember(key, rounds, cuts, ahead=True)
        return sum(len(cuts) for _, cuts in latest.values())

    def close(self) -> None:
        """End the helper (at once: it only computes)."""
        child, self.child = self.child, None
        if child is None:
            return
        if child.proc.poll() is None:
            kill_group(child.proc)
        child.proc.wait()
        child.conn.close()


def cuts_ahead(problem: Problem, deadline: Deadline) -> CutsAhead | None:
    """The cuts computed ahead for ``problem``'s certification, when its safe search may
    need them (no ReLUs, rows, :data:`MIN_BINARIES` binaries, too many to enumerate) and
    HiGHS is installed; else None."""
    from smug_opt.exact_enumeration import enumerable

    if (problem.num_relus or not problem.num_rows or int(problem.binary.sum()) < MIN_BINARIES
            or enumerable(problem) or deadline.passed(1.0)):
        return None
    try:
        import highspy  # noqa: F401
    except ImportError:
        return None
    return CutsAhead(problem, deadline)
