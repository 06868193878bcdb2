"""Race several backends on one problem: ``backend="auto"`` and ``backend="a,b,c"``.

A solve strategy over the isolated workers of :mod:`smug_opt.workers`, not a backend: each
raced backend runs the core's usual solve loop (levels, verification, no-good cuts) in its
own warm worker process, all at once. They share one board:

* every improving solution a worker streams is verified exactly and, if it is the best so
  far, becomes the start of every later attempt of the other backends (their solvers take
  it as a starting solution, and so as an objective cutoff, where they accept one);
* every attempt's certified lower bound is posted; as soon as the best verified solution
  meets the best bound (one backend's proof, or one's bound with another's solution) the
  race is decided and the other workers are killed.

The result says which backend proved it (``SolveResult.race``: each backend's status,
objective, bound and time, and which one supplied the proof, the bound and the solution).

Which backends race (``auto``) is chosen from the committed benchmark results
(``benchmarks/results/*``; see ``benchmarks/RESULTS.md``) and shipped in the package as
:data:`RACE_ORDERS_FILE`, which ``benchmarks/portfolio_pairs.py --write-orders`` writes:
for each problem class, the pair whose per-instance best (the virtual best of the two)
came closest to the virtual best of all backends, then the rest by their own shifted
geometric mean, a difference within the file's ``noise`` leaving the order as it was.
Up to ``workers`` backends (default: the CPU count) race; unusable ones are skipped.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from importlib import resources
from typing import Any

import numpy as np

from smug_opt.backend import SolveOptions, Status
from smug_opt.backend_choice import AUTO, BackendChoice, ChoiceKind
from smug_opt.check_memo import CheckMemo
from smug_opt.claims import meets_bound, objective_tolerance
from smug_opt.deadline import Deadline
from smug_opt.ir import Problem
from smug_opt.registry import BackendUnavailableError, UnknownBackendError, backend_class
from smug_opt.result import Proof, RaceEntry, RaceStatus, SolveResult, relative_gap
from smug_opt.solve_loop import SolveLoop
from smug_opt.verification import Verification

__all__ = ["AUTO", "auto_backends", "describe", "is_race", "race", "race_backends", "unaccepted_extras"]

RACE_ORDERS_FILE = "data/race_orders.json"
"""The race orders per problem class, inside the package: written by
``benchmarks/portfolio_pairs.py --write-orders`` from the committed runs it names."""


def _race_orders() -> dict[str, tuple[str, ...]]:
    """Each problem class's race order, from :data:`RACE_ORDERS_FILE`."""
    text = resources.files("smug_opt").joinpath(RACE_ORDERS_FILE).read_text(encoding="utf-8")
    classes = json.loads(text)["classes"]
    orders = {name: tuple(spec["order"]) for name, spec in classes.items()}
    for name, order in orders.items():
        if not order or len(set(order)) != len(order) or not all(isinstance(b, str) and b for b in order):
            raise ValueError(f"{RACE_ORDERS_FILE}: class {name!r} needs distinct backend names, "
                             f"got {order!r}")
    return orders


RACE_ORDERS = _race_orders()

RELU_ORDER = RACE_ORDERS["relu"]
"""Whole-network problems (ReLUs): on fullnet-30s the pair cpsat + highs equals the
virtual best of all five (6/8 solved, SGM 6.8 s; highs alone 5/8, 12.4 s)."""

LARGE_ORDER = RACE_ORDERS["large"]
"""Large first-layer problems (>= LARGE_ROWS rows, paper scale): highs + z3 equals the
virtual best (4/4, SGM 2.30 s; highs alone 2.96 s); CBC and CP-SAT missed k = 5000 or 3000."""

FIRST_LAYER_ORDER = RACE_ORDERS["first_layer"]
"""Other 0/1 problems (MNIST first layer, text, synthetic): highs + mip-cbc solves what the
virtual best solves on mnist-fl-10s (33/36, SGM 1.01 s against 0.93 s; cpsat + mip-cbc
0.97 s is as good within this machine's noise, highs is the virtual best on text and
paper scale, CP-SAT solves 2 of 4 there)."""

LARGE_ROWS = 3000

STOPPED = RaceStatus.STOPPED
"""A raced backend's status when the race was decided before its own solve had ended."""


