"""One backend's solve of one problem: the loop over tightening levels.

Level 0 is a relaxation, so when its solution survives exact verification and the solver
proved it optimal, it is optimal for the problem as stated. Otherwise its bound is kept as
a valid lower bound and the next, more conservative level is tried (after cutting off a
rejected 0/1 assignment, up to :data:`MAX_NOGOOD_CUTS` times), until a solution verifies,
the levels run out or the time limit is reached. A solution that fails verification is
never returned. Each attempt runs in an isolated worker (:mod:`smug_opt.workers`); in a
race the loop shares incumbents and bounds through a :class:`RaceLink`.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import replace
from fractions import Fraction
from typing import Protocol

import numpy as np

from smug_opt.backend import RawResult, SolveOptions, Status
from smug_opt.check_memo import CheckMemo
from smug_opt.claims import (
    BOUND_RELATIVE_ERROR,
    certified_bound,
    meets_bound,
    objective_scale,
    objective_tolerance,
)
from smug_opt.deadline import Deadline
from smug_opt.ir import Problem, Sense
from smug_opt.result import Attempt, Proof, SolveResult, Timings, relative_gap
from smug_opt.verification import Verification, ViolationKind
from smug_opt.workers import AttemptOutcome, run_attempt

__all__ = ["MAX_NOGOOD_CUTS", "RaceLink", "SolveLoop"]

SOLVER_RESERVE = 1.0
"""At most this many seconds of the limit are kept back from the solver itself."""

_MAX_INCUMBENT_CHECKS = 5

FRACTIONAL_BINARY = 1e-6
"""A binary further than this from 0 or 1 in an answer makes the answer's bound unusable
(the solver's integrality tolerances are set to 1e-9)."""

MAX_NOGOOD_CUTS = 8
"""How many rejected level-0 assignments are cut off before moving to margins."""


class RaceLink(Protocol):
    """What a solve in a race (:mod:`smug_opt.portfolio`) shares with the others."""

    cancel: threading.Event  # set when the race is decided: stop at once
    check: CheckMemo  # the race's exact checks, shared

    def best(self) -> Verification | None:
        """The best verified solution any backend has found so far."""

    def incumbent(self, x: np.ndarray, objective: float) -> None:
        """An improving solution streamed by this solve's worker (not yet verified)."""

    def report(self, best: Verification | None, bound: float | None) -> None:
        """This solve's verified best and certified bound after an attempt."""


class SolveLoop:
    """One backend's solve of one problem across tightening levels (:meth:`run`), ended
    by ``deadline`` (``options.time_limit`` is only what the result records)."""

    def __init__(self, problem: Problem, backend: str, solver: str, levels: int,
                 options: SolveOptions, isolate: bool, grace: float, *, deadline: Deadline,
                 exact_backend: bool, memory_limit_mb: float | None = None,
                 start: np.ndarray | None = None, race: RaceLink | None = None) -> None:
        self.problem = problem
        self.race = race
        self.memo = race.check if race is not None else CheckMemo(problem)
        self.memory_limit_mb = memory_limit_mb
        self.exact_backend = exact_backend
        self.backend = backend
        self.solver = solver
        self.levels = levels
        self.options = options
        self.isolate = isolate
        self.grace = grace
        self.start = time.monotonic()
        self.deadline = deadline
        self.attempts: list[Attempt] = []
        self.incumbents: list[tuple[float, float]] = []
        self.lower_s = self.solve_s = self.verify_s = 0.0
        self.longest_check = 0.0  # seconds of the slowest exact check: kept back for the answer's
        self.lower_bound = -math.inf
        self.best: tuple[np.ndarray, Verification] | None = None
        self.peak: float | None = None
        self.killed = False
        self.rejected = False  # some answer failed exact verification
        self.strict_ties = False  # ... because it met a strict row with equality (or worse)
        self.best_level = 0
        self.messages: list[str] = []
        if start is not None:
            self._take_start(start)

    def _take_start(self, start: np.ndarray) -> None:
        """Verify a start; keep it as the incumbent and hand it to the backend if it holds."""
        v = self._check(start)
        if not v.ok:
            self.messages.append(f"start rejected: {v.summary()}")
            return
        self._offer(v, 0)
        self.incumbents.append((time.monotonic() - self.start, float(v.objective)))
        self.options = replace(self.options, start=v.x)

    def _join_race(self) -> bool:
        """Before an attempt in a race: False when the race is decided; else take the best
        verified incumbent any backend has shared, if it beats this solve's own."""
        assert self.race is not None
        if self.race.cancel.is_set():
            self.messages.append("stopped: the race was decided by another backend")
            return False
        shared = self.race.best()
        if shared is not None and (self.best is None or shared.objective < self.best[1].objective):
            self._take_start(shared.x)
        return True

    def _proven(self) -> bool:
        """The incumbent meets the proven bound: nothing left to search."""
        if self.best is None or not math.isfinite(self.lower_bound):
            return False
        tolerance, bound = self._certified()
        return bound is not None and float(self.best[1].objective) <= bound + 2 * tolerance

    def _certified(self) -> tuple[float, float | None]:
        """The objective tolerance and the bound the result can promise so far."""
        tolerance = 0.0 if self.exact_backend else objective_tolerance(self.problem)
        noise = 0.0 if self.exact_backend else BOUND_RELATIVE_ERROR * objective_scale(self.problem)
        return tolerance, certified_bound(self.lower_bound, self.problem.integral_objective,
                                           tolerance, noise)

    # ------------------------------------------------------------------ loop
    def run(self) -> SolveResult:
        status = Status.NO_SOLUTION
        attempt_problem = self.problem
        level = cuts = 0
        while level < self.levels and not self._proven():
            if self.deadline.passed():
                self.messages.append("time limit reached")
                break
            if self.race is not None and not self._join_race():
                break
            outcome = run_attempt(self.backend, attempt_problem, self.options, level,
                                  deadline=_for_solver(self.deadline, self.longest_check),
                                  hard_deadline=self.deadline.shifted(self.grace), isolate=self.isolate,
                                  memory_limit_mb=self.memory_limit_mb,
                                  cancel=None if self.race is None else self.race.cancel,
                                  on_incumbent=None if self.race is None else self.race.incumbent)
            status, done, rejected = self._absorb(level, outcome)
            if self.race is not None:
                self.race.report(self.best[1] if self.best else None, self._certified()[1])
            if done:
                break
            if (level == 0 and rejected is not None and cuts < MAX_NOGOOD_CUTS
                    and self.problem.determined_by_binaries):
                # the rejected binary assignment is infeasible: excluding it keeps level 0
                # a relaxation, so its next optimum is still a valid lower bound
                attempt_problem = _exclude(attempt_problem, rejected)
                cuts += 1
                continue
            level += 1
        return self._result(status)

    def _absorb(self, level: int, out: AttemptOutcome) -> tuple[Status, bool, np.ndarray | None]:
        """Take in one attempt; returns (status so far, whether to stop, rejected solution)."""
        self.lower_s += out.lower_seconds
        self.solve_s += out.solve_seconds
        if out.peak_rss_mb is not None:
            self.peak = max(self.peak or 0.0, out.peak_rss_mb)
        elapsed_at = time.monotonic() - self.start - out.wall_seconds
        self.incumbents.extend((elapsed_at + t, obj) for t, obj, _ in out.incumbents)
        raw = out.raw
        if out.cancelled:
            self.messages.append("stopped: the race was decided by another backend")
            self._adopt_incumbents(out, level)
            return (Status.FEASIBLE if self.best else Status.NO_SOLUTION), True, None
        if raw is None:
            why = (f"killed {self.grace:g}s past the time limit" if out.killed
                   else out.crash or "worker failed")
            self.killed = out.killed or out.memory_exceeded  # at the deadline or the memory limit
            self._record(level, RawResult(Status.ERROR, solver_status="killed"), None, why, out)
            self._adopt_incumbents(out, level)
            if self.best is not None:
                return Status.FEASIBLE, True, None
            return (Status.NO_SOLUTION if out.killed else Status.ERROR), True, None
        if raw.status is Status.ERROR:
            self._record(level, raw, None, raw.message, out)
            self._adopt_incumbents(out, level)
            return (Status.FEASIBLE if self.best else Status.ERROR), True, None
        if level == 0 and raw.status is not Status.INFEASIBLE:
            # a relaxation: its proven bound holds for the problem as stated
            bound = self._claimed_bound(raw)
            if bound is not None:
                self.lower_bound = max(self.lower_bound, bound)
        if raw.status is Status.INFEASIBLE:
            self._record(level, raw, None, raw.message, out)
            if level == 0 and self.best is not None:
                self.messages.append("the solver claimed INFEASIBLE, but a verified solution "
                                     "exists: claim discarded")
                return Status.FEASIBLE, True, None
            if level == 0:
                return Status.INFEASIBLE, True, None
            self.messages.append(
                f"level {level} (a restriction) is infeasible; level 0 returned no valid solution")
            return Status.NO_SOLUTION, True, None
        verified = self._check(raw.x) if raw.x is not None else None
        self._record(level, raw, verified, raw.message, out)
        if verified is None:
            self._adopt_incumbents(out, level)
            return (Status.FEASIBLE if self.best else Status.NO_SOLUTION), True, None
        if not verified.ok:
            self.rejected = True
            strict = (Sense.GT, Sense.LT)
            self.strict_ties |= any(v.kind is ViolationKind.ROW and self.problem.senses[v.index] in strict
                                    for v in verified.violations)
            self._adopt_incumbents(out, level)
            # only an exactly 0/1 assignment is known infeasible and may be cut off
            integral = not any(v.kind is ViolationKind.BINARY for v in verified.violations)
            return (Status.FEASIBLE if self.best else Status.NO_SOLUTION), False, (
                raw.x if integral else None)
        self._offer(verified, level)
        return Status.FEASIBLE, True, None

    def _claimed_bound(self, raw: RawResult) -> float | None:
        """The lower bound a level-0 answer proves, or None. A float solver's OPTIMAL
        without a bound proves nothing (only an exact backend's OPTIMAL is its own bound),
        and neither does an answer with a fractional binary: the solver's integrality
        claim, and so its bound, does not hold."""
        bound = raw.bound
        if raw.x is not None and raw.status.has_solution:
            b = raw.x[self.problem.binary]
            worst = float(np.max(np.abs(b - np.round(b)), initial=0.0))
            if worst > FRACTIONAL_BINARY:
                self.messages.append(
                    f"the solver called a solution with a fractional binary (off by {worst:.3g}) "
                    f"{raw.status.name}: its bound is not used")
                return None
        if bound is None and raw.status is Status.OPTIMAL and self.options.relative_gap == 0:
            if self.exact_backend:
                return raw.objective
            self.messages.append("the solver said OPTIMAL without a bound: a backend that is not "
                                 "exact (capabilities.exact) must prove a bound, so this is not a proof")
        return bound

    # --------------------------------------------------------------- helpers
    def _check(self, x: np.ndarray) -> Verification:
        t = time.perf_counter()
        v = self.memo(x)
        seconds = time.perf_counter() - t
        self.verify_s += seconds
        self.longest_check = max(self.longest_check, seconds)
        return v

    def _offer(self, v: Verification, level: int) -> None:
        if self.best is None or v.objective < self.best[1].objective:
            self.best = (v.x, v)
            self.best_level = level

    def _adopt_incumbents(self, out: AttemptOutcome, level: int) -> None:
        """Keep the best incumbent that verifies (the final answer may be missing)."""
        for _, objective, x in sorted(out.incumbents, key=lambda inc: inc[1])[:_MAX_INCUMBENT_CHECKS]:
            if self.best is not None and objective >= float(self.best[1].objective):
                return  # no better than what is in hand (the rest are worse still)
            v = self._check(x)
            if v.ok:
                self._offer(v, level)
                return

    def _record(self, level: int, raw: RawResult, v: Verification | None, message: str,
                out: AttemptOutcome) -> None:
        if v is not None and not v.ok:
            message = (message + "; " if message else "") + f"rejected: {v.summary()}"
            self.messages.append(f"level {level}: {v.summary()}")
        elif message and raw.status is not Status.NO_SOLUTION:
            self.messages.append(message)
        self.attempts.append(Attempt(
            level=level, status=raw.status, solver_status=raw.solver_status,
            objective=raw.objective, verified=None if v is None else v.ok, message=message,
            lower_seconds=out.lower_seconds, solve_seconds=out.solve_seconds,
        ))

    def _result(self, status: Status) -> SolveResult:
        total = time.monotonic() - self.start
        x = objective = None
        exact: Fraction | None = None  # the incumbent's exact objective
        verified: bool | None = None
        summary = "no solution to verify"
        if self.best is not None:
            x, v = self.best
            exact, objective = v.objective, float(v.objective)
            verified, summary = True, v.summary()
        elif status is Status.INFEASIBLE:
            summary = "no solution to verify: infeasibility is a proof (see proof)"
        elif self.rejected:
            verified = False
            summary = next((m for m in reversed(self.messages) if "violation" in m), "rejected")
        tolerance, bound = self._certified()  # an exact backend's bound needs no tolerance
        if status is Status.INFEASIBLE:
            bound = math.inf
        elif objective is not None and exact is not None:
            if bound is not None and objective < bound - 2 * tolerance - 1e-9 * max(1.0, abs(bound)):
                self.messages.append(f"the solver's bound {bound!r} is contradicted by a verified "
                                     f"solution of objective {objective!r}: bound discarded")
                bound = None
            proven = bound is not None and self._meets_bound(exact, bound, tolerance)
            if proven and self._infimum_may_be_unattained():
                proven = False
                self.messages.append(
                    "a strict row binds a continuous variable in the objective: the infimum "
                    "(>= bound) may not be attained by any solution, so no optimum is claimed "
                    "(backend 'z3' decides this exactly)")
            if proven and bound is not None:
                if self.exact_backend:  # its bound is the objective, never above the exact one
                    bound = objective if Fraction(objective) <= exact else min(bound, objective)
                else:  # a float solver's bound keeps its tolerance: OPTIMAL means within it
                    bound = min(bound, objective)
            status = Status.OPTIMAL if proven else Status.FEASIBLE
        if status is Status.NO_SOLUTION and self.strict_ties and not self.exact_backend:
            self.messages.append(
                f"no answer only because of strict rows: {self.backend} approximates them (as "
                f"non-strict at level 0, then by margins); its answer met a strict row with "
                f"equality (rejected exactly) and no margin level found a solution. The exact "
                f"backend 'z3' with extras={{'encoding': 'exact'}} decides strict ties exactly")
        proof = None
        if status in (Status.OPTIMAL, Status.INFEASIBLE):
            proof = Proof.EXACT if self.exact_backend else Proof.SOLVER
        gap = relative_gap(objective, bound)
        times = Timings(lower=self.lower_s, solve=self.solve_s, verify=self.verify_s,
                        overhead=max(total - self.lower_s - self.solve_s - self.verify_s, 0.0),
                        total=total)
        return SolveResult(
            status=status, x=x, objective=objective, bound=bound, gap=gap,
            backend=self.backend, solver=self.solver, verified=verified, verification=summary,
            message="; ".join(dict.fromkeys(self.messages)), times=times,
            time_limit=self.options.time_limit, attempts=tuple(self.attempts),
            incumbents=tuple(self.incumbents), peak_memory_mb=self.peak, killed=self.killed,
            proof=proof, metadata=dict(self.problem.metadata),
        )


    def _meets_bound(self, objective: Fraction, bound: float, tolerance: float) -> bool:
        """Whether the incumbent (exact ``objective``) is proven optimal by ``bound``. A float
        backend's: within twice the objective tolerance. An exact backend's bound is its exact optimum rounded
        down to float64: met exactly, or, where the binaries fix every variable (so the
        verified objective is exactly the value of the solver's own exact model), within the
        two ulps that rounding the bound down and the objective to nearest leave."""
        if meets_bound(objective, bound, tolerance, exact_bound=self.exact_backend,
                       determined_by_binaries=self.problem.determined_by_binaries):
            return True
        if self.exact_backend and meets_bound(objective, bound, tolerance, exact_bound=True,
                                              determined_by_binaries=True):
            self.messages.append(
                f"{self.backend}'s optimum is no float64 number and its model was rounded to "
                f"float64: the solution is within 2 ulps of the optimum, not proven equal to it "
                f"(certify=True decides whether it is)")
        return False

    def _infimum_may_be_unattained(self) -> bool:
        """A float backend's solution came from a margin level (level 0's answer broke a
        strict row) while the objective reads continuous variables the binaries do not fix:
        the margin solution approaches an infimum that strict rows may keep out of reach
        (``min z s.t. z > 1`` has none), so it cannot be called optimal."""
        p = self.problem
        return (not self.exact_backend and self.best_level > 0 and p.has_strict
                and not p.determined_by_binaries and bool(np.any(p.objective[~p.binary] != 0)))


def _exclude(problem: Problem, x: np.ndarray) -> Problem:
    """``problem`` plus a no-good cut that excludes the binary assignment of ``x``."""
    binary = problem.binary
    ones = binary & (np.round(x) == 1)
    row = np.zeros(problem.num_vars)
    row[binary] = 1.0
    row[ones] = -1.0
    return problem.with_constraints(row[None, :], ">=", 1.0 - float(ones.sum()))


def _for_solver(deadline: Deadline, check_seconds: float = 0.0) -> Deadline:
    """The deadline an attempt's solver is asked to meet: a little before ``deadline`` (10%
    of what is left, at most :data:`SOLVER_RESERVE`) so it can hand back its solution and
    bound itself rather than be killed, and earlier by ``check_seconds`` (the slowest exact
    check so far, at most half of what is left) so that its answer is verified in time."""
    left = deadline.remaining()
    if left is None:
        return deadline
    left = max(left, 0.0)
    return deadline.shifted(-min(SOLVER_RESERVE, 0.1 * left) - min(check_seconds, 0.5 * left))
