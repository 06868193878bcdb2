"""Solve a problem on any registered backend (:func:`solve`): the entry point that
composes the steps — one backend's tightening loop (:mod:`smug_opt.solve_loop`) or a race
(:mod:`smug_opt.portfolio`), optionally over strengthened parts
(:mod:`smug_opt.strengthen`), optionally certified (:mod:`smug_opt.certify`)."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from smug_opt.backend import SolveOptions
from smug_opt.backend_choice import DEFAULT_BACKEND, BackendChoice
from smug_opt.bound_by_construction import exact_by_construction, optimal_start
from smug_opt.certify import worth_certifying
from smug_opt.claims import OBJECTIVE_TOLERANCE, objective_tolerance
from smug_opt.deadline import Deadline
from smug_opt.errors import ParameterError
from smug_opt.ir import Problem
from smug_opt.numeric_range import numeric_issues
from smug_opt.registry import backend_class
from smug_opt.result import SolveResult
from smug_opt.spawn import resolve_memory_limit
from smug_opt.step import Step
from smug_opt.strategies import (
    MIN_SECONDS,
    Certify,
    CertifyWithinBudget,
    Race,
    SingleBackend,
    Strengthen,
    WorkerSettings,
)
from smug_opt.strengthen.presolve import Pieces, worth_strengthening
from smug_opt.strengthen.solve_parts import part_extras

__all__ = ["DEFAULT_GRACE", "OBJECTIVE_TOLERANCE", "PROBLEM_START", "objective_tolerance", "solve",
           "start_values"]

PROBLEM_START = "problem"
"""``solve(start=...)``'s default: the start an encoder attached to the problem, if any."""

DEFAULT_GRACE = 1.0
"""Seconds past ``time_limit`` before a worker that has not answered is killed."""

def solve(
    problem: Problem,
    backend: str | BackendChoice = DEFAULT_BACKEND,
    *,
    time_limit: float | Deadline | None = None,
    threads: int = 1,
    seed: int = 0,
    relative_gap: float = 0.0,
    verbose: bool = False,
    extras: Mapping[str, Any] | None = None,
    isolate: bool = True,
    grace: float = DEFAULT_GRACE,
    memory_limit_mb: float | None = None,
    strengthen: bool | Pieces | None = None,
    certify: bool | None = None,
    start: Any = PROBLEM_START,
    workers: int | None = None,
    memory_limit: float | None = None,
) -> SolveResult:
    """Minimise ``problem`` on ``backend`` and return a verified :class:`SolveResult`.

    ``time_limit`` (seconds, or the :class:`~smug_opt.deadline.Deadline` of a caller whose
    budget this solve is part of) bounds the whole solve: a worker that has not answered
    ``grace`` seconds after it is killed and replaced. ``isolate=False`` runs the solver in
    this process (no hard kill; used inside the benchmark's own worker processes).
    ``memory_limit_mb`` is the worker's budget in MB: None gives the default
    (:func:`smug_opt.spawn.default_memory_limit_mb`, 1/8 of the machine's RAM), ``math.inf``
    none. A worker that passes it is killed; the result is then ERROR with a message saying
    "memory limit", or FEASIBLE when a verified incumbent was in hand (as for a time-out).
    ``strengthen`` (True, or the :class:`~smug_opt.strengthen.Pieces` to run) solves the
    stronger, equivalent parts of :func:`smug_opt.strengthen.strengthen` instead; the
    answer is still verified against ``problem`` and the result records what was done.
    The default (None) strengthens only where it was measured to pay
    (:func:`smug_opt.strengthen.worth_strengthening`), ``False`` never.
    ``certify=True`` turns a floating-point solver's OPTIMAL/INFEASIBLE (and a FEASIBLE's
    incumbent) into an exact proof within what is left of ``time_limit``, or downgrades it
    (see :mod:`smug_opt.certify`); the default (None) certifies only inputs outside the
    float-faithful range that call for it (subnormal numbers, huge costs: see
    :mod:`smug_opt.numeric_range`), ``False`` never.

    ``start`` is a candidate solution: one value per variable, or one per binary when the
    binaries determine the rest (ReLU outputs are recomputed). It is verified exactly
    first; if it holds it is the incumbent (returned when the solver finds nothing better)
    and is handed to the backend. The default takes the start an encoder attached to the
    problem (``metadata["start"]``, e.g. a greedy mask); None solves without one.
    With ``strengthen`` the start is verified against ``problem``; if it holds and agrees
    with the strengthening's fixings, each part gets its values of the part's cells.

    ``backend="auto"`` races the backends measured best for the problem's class, and
    ``"a,b,c"`` races those (:mod:`smug_opt.portfolio`): up to ``workers`` (default the CPU
    count) at once, always in isolated workers, sharing verified incumbents; the first
    proof ends the race and ``result.race`` says what each backend contributed. Each raced
    backend gets the ``extras`` it declares; a key none of them declares raises ValueError.
    ``backend`` may be a parsed :class:`~smug_opt.backend_choice.BackendChoice`.
    ``memory_limit`` is ``memory_limit_mb``'s old name (deprecated; a DeprecationWarning).
    """
    if memory_limit is not None:
        memory_limit_mb = _renamed_memory_limit(memory_limit, memory_limit_mb)
    choice = BackendChoice.parse(backend)
    if not isinstance(problem, Problem):
        raise TypeError(f"problem must be a smug_opt.Problem, got {type(problem).__name__}")
    if isinstance(time_limit, Deadline):
        deadline, seconds = time_limit, time_limit.seconds_left(MIN_SECONDS)
    else:
        deadline, seconds = None, time_limit
    settings = WorkerSettings(
        SolveOptions(time_limit=seconds, threads=threads, seed=seed, relative_gap=relative_gap,
                     verbose=verbose, extras=dict(extras or {})),
        isolate=isolate, grace=grace, memory_limit_mb=resolve_memory_limit(memory_limit_mb),
        race_workers=workers)
    if deadline is None:  # the one place a solve's time limit in seconds becomes a deadline
        deadline = Deadline.after(seconds)
    if not choice.is_race:
        backend_class(choice.name).check_extras(extras or {})
    start_x = start_values(problem, start)
    within_budget = False
    if certify is None:  # certify where the input calls for it, on a floating-point solver
        certify = _float_solver(choice) and any(issue.certify for issue in numeric_issues(problem))
        within_budget = not certify and _float_solver(choice) and worth_certifying(problem)
    step: Step = _Solve(settings, strengthen)
    if within_budget:
        step = CertifyWithinBudget(step)
    if certify:
        from smug_opt.certify import exact_options

        exact = replace(settings, options=exact_options(settings.options))
        step = Certify(step, questions=_Solve(exact, None), ahead=_float_solver(choice),
                       memory_limit_mb=settings.memory_limit_mb)
    return replace(step(problem, choice, deadline, start_x), time_limit=seconds)