def is_race(backend: str | BackendChoice) -> bool:
    """Whether ``backend`` names a race (``"auto"`` or a comma-separated list)."""
    return BackendChoice.parse(backend, check=False).is_race


def auto_backends(problem: Problem) -> tuple[str, ...]:
    """The measured preference order of backends for ``problem`` (see the module docs)."""
    if problem.num_relus > 0:
        return RELU_ORDER
    if problem.num_rows >= LARGE_ROWS:
        return LARGE_ORDER
    return FIRST_LAYER_ORDER


def race_backends(problem: Problem, backend: str | BackendChoice, workers: int | None = None) -> list[str]:
    """The backends that race for ``backend`` (``"auto"`` or ``"a,b,c"``): at most
    ``workers`` (default the CPU count) usable ones, in order."""
    limit = workers if workers is not None else (os.cpu_count() or 1)
    if limit < 1:
        raise ValueError(f"workers must be at least 1, got {workers!r}")
    choice = BackendChoice.parse(backend)  # an unknown name raises, listing what is installed
    if choice.kind is ChoiceKind.AUTO:
        names = [name for name in auto_backends(problem) if _usable(name)]
        if not names:
            raise ValueError(f"backend '{AUTO}': none of its backends is usable here "
                             f"({', '.join(auto_backends(problem))}); see `smug-opt backends`")
        return names[:limit]
    return list(choice.names[:limit])


def _usable(name: str) -> bool:
    try:
        backend_class(name)
    except (BackendUnavailableError, UnknownBackendError):
        return False
    return True


@dataclass
class _Entry:
    """One backend's part of the race."""

    name: str
    result: SolveResult | None = None
    finished_at: float | None = None
    bound: float | None = None


class _Board:
    """What the racing solves share: the best verified solution, the best bound, and the
    event that stops them all."""

    def __init__(self, problem: Problem, tolerance: float) -> None:
        self.problem = problem
        self.tolerance = tolerance
        self.lock = threading.Lock()
        self.cancel = threading.Event()
        self.check = CheckMemo(problem)  # each solution verified once, whichever backend has it
        self.best_v: Verification | None = None
        self.best_by: str | None = None
        self.bound: float | None = None
        self.bound_by: str | None = None
        self.exact_bound: float | None = None
        """The best bound an exact backend (``capabilities.exact``) posted."""

    def offer(self, name: str, v: Verification | None) -> None:
        if v is None or not v.ok:
            return
        with self.lock:
            if self.best_v is None or v.objective < self.best_v.objective:
                self.best_v, self.best_by = v, name
        self._check_decided()

    def post_bound(self, name: str, bound: float | None) -> None:
        if bound is None or not math.isfinite(bound):
            return
        exact = backend_class(name).capabilities.exact
        with self.lock:
            if self.bound is None or bound > self.bound:
                self.bound, self.bound_by = bound, name
            if exact and (self.exact_bound is None or bound > self.exact_bound):
                self.exact_bound = bound
        self._check_decided()

    def proven_exactly(self) -> bool:
        """Whether the best verified solution meets an exact backend's bound by the core's
        exact rule (:func:`~smug_opt.claims.meets_bound`): optimal in exact arithmetic,
        whoever found it."""
        with self.lock:
            best, bound = self.best_v, self.exact_bound
        return best is not None and bound is not None and meets_bound(
            best.objective, bound, 0.0, exact_bound=True,
            determined_by_binaries=self.problem.determined_by_binaries)

    def decided(self) -> bool:
        with self.lock:
            return (self.best_v is not None and self.bound is not None
                    and float(self.best_v.objective) <= self.bound + 2 * self.tolerance)

    def _check_decided(self) -> None:
        if self.decided():
            self.cancel.set()


class _Link:
    """One backend's view of the board (the core's :class:`smug_opt.solve_loop.RaceLink`)."""

    def __init__(self, board: _Board, name: str) -> None:
        self.board = board
        self.name = name
        self.cancel = board.cancel
        self.check = board.check

    def best(self) -> Verification | None:
        with self.board.lock:
            return self.board.best_v

    def incumbent(self, x: np.ndarray, objective: float) -> None:
        current = self.best()
        if current is not None and objective >= float(current.objective):
            return
        try:
            v = self.check(x)
        except ValueError:
            return
        self.board.offer(self.name, v)

    def report(self, best: Verification | None, bound: float | None) -> None:
        self.board.offer(self.name, best)
        self.board.post_bound(self.name, bound)


