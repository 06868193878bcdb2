"""Solve a strengthened problem part by part and answer for the original problem.

Each part is solved by the step this one wraps (:class:`smug_opt.step.Step`: one
backend's loop, or a race);
the parts' solutions are put together by the postsolve map and verified exactly against
the *original* problem; the bound is the sum of the parts' proven bounds plus the cost of
the cells fixed on (rounded down), valid because some optimal solution of the original
survives every fixing and no cut removes it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import fields, replace
from fractions import Fraction
from types import MappingProxyType
from typing import Any

import numpy as np

from smug_opt.backend import Status
from smug_opt.backend_choice import BackendChoice, ChoiceKind
from smug_opt.claims import meets_bound, objective_tolerance
from smug_opt.deadline import Deadline
from smug_opt.ir import Problem
from smug_opt.result import Attempt, Proof, SolveResult, Strengthening, Timings, relative_gap
from smug_opt.step import Step
from smug_opt.strengthen import neighbourhood_search as search
from smug_opt.strengthen.bundles import bundled, weight
from smug_opt.strengthen.presolve import Part, Pieces, Strengthened
from smug_opt.strengthen.reuse import strengthen_and_remember
from smug_opt.verification import Verification, snap_binaries, verify

__all__ = ["PART_RACE", "PART_Z3_EXTRAS", "SEARCHED_PARTNERS", "SMALL_PART_Z3_EXTRAS", "is_large",
           "part_choice", "part_extras", "searched", "searched_partners", "solve_strengthened"]

MIN_RETRY_SECONDS = 0.5
"""Time left below which the second pass does not start another part."""

MIN_PART_SECONDS = 2.0
"""The least share a part gets while that much time is left: hundreds of tiny parts (a 3x3
stem has 340) would otherwise give each a share shorter than an isolated worker's start on
a busy machine; the first part killed that way ended the whole solve with no solution.
A part that still ends with no answer is solved once more while time is left."""

RETRY_SHARE = 0.5
"""The share of the time left for that second try (a fresh worker's start at load 10 took
more than 2 s, twice in a row, on the 3x3 stem)."""

PART_RACE = ("highs", "z3")
"""What ``auto`` races on the strengthened parts, whatever their size: with integer rows the
parts are pseudo-Boolean, where z3 proves what CBC (``auto``'s partner of HiGHS below 3,000
rows) does not (benchmarks/bias_free_stems/README.md, "Racing z3 on every part"). Parts of
at least ``neighbourhood_search.MIN_CELLS`` cells race z3 against the search instead
(:func:`searched`)."""


PART_Z3_EXTRAS: Mapping[str, Any] = MappingProxyType({"maxres.max_core_size": 1000})
"""z3's settings where it solves strengthened parts (the caller's own extras win): its
core-guided MaxSAT (maxres) stops a batch of cores at 3 by default; batches of up to 1,000
disjoint cores lift the bound of ResNet50's largest part (2,661 cells) from 561 to 575 in
30 s, with a better incumbent (benchmarks/bias_free_stems/README.md, "z3's core batches")."""


SMALL_PART_Z3_EXTRAS: Mapping[str, Any] = MappingProxyType({"core.minimize": True})
"""z3's settings, over :data:`PART_Z3_EXTRAS`, on the parts that are not large
(:func:`is_large`): each core made minimal before maxres relaxes it, so one round's disjoint
cores are many and small. On `china`'s 536-cell part (60 s each, load 9-10) it proves the
optimum 187 in 15 s where z3 without it stalls at bound 182 (totalizer or sorting networks
for its PB rows: 186 / 182; rc2: 184; HiGHS 165, SCIP 178). On the large parts every core's
minimisation costs seconds: DenseNet121's 2,914-cell part ends at bound 21 against 549
(benchmarks/bias_free_stems/README.md, "Minimal cores on the smaller parts")."""


def is_large(part: Part) -> bool:
    """Whether ``part`` is large: at least ``neighbourhood_search.MIN_CELLS`` cells (the
    search runs beside z3 there, and z3 keeps its cores as found)."""
    return part.columns.size >= search.MIN_CELLS


def part_choice(choice: BackendChoice) -> BackendChoice:
    """The backends for the strengthened parts: :data:`PART_RACE` for ``auto`` when both are
    usable, else ``choice`` as given."""
    from smug_opt.registry import available_backends

    if choice.kind is not ChoiceKind.AUTO or not set(PART_RACE) <= set(available_backends()):
        return choice
    return BackendChoice(ChoiceKind.RACE, PART_RACE)


def searched(part: Part, choice: BackendChoice, extras: Mapping[str, Any] | None = None) -> bool:
    """Whether ``part``, solved on ``choice`` (:func:`part_choice`) with the solver
    ``extras``, races z3 against the neighbourhood search
    (:mod:`smug_opt.strengthen.neighbourhood_search`) rather than HiGHS: :data:`PART_RACE`
    parts of at least ``MIN_CELLS`` cells, unless an extra is one z3 does not take (a
    HiGHS option: that race would have no backend to give it to)."""
    if choice != BackendChoice(ChoiceKind.RACE, PART_RACE) or not is_large(part):
        return False
    if not (part.problem.binary.all() and search.usable()):
        return False
    from smug_opt.portfolio import unaccepted_extras

    return not unaccepted_extras(searched_partners(), extras or {})


SEARCHED_PARTNERS = ("z3", "rc2")
"""What the neighbourhood search races on a large part (those usable here; z3 always is where
the search is): their cores give the bound there, HiGHS's solutions are the search's start.
z3's cores stall 7 below the optimum of DenseNet121's stem part, which RC2 proves; RC2 does
not finish `china`'s 536-cell part, which z3 proves (benchmarks/bias_free_stems/README.md,
"RC2 beside z3")."""


def searched_partners() -> tuple[str, ...]:
    """The backends of :data:`SEARCHED_PARTNERS` usable here, in order."""
    from smug_opt.registry import available_backends

    usable = set(available_backends())
    return tuple(name for name in SEARCHED_PARTNERS if name in usable)


def _solve_part(part: Part, steps: tuple[Step, Step], choice: BackendChoice, deadline: Deadline,
                start: np.ndarray | None, extras: Mapping[str, Any] | None) -> SolveResult:
    """One solve of ``part`` with ``steps`` (for the other parts, for large ones:
    :func:`is_large`): with the neighbourhood search beside it where :func:`searched` says
    so, else on ``choice``. Every solve of a part (its first, the retry of one left without
    an answer, the second pass) goes through here."""
    solve_part = steps[is_large(part)]
    if searched(part, choice, extras):
        return _solve_searched(part.problem, solve_part, deadline, start)
    return solve_part(part.problem, choice, deadline, start)


def _solve_searched(problem: Problem, solve_part: Step, deadline: Deadline,
                    start: np.ndarray | None) -> SolveResult:
    """The race of :func:`searched_partners` on ``problem`` with the neighbourhood search
    beside it; the better solution wins, and meets the race's bound to prove the part."""
    from smug_opt.registry import backend_class

    partners = searched_partners()
    with search.NeighbourhoodSearch(problem, deadline, start) as running:
        result = solve_part(problem, BackendChoice(ChoiceKind.RACE, partners), deadline, start)
        found, windows = running.stop()
    return _with_found(problem, result, found, windows,
                       exact_bound=all(backend_class(name).capabilities.exact for name in partners))


