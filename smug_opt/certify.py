"""Certification: turn a floating-point solver's OPTIMAL or INFEASIBLE into an exact proof.

``solve(..., certify=True)`` hands its result here with what is left of the time limit:

* **Enumeration** settles small problems whose binaries decide everything (at most
  :data:`ENUMERATION_BINARIES` binaries, :data:`ENUMERATION_RELU_BINARIES` with ReLUs):
  every assignment is checked exactly; the exact optimum (or infeasibility) replaces the
  claim.
* Otherwise the **exact z3 encoding** (its own isolated worker, like any solve) answers
  the residual question: for OPTIMAL/FEASIBLE with objective ``v``, "is there a solution
  with objective ``< v``" (integral objectives; else ``< v - objective_tolerance``); for
  INFEASIBLE, "is there any solution". "No" (z3's exact unsat) proves the claim; a
  solution is verified, becomes the incumbent, and the question is asked again.
* When neither finishes in time (or z3 is not installed) the claim is **downgraded**:
  OPTIMAL becomes FEASIBLE and INFEASIBLE becomes NO_SOLUTION, with a message saying why.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import replace
from fractions import Fraction

import numpy as np

from smug_opt.backend import Status
from smug_opt.exact import dot_error_bound
from smug_opt.ir import Problem
from smug_opt.result import SolveResult
from smug_opt.verification import Verification, decide_rows, verify

__all__ = ["ENUMERATION_BINARIES", "ENUMERATION_RELU_BINARIES", "EXACT_BACKEND", "certify"]

ENUMERATION_BINARIES = 14
"""Problems of binaries only, with at most this many, are settled by exact enumeration."""

ENUMERATION_RELU_BINARIES = 8
"""The same for problems with ReLUs (each assignment is verified on its own)."""

EXACT_BACKEND = "z3"
_EXACT_EXTRAS = {"encoding": "exact"}


def certify(problem: Problem, result: SolveResult, *, solve: Callable[..., SolveResult],
            tolerance: float, deadline: float | None, isolate: bool, grace: float,
            memory_limit: float | None) -> SolveResult:
    """``result`` with its claim proven exactly, corrected, or downgraded (see module doc).
    Results whose claim is already exact, or that claim nothing provable, pass through.
    ``solve`` runs the residual questions (:func:`smug_opt.solving.solve`, handed in so
    that this module does not import the one that calls it); ``tolerance`` is the
    problem's :func:`~smug_opt.solving.objective_tolerance`."""
    if result.proof == "exact" or not (
            result.status in (Status.OPTIMAL, Status.INFEASIBLE)
            or (result.status is Status.FEASIBLE and result.x is not None)):
        return result
    start = time.monotonic()
    if _enumerable(problem):
        try:
            best = _enumerate(problem, deadline)
        except TimeoutError:
            return _downgraded(result, "exact enumeration did not finish within the time limit", start)
        return _settled(problem, result, best, "exact enumeration of every binary assignment", start)
    return _Residual(problem, result, deadline, isolate, grace, memory_limit, start, solve,
                     tolerance).run()


# ------------------------------------------------------------------- enumeration
def _enumerable(problem: Problem) -> bool:
    n = int(problem.binary.sum())
    limit = ENUMERATION_RELU_BINARIES if problem.num_relus else ENUMERATION_BINARIES
    return problem.determined_by_binaries and n <= limit


