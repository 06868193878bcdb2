"""The safe search's entry (:func:`search`), and the search over several processes: the
tree is split once, each share searched alone.

The search (:mod:`smug_opt.safe_search.search`) runs in this process, best bound first,
until :data:`OPEN_PER_WORKER` nodes per worker are open (its root cuts, and HiGHS's verified
cuts when they are due, already in its LP); the open nodes, by their safe bounds, are dealt
out in a snake (:func:`_dealt`), and each worker (a fresh interpreter, started while the
first phase runs)
searches its share with the same cuts, the incumbent and the pseudo-costs learnt so far, in
the order ``Settings.depth_first`` says. (A depth-first first phase would leave the
siblings along one dive open: shares of very unequal size.) Shares are fixed, not stolen, so what each
worker explores does not depend on the machine's load.

Every share is a set of disjoint subtrees, so the problem is settled when every share is:
each proved that its subtrees hold no solution better than the incumbent it ended with, and
the best of those incumbents is then the optimum. The node and LP limits are divided
among the workers; the deadline is shared.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from smug_opt.deadline import Deadline
from smug_opt.ir import Problem
from smug_opt.safe_search.covers import Cut
from smug_opt.safe_search.search import (
    SearchOutcome,
    Settings,
    _GaveUp,
    _Node,
    _Search,
    search_in_one_process,
)
from smug_opt.spawn import Child, kill_group, spawn
from smug_opt.verification import Verification, verify

__all__ = ["OPEN_PER_WORKER", "Paused", "resume", "search", "search_in_parallel", "search_pausable",
           "search_share"]

OPEN_PER_WORKER = 16
"""Open nodes per worker at the split: more even shares for a longer first phase."""


@dataclass(frozen=True)
class _Share:
    """What one worker needs: the problem, the incumbent's point, the LP's cuts, the
    pseudo-costs, its settings, the deadline and its nodes."""

    problem: Problem
    incumbent: np.ndarray | None
    cuts: list[Cut]
    pc_sum: np.ndarray
    pc_count: np.ndarray
    settings: Settings
    deadline: Deadline  # pickled as a wall-clock moment
    nodes: list[_Node]


def search_share(share: _Share) -> SearchOutcome:
    """One worker's search of its nodes (in its own process: :mod:`smug_opt.safe_search.share_worker`)."""
    incumbent = None if share.incumbent is None else verify(share.problem, share.incumbent)
    s = _Search(share.problem, incumbent, share.deadline, share.settings)
    s.add_cuts(share.cuts)
    s.pc_sum[:], s.pc_count[:] = share.pc_sum, share.pc_count
    try:
        s.run(start=share.nodes)
    except _GaveUp as stop:
        return s.outcome(False, str(stop))
    return s.outcome(True)


def search(problem: Problem, incumbent: Verification | None, deadline: Deadline,
           settings: Settings | None = None) -> SearchOutcome:
    """Prove ``incumbent`` optimal for ``problem`` (no ReLUs), or find the optimum, by
    ``deadline`` (:mod:`smug_opt.safe_search.search`). ``incumbent`` None: also prove
    infeasibility. ``settings.workers`` above 1: the tree is split among that many processes."""
    settings = settings or Settings()
    if settings.workers > 1:
        return search_in_parallel(problem, incumbent, deadline, settings)
    return search_in_one_process(problem, incumbent, deadline, settings)


def search_in_parallel(problem: Problem, incumbent: Verification | None, deadline: Deadline,
                       settings: Settings) -> SearchOutcome:
    """:func:`search` with ``settings.workers`` processes, started (each importing smug_opt,
    ~1 s) while this process runs the first phase."""
    with _Workers(settings.workers) as started:
        s = _Search(problem, incumbent, deadline, replace(settings, depth_first=False))
        return _split(s, started, settings, ())