def unaccepted_extras(names: Sequence[str], extras: Mapping[str, Any]) -> list[str]:
    """The solver options in ``extras`` that none of the backends ``names`` declares, sorted:
    a race of ``names`` would have no backend to give them to."""
    return sorted(str(k) for k in extras if not any(k in backend_class(n).options for n in names))


def _check_race_extras(names: list[str], extras: Mapping[str, Any]) -> None:
    """Each raced backend gets the solver options it declares; one that none of them
    declares is a mistake, named before any worker starts."""
    unknown = unaccepted_extras(names, extras)
    if unknown:
        accepted = "; ".join(f"{n}: {', '.join(sorted(backend_class(n).options)) or 'none'}" for n in names)
        raise ValueError(f"no backend of the race ({', '.join(names)}) accepts the option(s) "
                         f"{', '.join(map(repr, unknown))}; they accept: {accepted}")


def race(problem: Problem, backend: str | BackendChoice, options: SolveOptions, *, deadline: Deadline,
         grace: float, memory_limit_mb: float | None, start: np.ndarray | None,
         workers: int | None = None) -> SolveResult:
    """Race the backends ``backend`` names (see :func:`race_backends`) on ``problem`` by
    ``deadline`` and return one verified result: each runs the core's :class:`~smug_opt.solve_loop.SolveLoop`
    in its own isolated worker (a race needs kills)."""
    names = race_backends(problem, backend, workers)
    _check_race_extras(names, options.extras)
    started = time.monotonic()
    board = _Board(problem, objective_tolerance(problem))
    entries = [_Entry(name) for name in names]

    def run(entry: _Entry) -> None:
        cls = backend_class(entry.name)
        own = replace(options, extras={k: v for k, v in options.extras.items() if k in cls.options})
        try:
            solve = SolveLoop(problem, entry.name, cls.solver_version(), cls.levels, own,
                               True, grace, deadline=deadline, exact_backend=cls.capabilities.exact,
                               memory_limit_mb=memory_limit_mb, start=start,
                               race=_Link(board, entry.name))
            entry.result = solve.run()
        except Exception as exc:  # one failing backend must not end the race
            entry.result = _failed(problem, entry.name, options, f"{type(exc).__name__}: {exc}")
        entry.finished_at = time.monotonic() - started
        result = entry.result
        board.offer(entry.name, None if result.x is None else board.check(result.x))
        board.post_bound(entry.name, result.bound if result.status is not Status.INFEASIBLE else None)
        if result.status is Status.OPTIMAL or (result.status is Status.INFEASIBLE
                                               and board.best_v is None):
            board.cancel.set()

    threads = [threading.Thread(target=run, args=(e,), name=f"race-{e.name}", daemon=True)
               for e in entries]
    for thread in threads:
        thread.start()
    while any(thread.is_alive() for thread in threads) and not _settled(board, entries):
        time.sleep(_WAIT_SECONDS)
    # the losers' threads go on killing their workers; the answer does not wait for them
    return _combine(problem, str(backend), entries, board, options, time.monotonic() - started)


_WAIT_SECONDS = 0.005


def _settled(board: _Board, entries: list[_Entry]) -> bool:
    """The answer is known: the best solution meets the best bound, or a backend finished
    with a proof (OPTIMAL, or INFEASIBLE with no verified solution anywhere)."""
    if board.decided():
        return True
    return board.cancel.is_set() and any(
        e.result is not None and e.result.status in (Status.OPTIMAL, Status.INFEASIBLE)
        for e in entries)


def _failed(problem: Problem, name: str, options: SolveOptions, message: str) -> SolveResult:
    from smug_opt.result import Timings

    return SolveResult(status=Status.ERROR, x=None, objective=None, bound=None, gap=None,
                       backend=name, solver="", verified=None, verification="no solution to verify",
                       message=message, times=Timings(), time_limit=options.time_limit,
                       metadata=dict(problem.metadata))


