"""Solve a problem on any registered backend (:func:`solve`): the entry point that
composes the steps — one backend's tightening loop (:mod:`smug_opt.solve_loop`) or a race
(:mod:`smug_opt.portfolio`), optionally over strengthened parts
(:mod:`smug_opt.strengthen`), optionally certified (:mod:`smug_opt.certify`)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from smug_opt.backend import SolveOptions
from smug_opt.backend_choice import BackendChoice
from smug_opt.bound_by_construction import exact_by_construction
from smug_opt.claims import OBJECTIVE_TOLERANCE, objective_tolerance
from smug_opt.ir import Problem
from smug_opt.numeric_range import numeric_issues
from smug_opt.registry import backend_class
from smug_opt.result import SolveResult
from smug_opt.solve_loop import SolveLoop
from smug_opt.spawn import resolve_memory_limit
from smug_opt.strengthen.presolve import Pieces, worth_strengthening

__all__ = ["DEFAULT_GRACE", "OBJECTIVE_TOLERANCE", "PROBLEM_START", "objective_tolerance", "solve",
           "start_values"]

PROBLEM_START = "problem"
"""``solve(start=...)``'s default: the start an encoder attached to the problem, if any."""

DEFAULT_GRACE = 1.0
"""Seconds past ``time_limit`` before a worker that has not answered is killed."""

def solve(
    problem: Problem,
    backend: str | BackendChoice = "highs",
    *,
    time_limit: float | None = None,
    threads: int = 1,
    seed: int = 0,
    relative_gap: float = 0.0,
    verbose: bool = False,
    extras: Mapping[str, Any] | None = None,
    isolate: bool = True,
    grace: float = DEFAULT_GRACE,
    memory_limit: float | None = None,
    strengthen: bool | Pieces | None = None,
    certify: bool | None = None,
    start: Any = PROBLEM_START,
    workers: int | None = None,
) -> SolveResult:
    """Minimise ``problem`` on ``backend`` and return a verified :class:`SolveResult`.

    ``time_limit`` (seconds) bounds the whole solve: a worker that has not answered
    ``grace`` seconds after it is killed and replaced. ``isolate=False`` runs the solver in
    this process (no hard kill; used inside the benchmark's own worker processes).
    ``memory_limit`` (MB) is the worker's budget: None gives the default
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
    """
    started = time.monotonic()
    choice = BackendChoice.parse(backend)
    result = _solve(problem, choice, time_limit=time_limit, threads=threads, seed=seed,
                    relative_gap=relative_gap, verbose=verbose, extras=extras, isolate=isolate,
                    grace=grace, memory_limit=memory_limit, strengthen=strengthen, start=start,
                    workers=workers)
    issues = numeric_issues(problem)
    if issues:
        result = replace(result, numeric_issues=tuple(map(str, issues)))
        if choice.is_race or not backend_class(choice.name).capabilities.exact:
            note = ("input outside the float-faithful range, so a floating-point solver saw an "
                    "approximation: " + "; ".join(map(str, issues)))
            result = replace(result, message="; ".join(m for m in (result.message, note) if m))
            if certify is None:
                certify = any(issue.certify for issue in issues)
    result = exact_by_construction(problem, result)
    if not certify:
        return result
    from smug_opt.certify import certify as certify_result

    return certify_result(problem, result, solve=solve,
                          deadline=None if time_limit is None else started + time_limit,
                          isolate=isolate, grace=grace, memory_limit=memory_limit)


def _solve(problem: Problem, choice: BackendChoice, *, time_limit: float | None, threads: int, seed: int,
           relative_gap: float, verbose: bool, extras: Mapping[str, Any] | None, isolate: bool,
           grace: float, memory_limit: float | None, strengthen: bool | Pieces | None,
           start: Any, workers: int | None) -> SolveResult:
    if not isinstance(problem, Problem):
        raise TypeError(f"problem must be a smug_opt.Problem, got {type(problem).__name__}")
    memory_limit_mb = resolve_memory_limit(memory_limit)
    options = SolveOptions(time_limit=time_limit, threads=threads, seed=seed,
                           relative_gap=relative_gap, verbose=verbose, extras=dict(extras or {}))
    start_x = start_values(problem, start)
    backend = str(choice)
    if choice.is_race:
        from smug_opt.portfolio import race

        solver = backend

        def run_one(target: Problem, limit: float | None, first: np.ndarray | None) -> SolveResult:
            return race(target, choice, replace(options, time_limit=limit), grace=grace,
                        memory_limit_mb=memory_limit_mb, start=first, workers=workers)
    else:
        cls = backend_class(backend)
        cls.check_extras(extras or {})
        solver = cls.solver_version()

        def run_one(target: Problem, limit: float | None, first: np.ndarray | None) -> SolveResult:
            return SolveLoop(target, backend, solver, cls.levels, replace(options, time_limit=limit),
                          isolate, grace, exact_backend=cls.capabilities.exact,
                          memory_limit_mb=memory_limit_mb, start=first).run()

    if strengthen is None:
        strengthen = worth_strengthening(problem)
    if strengthen is False:
        return run_one(problem, time_limit, start_x)
    from smug_opt.strengthen.solve_parts import solve_strengthened

    pieces = strengthen if isinstance(strengthen, Pieces) else Pieces()
    return solve_strengthened(problem, pieces, lambda part, limit, first: run_one(part.problem, limit, first),
                              time_limit=time_limit, backend=backend, solver=solver, start=start_x)


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
