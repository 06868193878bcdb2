"""The steps a solve is made of, each behind :class:`smug_opt.step.Step`: one backend's
tightening loop, a race of several, strengthening (which solves its parts with the step
it wraps), and certification (which proves or downgrades the step it wraps, asking its
exact questions through a step it is given). :func:`smug_opt.solve` composes them."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from smug_opt.backend import SolveOptions
from smug_opt.backend_choice import BackendChoice
from smug_opt.deadline import Deadline
from smug_opt.ir import Problem
from smug_opt.registry import backend_class
from smug_opt.result import SolveResult
from smug_opt.solve_loop import SolveLoop
from smug_opt.step import Step
from smug_opt.strengthen.presolve import Pieces
from smug_opt.workers import MIN_SECONDS

__all__ = ["MIN_SECONDS", "Certify", "Race", "SingleBackend", "Strengthen", "WorkerSettings"]

@dataclass(frozen=True)
class WorkerSettings:
    """How the solvers run: their options (the time limit comes from the deadline),
    isolation, the grace before a kill, the worker's memory budget (MB, None: none) and,
    for a race, how many backends run at once (None: the CPU count)."""

    options: SolveOptions
    isolate: bool
    grace: float
    memory_limit_mb: float | None
    race_workers: int | None = None

    def options_until(self, deadline: Deadline) -> SolveOptions:
        """The options with the time left before ``deadline`` as their (recorded) limit."""
        return replace(self.options, time_limit=deadline.seconds_left(MIN_SECONDS))


@dataclass(frozen=True)
class SingleBackend:
    """One backend's tightening loop (:class:`~smug_opt.solve_loop.SolveLoop`)."""

    workers: WorkerSettings

    def __call__(self, problem: Problem, choice: BackendChoice, deadline: Deadline,
                 start: np.ndarray | None) -> SolveResult:
        cls = backend_class(choice.name)
        w = self.workers
        return SolveLoop(problem, choice.name, cls.solver_version(), cls.levels, w.options_until(deadline),
                         w.isolate, w.grace, deadline=deadline, exact_backend=cls.capabilities.exact,
                         memory_limit_mb=w.memory_limit_mb, start=start).run()


@dataclass(frozen=True)
class Race:
    """Several backends at once, sharing incumbents (:func:`smug_opt.portfolio.race`)."""

    workers: WorkerSettings

    def __call__(self, problem: Problem, choice: BackendChoice, deadline: Deadline,
                 start: np.ndarray | None) -> SolveResult:
        from smug_opt.portfolio import race

        w = self.workers
        return race(problem, choice, w.options_until(deadline), deadline=deadline, grace=w.grace,
                    memory_limit_mb=w.memory_limit_mb, start=start, workers=w.race_workers)


@dataclass(frozen=True)
class Strengthen:
    """Solve the strengthened parts of the problem with ``parts`` (default ``inner``) and
    answer for the original (:func:`smug_opt.strengthen.solve_parts.solve_strengthened`);
    ``inner`` solves the problem as stated when strengthening does not apply."""

    pieces: Pieces
    inner: Step
    solver: str
    """The solver named in a result when no part was solved."""
    parts: Step | None = None
    """The step for the strengthened parts (None: ``inner``)."""
    large_parts: Step | None = None
    """The step for the large parts (:func:`~smug_opt.strengthen.solve_parts.is_large`;
    None: ``parts``)."""
    extras: Mapping[str, Any] = field(default_factory=dict)
    """The solver extras the large parts' step passes on (which partners a part may race)."""

    def __call__(self, problem: Problem, choice: BackendChoice, deadline: Deadline,
                 start: np.ndarray | None) -> SolveResult:
        from smug_opt.strengthen.solve_parts import solve_strengthened

        return solve_strengthened(problem, self.pieces, self.parts or self.inner, choice, deadline,
                                  solver=self.solver, start=start, solve_whole=self.inner,
                                  solve_large=self.large_parts, extras=self.extras)


@dataclass(frozen=True)
class Certify:
    """``inner``'s result proven exactly, corrected or downgraded (:mod:`smug_opt.certify`);
    ``questions`` answers the exact questions certification asks. ``ahead``: the safe
    search's cuts are computed on another core while ``inner`` runs
    (:mod:`smug_opt.safe_search.ahead`), within the worker budget ``memory_limit_mb`` (MB,
    None: none)."""

    inner: Step
    questions: Step
    ahead: bool = False
    memory_limit_mb: float | None = None

    def __call__(self, problem: Problem, choice: BackendChoice, deadline: Deadline,
                 start: np.ndarray | None) -> SolveResult:
        from smug_opt.certify import certify
        from smug_opt.safe_search.ahead import cuts_ahead

        helper = cuts_ahead(problem, deadline, self.memory_limit_mb) if self.ahead else None
        try:
            result = self.inner(problem, choice, deadline, start)
            began = time.monotonic()
            if helper is not None:
                helper.collect()
        finally:
            if helper is not None:
                helper.close()
        certified = certify(problem, result, ask=self.questions, deadline=deadline)
        spent = time.monotonic() - began
        return replace(certified, times=replace(certified.times, certify=certified.times.certify + spent))


@dataclass(frozen=True)
class CertifyWithinBudget:
    """``inner``'s OPTIMAL/INFEASIBLE proven exactly when a small, fixed amount of work does
    it (:func:`smug_opt.certify.certify_within_budget`); otherwise left as it was."""

    inner: Step

    def __call__(self, problem: Problem, choice: BackendChoice, deadline: Deadline,
                 start: np.ndarray | None) -> SolveResult:
        from smug_opt.certify import certify_within_budget

        result = self.inner(problem, choice, deadline, start)
        began = time.monotonic()
        certified = certify_within_budget(problem, result, deadline)
        spent = time.monotonic() - began
        return replace(certified, times=replace(certified.times, certify=certified.times.certify + spent))