def _enumerate(problem: Problem, deadline: float | None = None) -> Verification | None:
    """The exact optimum over every binary assignment (None: infeasible). Rows are decided
    by :func:`~smug_opt.verification.decide_rows` (the decider verify uses); the feasible
    assignments are verified, in order of their (approximate) objective. Raises
    TimeoutError past ``deadline``."""
    binary = np.flatnonzero(problem.binary)
    count = 1 << binary.size
    X = np.zeros((count, problem.num_vars))
    X[:, binary] = (np.arange(count)[:, None] >> np.arange(binary.size)) & 1
    maybe = np.ones(count, dtype=bool)
    if not problem.num_relus:  # rows decided exactly, as verify does (near-ties in exact arithmetic)
        maybe = decide_rows(problem, X).holds.all(axis=1)
    approx = X @ problem.objective
    scale = float(dot_error_bound(problem.num_vars, float(np.abs(problem.objective).sum())))
    best: Verification | None = None
    best_approx = math.inf
    order = np.flatnonzero(maybe)[np.argsort(approx[maybe], kind="stable")].tolist()
    for done, k in enumerate(order):
        if approx[k] > best_approx + 2 * scale:
            break
        if deadline is not None and done % 256 == 255 and time.monotonic() > deadline:
            raise TimeoutError
        v = verify(problem, X[k])
        if v.ok and (best is None or v.objective < best.objective):
            best, best_approx = v, min(best_approx, float(approx[k]))
    return best


# -------------------------------------------------------------------- residual
class _Residual:
    """The residual-question loop on the exact z3 encoding."""

    def __init__(self, problem: Problem, result: SolveResult, deadline: float | None, isolate: bool,
                 grace: float, memory_limit: float | None, start: float,
                 solve: Callable[..., SolveResult], tolerance: float) -> None:
        self.problem, self.result = problem, result
        self.deadline, self.isolate, self.grace, self.memory_limit = deadline, isolate, grace, memory_limit
        self.start = start
        self.solve, self.tolerance = solve, tolerance
        self.best = None if result.x is None else verify(problem, result.x)
        self.improved = False
        self.rhs = math.inf  # the bound the current question asks to beat

    def run(self) -> SolveResult:
        from smug_opt.registry import available_backends

        if EXACT_BACKEND not in available_backends():
            return _downgraded(self.result, f"certification needs the {EXACT_BACKEND!r} backend, "
                                            f"which is not installed here", self.start)
        while True:
            question = self._question()
            if question is None:
                return _downgraded(self.result, "the objective value cannot be written exactly as "
                                                "a float bound", self.start)
            remaining = None if self.deadline is None else self.deadline - time.monotonic()
            if remaining is not None and remaining <= 0.05:
                return self._out_of_time()
            answer = self.solve(question, EXACT_BACKEND, time_limit=remaining, extras=_EXACT_EXTRAS,
                                isolate=self.isolate, grace=self.grace,
                                memory_limit=self.memory_limit)
            if answer.status is Status.INFEASIBLE and answer.proof == "exact":
                if self.best is not None and _attainment_open(self.problem):
                    return self._near_infimum()
                what = (f"{EXACT_BACKEND} (exact) proved no solution is better" if self.best
                        else f"{EXACT_BACKEND} (exact) proved infeasibility")
                return _settled(self.problem, self.result, self.best, what, self.start)
            if answer.x is None:
                return self._out_of_time(answer.message)
            found = verify(self.problem, answer.x)
            if not found.ok:  # cannot happen for a verified residual answer; never trust it
                return _downgraded(self.result, "certification's solution failed verification",
                                   self.start)
            self.best, self.improved = found, True

    def _question(self) -> Problem | None:
        """The problem's rows with a zero objective, plus ``c·x < v`` below the incumbent."""
        p = self.problem
        feasibility = _zero_objective(p)
        if self.best is None:
            return feasibility
        value = self.best.objective
        if p.integral_objective:
            rhs = float(value)
            if Fraction(rhs) != value:
                return None
            self.rhs = rhs
            return feasibility.with_constraints(p.objective[None, :], "<", [rhs])
        else:
            rhs = _float_down(value - Fraction(self.tolerance))
        self.rhs = rhs
        return feasibility.with_constraints(p.objective[None, :], "<", [rhs])

    def _near_infimum(self) -> SolveResult:
        """No solution lies below the question's bound, but strict rows may keep the
        infimum unattained: FEASIBLE, with that bound proven exactly."""
        assert self.best is not None
        objective = float(self.best.objective)
        return _finish(self.result, status=Status.FEASIBLE, x=self.best.x, objective=objective,
                       bound=self.rhs, gap=max(objective - self.rhs, 0.0) / max(abs(objective), 1.0),
                       proof=None, verified=True, verification=self.best.summary(),
                       note=f"{EXACT_BACKEND} (exact) proved no solution has objective below "
                            f"{self.rhs!r}; whether strict rows leave the infimum unattained is "
                            f"not decided, so no optimum is claimed", start=self.start)

    def _out_of_time(self, why: str = "") -> SolveResult:
        if self.improved:  # the solver's claim was wrong: keep the better solution found
            return _corrected(self.problem, self.result, self.best,
                              f"certification found a better solution ({float(self.best.objective)!r}) "
                              f"than the solver's claim but could not prove it optimal in time",
                              self.start, proven=False)
        detail = f" ({why})" if why else ""
        return _downgraded(self.result, f"{EXACT_BACKEND} did not settle it within the time limit{detail}",
                           self.start)