def _renamed_memory_limit(memory_limit: float, memory_limit_mb: float | None) -> float:
    """``solve(memory_limit=...)``: a deprecated alias of ``memory_limit_mb``."""
    if memory_limit_mb is not None:
        raise ParameterError("memory_limit", "is memory_limit_mb's deprecated old name: give "
                                             "memory_limit_mb only")
    warnings.warn("solve(memory_limit=...) is deprecated: pass memory_limit_mb=... (the same "
                  "megabytes)", DeprecationWarning, stacklevel=3)
    return memory_limit


def _float_solver(choice: BackendChoice) -> bool:
    """Whether a floating-point solver may answer: a race, or a backend that is not exact."""
    return choice.is_race or not backend_class(choice.name).capabilities.exact


@dataclass(frozen=True)
class _Solve:
    """The steps for whatever problem this is given: one backend or a race, over
    strengthened parts where asked (``strengthen`` None: where it was measured to pay),
    with the notes on inputs outside the float-faithful range and optima that are exact by
    construction (:mod:`smug_opt.bound_by_construction`)."""

    workers: WorkerSettings
    strengthen: bool | Pieces | None

    def __call__(self, problem: Problem, choice: BackendChoice, deadline: Deadline,
                 start: np.ndarray | None) -> SolveResult:
        if start is not None:  # a start at a bound the problem states needs no solver
            settled = optimal_start(problem, start, str(choice))
            if settled is not None:
                return _with_range_notes(problem, choice, settled)
        solver = _step(self.workers, choice)
        strengthen = worth_strengthening(problem) if self.strengthen is None else self.strengthen
        if strengthen is not False:
            pieces = strengthen if isinstance(strengthen, Pieces) else Pieces()
            name = str(choice) if choice.is_race else backend_class(choice.name).solver_version()
            options = self.workers.options  # the parts' solvers get their own extras
            parts, large = (replace(self.workers, options=replace(
                options, extras=part_extras(choice, options.extras, large=size))) for size in (False, True))
            solver = Strengthen(pieces, solver, name, parts=_step(parts, choice),
                                large_parts=_step(large, choice), extras=large.options.extras)
        result = _with_range_notes(problem, choice, solver(problem, choice, deadline, start))
        return exact_by_construction(problem, result)


def _step(workers: WorkerSettings, choice: BackendChoice) -> Step:
    """A race of ``choice``'s backends, or its one backend's loop."""
    return Race(workers) if choice.is_race else SingleBackend(workers)


def _with_range_notes(problem: Problem, choice: BackendChoice, result: SolveResult) -> SolveResult:
    """``result`` naming the inputs outside the float-faithful range, if any; on a
    floating-point solver its message also says the solver saw an approximation."""
    issues = numeric_issues(problem)
    if not issues:
        return result
    result = replace(result, numeric_issues=tuple(map(str, issues)))
    if _float_solver(choice):
        note = ("input outside the float-faithful range, so a floating-point solver saw an "
                "approximation: " + "; ".join(map(str, issues)))
        result = result.with_note(note)
    return result


def start_values(problem: Problem, start: Any = PROBLEM_START) -> np.ndarray | None:
    """``start`` as one float per variable (see :func:`solve`), or None for no start."""
    if isinstance(start, str):
        if start != PROBLEM_START:
            raise ValueError(f"start must be an array, None or {PROBLEM_START!r}, got {start!r}")
        start = problem.metadata.get("start")
        if start is None:
            return None
    if start is None:
        return None
    x = np.asarray(start, dtype=np.float64).reshape(-1)
    binary = problem.binary
    if x.size == int(binary.sum()) and x.size != problem.num_vars and problem.determined_by_binaries:
        full = np.zeros(problem.num_vars)
        full[binary] = x
        x = full
    if x.size != problem.num_vars:
        raise ValueError(f"start has {x.size} values; the problem has {problem.num_vars} variables "
                         f"({int(binary.sum())} binaries)")
    if not np.all(np.isfinite(x)):
        raise ValueError("start contains NaN or inf")
    return x