def _with_found(problem: Problem, result: SolveResult, found: Verification | None, windows: int,
                *, exact_bound: bool) -> SolveResult:
    """``result`` with the search's verified solution ``found`` where it is better, proven
    optimal when it meets ``result``'s bound: exactly (:attr:`Proof.EXACT`) when that bound
    is an exact backend's (``exact_bound``) and the exact objective is at most it, else
    within the float tolerance (:attr:`Proof.SOLVER`)."""
    note = f"neighbourhood search: {windows} windows"
    if found is None or not found.ok or result.status is Status.INFEASIBLE:
        return result.with_note(note)
    objective = float(found.objective)
    if result.objective is not None and result.objective <= objective:
        return result.with_note(note)
    proof = _proof(problem, found.objective, result.bound, exact_bound)
    bound = result.bound if result.bound is None else min(result.bound, objective)
    return result.with_note(f"{note}, its solution {objective:g} used",
                            status=Status.FEASIBLE if proof is None else Status.OPTIMAL, x=found.x,
                            objective=objective, bound=bound, gap=relative_gap(objective, bound),
                            verified=True, verification=found.summary(), proof=proof)


def _proof(problem: Problem, objective: Fraction, bound: float | None, exact_bound: bool) -> Proof | None:
    """How a verified solution of exact ``objective`` of the part ``problem`` is proven
    optimal by ``bound``, by the core's rule (:func:`~smug_opt.claims.meets_bound`): EXACT on
    an exact backend's bound, SOLVER on a float solver's; None: not proven."""
    if bound is None or not math.isfinite(bound) or not meets_bound(
            objective, bound, objective_tolerance(problem), exact_bound=exact_bound,
            determined_by_binaries=problem.determined_by_binaries):
        return None
    return Proof.EXACT if exact_bound else Proof.SOLVER