def _attainment_open(problem: Problem) -> bool:
    """Strict rows and continuous variables in the objective that the binaries do not fix:
    a solution within the tolerance of the infimum may exist while no minimiser does."""
    return (not problem.integral_objective and problem.has_strict
            and not problem.determined_by_binaries
            and bool(np.any(problem.objective[~problem.binary] != 0)))


# ---------------------------------------------------------------------- results
def _settled(problem: Problem, result: SolveResult, best: Verification | None, how: str,
             start: float) -> SolveResult:
    """The exact answer ``best`` (None: infeasible) replaces ``result``'s claim."""
    if best is None:
        wrong = result.status is not Status.INFEASIBLE
        note = (f"certified INFEASIBLE by {how}" if not wrong else
                f"the solver's claim was wrong: {how} shows the problem is infeasible")
        return _finish(result, status=Status.INFEASIBLE, x=None, objective=None, bound=math.inf,
                       gap=None, proof="exact", verified=None,
                       verification="no solution to verify: infeasibility is a proof (see proof)",
                       note=note, start=start)
    same = result.x is not None and result.objective == float(best.objective)
    note = (f"certified {'OPTIMAL' if result.status is Status.OPTIMAL else 'optimal'} by {how}" if same
            else f"the solver's {result.status.name} was not optimal: {how} found objective "
                 f"{float(best.objective)!r}")
    return _corrected(problem, result, best, note, start, proven=True)


def _corrected(problem: Problem, result: SolveResult, best: Verification, note: str, start: float,
               *, proven: bool) -> SolveResult:
    objective = float(best.objective)
    bound = objective if proven else None
    return _finish(result, status=Status.OPTIMAL if proven else Status.FEASIBLE, x=best.x,
                   objective=objective, bound=bound, gap=0.0 if proven else None,
                   proof="exact" if proven else None, verified=True, verification=best.summary(),
                   note=note, start=start)


def _downgraded(result: SolveResult, why: str, start: float) -> SolveResult:
    """OPTIMAL -> FEASIBLE, INFEASIBLE -> NO_SOLUTION: the solver's word is not a proof."""
    if result.status is Status.FEASIBLE:
        return _finish(result, note=f"not certified optimal: {why}", start=start)
    status = Status.FEASIBLE if result.status is Status.OPTIMAL else Status.NO_SOLUTION
    bound = result.bound if status is Status.FEASIBLE else None
    return _finish(result, status=status, bound=bound, proof=None,
                   note=f"the solver's {result.status.name} could not be certified: {why}", start=start)


def _finish(result: SolveResult, *, note: str, start: float, **changes: object) -> SolveResult:
    message = "; ".join(m for m in (result.message, note) if m)
    spent = time.monotonic() - start
    times = replace(result.times, total=result.times.total + spent,
                    overhead=result.times.overhead + spent)
    return replace(result, message=message, times=times, **changes)


def _zero_objective(problem: Problem) -> Problem:
    return replace(problem, objective=np.zeros(problem.num_vars))


def _float_down(value: Fraction) -> float:
    f = float(value)
    return f if Fraction(f) <= value else math.nextafter(f, -math.inf)