def _combine(problem: Problem, backend: str, entries: list[_Entry], board: _Board,
             options: SolveOptions, wall: float) -> SolveResult:
    """One result from the race: the best verified solution, the best certified bound."""
    results = {e.name: e.result for e in entries if e.result is not None}
    if not results:  # decided by streamed solutions and posted bounds while all still ran
        results = {"": _failed(problem, "", options, "")}
    finished = sorted(entries, key=lambda e: e.finished_at or math.inf)
    proved_by = next((e.name for e in finished if e.result is not None
                      and e.result.status is Status.OPTIMAL), None)
    infeasible_by = next((e.name for e in finished if e.result is not None
                          and e.result.status is Status.INFEASIBLE), None)
    best_v, best_by = board.best_v, board.best_by
    bound, bound_by = board.bound, board.bound_by
    messages = [f"{name}: {r.message}" for name, r in results.items() if r.message and name]
    if infeasible_by is not None and best_v is not None:
        messages.append(f"{infeasible_by} claimed INFEASIBLE, but {best_by} found a verified "
                        "solution: claim discarded")
        infeasible_by = None
    if infeasible_by is not None:
        base = results[infeasible_by]
        status, x, objective, bound, proof = Status.INFEASIBLE, None, None, math.inf, base.proof
        proved_by = infeasible_by
    elif best_v is not None:
        x, objective = best_v.x, float(best_v.objective)
        proven = board.decided()
        status = Status.OPTIMAL if proven else Status.FEASIBLE
        if proven and proved_by is None:
            proved_by = bound_by
        if bound is not None:
            bound = min(bound, objective)
        base = results.get(proved_by or best_by or "", next(iter(results.values())))
        proof = None
        if proven:  # an exact backend's bound met exactly proves it exactly, whoever found x
            proof = Proof.EXACT if board.proven_exactly() else (base.proof or Proof.SOLVER)
    else:
        status = (Status.NO_SOLUTION if any(r.status is not Status.ERROR for r in results.values())
                  else Status.ERROR)
        x = objective = proof = None
        base = next(iter(results.values()))
    gap = relative_gap(objective, bound)
    entries_out = tuple(RaceEntry(
        backend=e.name, status=RaceStatus.of(e.result.status) if e.result else STOPPED,
        objective=e.result.objective if e.result else None,
        bound=e.result.bound if e.result else None,
        seconds=e.finished_at if e.finished_at is not None else wall,
        proved=e.name == proved_by and status in (Status.OPTIMAL, Status.INFEASIBLE),
        best_solution=e.name == best_by and x is not None,
        best_bound=e.name == bound_by and status is not Status.INFEASIBLE,
    ) for e in entries)
    incumbents = tuple(sorted(inc for r in results.values() for inc in r.incumbents))
    attempts = tuple(a for r in results.values() for a in r.attempts)
    solver = "; ".join(f"{e.name}: {backend_class(e.name).solver_version()}" for e in entries)
    times = replace(base.times, total=wall)
    return replace(
        base, status=status, x=x, objective=objective, bound=bound, gap=gap, backend=backend,
        solver=solver, verified=True if x is not None else base.verified,
        verification=best_v.summary() if best_v is not None and x is not None else base.verification,
        message="; ".join(dict.fromkeys(messages)), times=times, attempts=attempts,
        incumbents=incumbents, proof=proof, race=entries_out,
        killed=any(r.killed for r in results.values()),
        peak_memory_mb=max((r.peak_memory_mb for r in results.values()
                            if r.peak_memory_mb is not None), default=None),
    )


def describe(result: SolveResult) -> list[str]:
    """One line per raced backend: what it ended with and what it contributed."""
    lines = []
    for e in result.race:
        roles = [role for role, flag in (("proved it", e.proved), ("best solution", e.best_solution),
                                         ("best bound", e.best_bound)) if flag]
        obj = "-" if e.objective is None else f"{e.objective:g}"
        bound = "-" if e.bound is None else f"{e.bound:g}"
        lines.append(f"{e.backend}: {e.status} objective {obj} bound {bound} after {e.seconds:.2f}s"
                     + (f" ({', '.join(roles)})" if roles else ""))
    return lines