def part_extras(choice: BackendChoice, extras: Mapping[str, Any], *, large: bool) -> dict[str, Any]:
    """The backend extras for the strengthened parts solved on ``choice``, ``large`` ones
    (:func:`is_large`) or the others: ``extras`` over :data:`PART_Z3_EXTRAS` (and, for the
    others, :data:`SMALL_PART_Z3_EXTRAS`) when z3 solves them (:func:`part_choice`), else
    ``extras``."""
    if "z3" not in part_choice(choice).names:
        return dict(extras)
    return {**PART_Z3_EXTRAS, **({} if large else SMALL_PART_Z3_EXTRAS), **extras}


def solve_strengthened(problem: Problem, pieces: Pieces, solve_part: Step, choice: BackendChoice,
                       deadline: Deadline, *, solver: str, start: np.ndarray | None = None,
                       solve_whole: Step | None = None, solve_large: Step | None = None,
                       extras: Mapping[str, Any] | None = None) -> SolveResult:
    """Strengthen ``problem``, solve its parts (light ones packed together:
    :mod:`smug_opt.strengthen.bundles`) with ``solve_part`` on ``choice``
    (:func:`part_choice`; ``solve_large``, default ``solve_part``, solves the large parts:
    :func:`is_large`; ``solve_whole``, default ``solve_part``, solves the problem as
    stated when strengthening does not apply) by ``deadline`` (smallest first, each
    with a share of the remaining time: by size, but at least an equal share, so a tiny
    part is not starved of a solver's start-up time) and return one verified result.
    Parts left unproven within their share get the time the others left over
    (:func:`_second_pass`)."""
    begun = time.monotonic()
    time_limit = deadline.remaining()
    prepared = strengthen_and_remember(problem, pieces)  # certification reuses it
    if prepared.applied:
        prepared = replace(prepared, parts=tuple(bundled(prepared.parts)))
        parts_choice, steps = part_choice(choice), (solve_part, solve_large or solve_part)
    else:  # one part: the problem as stated
        parts_choice, steps = choice, (solve_whole or solve_part,) * 2
    start, notes = _checked_start(problem, prepared, start)
    results: list[SolveResult] = []
    weights = [weight(p) for p in prepared.parts]
    for k, part in enumerate(prepared.parts):
        share = deadline
        if deadline.at is not None:
            if deadline.passed():
                break
            left = len(prepared.parts) - k
            share = _at_least(deadline.share(max(weights[k] / sum(weights[k:]), 1 / left)), deadline)
        part_start = None if start is None else np.concatenate(
            [start[part.columns], np.ones(part.carried.size)])
        result = _solve_part(part, steps, parts_choice, share, part_start, extras)
        if result.status is Status.NO_SOLUTION and not deadline.passed(MIN_PART_SECONDS):
            # its share ended before any answer (a worker replaced, whose start on a busy
            # machine takes seconds): once more with half of what is left, rather than give up
            again = _solve_part(part, steps, parts_choice, deadline.share(RETRY_SHARE),
                                part_start, extras)
            result = _better(result, again)
        results.append(result)
        if result.status in (Status.INFEASIBLE, Status.ERROR) or not result.has_solution:
            break
    _second_pass(prepared.parts, results, steps, parts_choice, deadline, extras)
    return _combine(prepared, results, begun, time_limit, str(choice), solver, notes)