def _split(s: _Search, started: _Workers, settings: Settings, start: Sequence[_Node]) -> SearchOutcome:
    """``s`` run (from ``start``, or its root) until enough nodes are open, then those
    nodes dealt out to the ``started`` workers."""
    workers = settings.workers
    try:
        open_nodes = s.run(start=start, until_open=OPEN_PER_WORKER * workers)
    except _GaveUp as stop:
        return s.outcome(False, str(stop))
    if not open_nodes:
        return s.outcome(True)
    open_nodes.sort(key=lambda n: n.estimate)
    share_settings = replace(settings, workers=1, cut_rounds=0, highs_cuts_after=-1,
                             max_nodes=max(settings.max_nodes - s.nodes, 0) // workers,
                             max_lps=max(settings.max_lps - s.lp.lps, 0) // workers)
    shares = [_Share(s.problem, None if s.best is None else s.best.x, s.cuts, s.pc_sum, s.pc_count,
                     share_settings, s.deadline, share) for share in _dealt(open_nodes, workers)]
    return _combined(s, started.search(shares))


@dataclass(frozen=True)
class Paused:
    """A one-process search stopped by a limit, and its open nodes (every node it had not
    closed: the queue and the node it was solving), from which :func:`resume` goes on."""

    search: _Search
    nodes: list[_Node]


def search_pausable(problem: Problem, incumbent: Verification | None, deadline: Deadline,
                    settings: Settings) -> tuple[SearchOutcome, Paused | None]:
    """:func:`search`, and, when a one-process search stops at a limit with open nodes,
    where :func:`resume` takes it up (so a search given more time does not solve its first
    LPs again)."""
    if settings.workers > 1:
        return search_in_parallel(problem, incumbent, deadline, settings), None
    s = _Search(problem, incumbent, deadline, settings)
    try:
        s.run()
    except _GaveUp as stop:
        return s.outcome(False, str(stop)), _paused(s)
    return s.outcome(True), None


def resume(paused: Paused, deadline: Deadline, settings: Settings) -> tuple[SearchOutcome, Paused | None]:
    """The paused search continued from its open nodes with ``settings`` (its limits count
    the work done before the pause) by ``deadline``; its incumbent, cuts and pseudo-costs
    carry over. HiGHS's cuts join now when ``settings`` has them due and they are not in yet.
    ``settings.workers`` above 1: the open nodes are split among that many processes.

    Every node the search closed was closed rigorously against an incumbent at least as
    good as the one it has now, so the open nodes are all that is left to decide."""
    s = paused.search
    h = s.settings.highs_cuts_after
    cuts_in = 0 <= h < s.nodes
    due = settings.highs_cuts_after
    now = not cuts_in and 0 <= due <= s.nodes
    s.settings = replace(settings, highs_cuts_after=-1 if cuts_in or now else due)
    s.deadline = deadline
    if now:  # with the new settings' rounds and deadline
        s.add_highs_cuts()
    s.queue.clear()
    s.current = None
    nodes = sorted(paused.nodes, key=lambda n: -n.estimate)  # depth first: the lowest bound first
    if settings.workers > 1:
        with _Workers(settings.workers) as started:
            s.settings = replace(s.settings, depth_first=False)
            return _split(s, started, settings, nodes), None
    try:
        s.run(start=nodes)
    except _GaveUp as stop:
        return s.outcome(False, str(stop)), _paused(s)
    return s.outcome(True), None


def _paused(s: _Search) -> Paused | None:
    """``s``, stopped by :class:`_GaveUp`, with its open nodes (None when it stopped before
    its root was queued: nothing to go on from)."""
    nodes = [node for _, _, node in s.queue] + ([s.current] if s.current is not None else [])
    return Paused(s, nodes) if nodes else None


def _dealt(nodes: list[_Node], workers: int) -> list[list[_Node]]:
    """``nodes`` (sorted by their safe bounds) dealt out in a snake, ``0, 1, ..., w-1, w-1,
    ..., 0, 0, 1, ...``: the open nodes after the first phase are the siblings along one dive,
    the lowest bounds the largest subtrees, and a plain turn (``nodes[k::w]``) gave the first
    worker the largest of each round (headline instance: shares of 16,328 and 12,200 nodes;
    dealt in a snake 14,600 and 14,446)."""
    shares: list[list[_Node]] = [[] for _ in range(workers)]
    for i, node in enumerate(nodes):
        turn, seat = divmod(i, workers)
        shares[seat if turn % 2 == 0 else workers - 1 - seat].append(node)
    return shares


class _Workers:
    """Fresh interpreters (:func:`smug_opt.spawn.spawn`, never a fork: HiGHS and TensorFlow
    do not survive one), one per share, each ended on the way out."""

    def __init__(self, count: int) -> None:
        self.children: list[Child] = []
        try:
            for _ in range(count):
                self.children.append(spawn("smug_opt.safe_search.share_worker"))
        except BaseException:
            self.__exit__()
            raise

    def __enter__(self) -> _Workers:
        return self

    def __exit__(self, *exc: object) -> None:
        for worker in self.children:  # ended before its socket closes: no EOF for it to report
            if worker.proc.poll() is None:
                kill_group(worker.proc)
                worker.proc.wait()
            worker.conn.close()

    def search(self, shares: list[_Share]) -> list[SearchOutcome]:
        """Each share searched by a worker of its own, all at once."""
        for worker, share in zip(self.children, shares, strict=True):
            worker.conn.send(share)
        outcomes = []
        for worker in self.children:
            try:
                outcome = worker.conn.recv()
            except EOFError:  # it ended without an answer
                outcome = None
            if worker.proc.wait() != 0 or outcome is None:
                raise RuntimeError(f"a safe-search worker failed (exit status {worker.proc.returncode})")
            outcomes.append(outcome)
        return outcomes


def _combined(s: _Search, outcomes: list[SearchOutcome]) -> SearchOutcome:
    """The first phase ``s`` and the workers' outcomes as one."""
    found = [o.best for o in outcomes if o.best is not None] + ([s.best] if s.best is not None else [])
    best = min(found, key=lambda v: v.objective, default=None)
    proven = all(o.proven for o in outcomes)
    bounds = [o.bound for o in outcomes if not o.proven]
    bound = None if proven or any(b is None for b in bounds) else min(b for b in bounds if b is not None)
    return SearchOutcome(proven, best, s.nodes + sum(o.nodes for o in outcomes),
                         s.lp.lps + sum(o.lps for o in outcomes),
                         s.fixings + sum(o.fixed_by_reduced_costs for o in outcomes),
                         time.monotonic() - s.start, "; ".join(o.why for o in outcomes if o.why),
                         s.closed_by_propagation + sum(o.closed_by_propagation for o in outcomes),
                         s.fixed_by_propagation + sum(o.fixed_by_propagation for o in outcomes), bound)