def _at_least(share: Deadline, deadline: Deadline) -> Deadline:
    """``share`` lengthened to :data:`MIN_PART_SECONDS`, within ``deadline``."""
    if (share.remaining() or 0.0) >= MIN_PART_SECONDS:
        return share
    return deadline if (deadline.remaining() or 0.0) <= MIN_PART_SECONDS else Deadline.after(MIN_PART_SECONDS)


def _second_pass(parts: Sequence[Part], results: list[SolveResult], steps: tuple[Step, Step],
                 choice: BackendChoice, deadline: Deadline, extras: Mapping[str, Any] | None) -> None:
    """Solve again, from their best solution, the parts that ended FEASIBLE (unproven)
    while time is left: a share can be eaten by a busy machine or a worker's start, or a
    part be harder than its size says, and the parts after it may leave most of the limit
    unused. A part whose race had a worker killed (z3 overrunning its share while HiGHS
    answered) counts like any other. Each gets an equal share of what is left; a result is
    only improved."""
    if deadline.at is None or len(results) < len(parts):
        return
    unproven = [k for k, r in enumerate(results)
                if r.status is Status.FEASIBLE and r.has_solution]
    for n, k in enumerate(unproven):
        if deadline.passed(MIN_RETRY_SECONDS):
            return
        again = _solve_part(parts[k], steps, choice, deadline.share(1 / (len(unproven) - n)),
                            results[k].values(), extras)
        results[k] = _better(results[k], again)


def _better(first: SolveResult, again: SolveResult) -> SolveResult:
    """The better of two solves of one part (proven optimal, else the lower objective),
    with the higher of their bounds and both solves' attempts and times."""
    improves = again.has_solution and again.objective is not None and (
        again.status is Status.OPTIMAL or first.objective is None or again.objective < first.objective)
    winner = again if improves else first
    bounds = [b for b in (first.bound, again.bound) if b is not None and math.isfinite(b)]
    bound = max(bounds) if bounds else winner.bound
    if bound is not None and winner.objective is not None:
        bound = min(bound, winner.objective)
    times = Timings(**{f.name: getattr(first.times, f.name) + getattr(again.times, f.name)
                       for f in fields(Timings)})
    peaks = [p for p in (first.peak_memory_mb, again.peak_memory_mb) if p is not None]
    return replace(winner, bound=bound, attempts=first.attempts + again.attempts, times=times,
                   peak_memory_mb=max(peaks) if peaks else None)


def _checked_start(problem: Problem, prepared: Strengthened, start: np.ndarray | None
                   ) -> tuple[np.ndarray | None, list[str]]:
    """The start, if it holds for the original problem, with its fixed cells set to their
    fixed values (a dominated cell's move keeps it feasible; checked again exactly)."""
    if start is None:
        return None, []
    check = verify(problem, snap_binaries(problem, start))
    if not check.ok:
        return None, [f"start rejected: {check.summary()}"]
    fixed = prepared.fixed >= 0
    moved = check.x.copy()
    moved[fixed] = prepared.fixed[fixed]
    again = verify(problem, moved)
    if not again.ok:
        return None, ["start not used: it fails once the strengthening's fixings are applied"]
    return again.x, []


def _combine(prepared: Strengthened, results: list[SolveResult], start: float,
             time_limit: float | None, backend: str, solver: str, notes: list[str]) -> SolveResult:
    original = prepared.original
    messages = notes + [r.message for r in results if r.message]
    x: np.ndarray | None = None
    objective: float | None = None
    verified: bool | None = None
    summary = "no solution to verify"
    verify_s = 0.0
    complete = len(results) == len(prepared.parts)
    if complete and all(r.has_solution for r in results):
        t = time.perf_counter()
        check = verify(original, prepared.expand([r.values() for r in results]))
        verify_s = time.perf_counter() - t
        verified, summary = check.ok, check.summary()
        if check.ok:
            x, objective = check.x, float(check.objective)
        else:  # cannot happen unless the strengthening is wrong: never report it
            messages.append(f"the parts' solution fails the original problem: {summary}")
    bound = _bound(prepared, results)
    if any(r.status is Status.INFEASIBLE for r in results):
        status, bound = Status.INFEASIBLE, math.inf
    elif x is not None and objective is not None:
        proven = all(r.status is Status.OPTIMAL for r in results)
        status = Status.OPTIMAL if proven else Status.FEASIBLE
        if bound is not None and bound > objective:
            bound = objective
    elif any(r.status is Status.ERROR for r in results):
        status = Status.ERROR
    else:
        status = Status.NO_SOLUTION
    if not complete and status is not Status.INFEASIBLE:
        messages.append("time limit reached before every part was solved")
    proof = None
    if status in (Status.OPTIMAL, Status.INFEASIBLE):
        deciding = [r for r in results if r.status is status] if status is Status.INFEASIBLE \
            else results
        proof = Proof.EXACT if all(r.proof == Proof.EXACT for r in deciding) else Proof.SOLVER
    gap = relative_gap(objective, bound)
    total = time.monotonic() - start
    seconds = float(prepared.stats.get("seconds", 0.0))
    lower = sum(r.times.lower for r in results)
    solve = sum(r.times.solve for r in results)
    verify_total = sum(r.times.verify for r in results) + verify_s
    times = Timings(lower=lower, solve=solve, verify=verify_total, strengthen=seconds,
                    overhead=max(total - lower - solve - verify_total - seconds, 0.0), total=total)
    attempts: tuple[Attempt, ...] = tuple(a for r in results for a in r.attempts)
    peaks = [r.peak_memory_mb for r in results if r.peak_memory_mb is not None]
    stats = Strengthening(**{**prepared.stats, "applied": prepared.applied, "seconds": seconds,
                             "pieces": tuple(prepared.stats["pieces"]),
                             "parts_solved": sum(r.status is Status.OPTIMAL for r in results)})
    return SolveResult(
        status=status, x=x, objective=objective, bound=bound, gap=gap,
        backend=backend, solver=results[0].solver if results else solver,
        verified=verified, verification=summary, message="; ".join(dict.fromkeys(messages)),
        times=times, time_limit=time_limit, attempts=attempts,
        incumbents=results[-1].incumbents if len(results) == 1 else (),
        peak_memory_mb=max(peaks) if peaks else None,
        killed=any(r.killed for r in results), proof=proof, metadata=dict(original.metadata),
        strengthening=stats,
    )


def _bound(prepared: Strengthened, results: list[SolveResult]) -> float | None:
    """Σ part bounds + the fixed cells' cost, exactly, rounded down to a float; parts
    without a bound count with their least possible cost (their negative costs)."""
    total = prepared.offset
    for k, part in enumerate(prepared.parts):
        result = results[k] if k < len(results) else None
        if result is not None and result.bound is not None and math.isfinite(result.bound):
            total += Fraction(result.bound)
        else:
            costs = part.problem.objective
            total += sum((Fraction(float(c)) for c in costs[costs < 0]), Fraction(0))
    value = float(total)
    if Fraction(value) > total:
        value = float(np.nextafter(value, -np.inf))
    return value

