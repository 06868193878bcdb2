"""The conformance checks: small functions, each stating its invariant in its first
docstring line, each raising AssertionError (with the instance and the result) on failure."""

from __future__ import annotations

import itertools
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import scipy.sparse as sp

from smug_opt.backend import Capability, Status
from smug_opt.claims import objective_tolerance
from smug_opt.ir import Problem
from smug_opt.registry import backend_class
from smug_opt.result import SolveResult
from smug_opt.solving import DEFAULT_GRACE, solve
from smug_opt.testing.brute_force import brute_force, exact_optimum
from smug_opt.testing.instances import (
    ALL_ZERO,
    EQUALITY,
    FIRST_LAYER,
    INFEASIBLE,
    NEAR_TIES,
    STRICT,
    STRICT_CONTINUOUS,
    binary,
    hard_instance,
    huge_bounds,
    market_split_deviation,
    mixed,
    relu_network,
)
from smug_opt.verification import verify

__all__ = ["CHECKS", "Check", "CheckFn"]

CheckFn = Callable[[str], str | None]
"""A check: takes a backend name, returns an optional note, raises on failure."""

_SMALL_LIMIT = 10.0  # seconds for the small instances: generous, they take milliseconds
_HARD_LIMIT = 1.5  # seconds for the time-limit check


@dataclass(frozen=True)
class Check:
    name: str
    fn: CheckFn
    needs: Capability | None  # a Capabilities flag the backend must declare


CHECKS: list[Check] = []


def _check(needs: Capability | None = None) -> Callable[[CheckFn], CheckFn]:
    """Register a check; ``needs``: the Capabilities flag the backend must declare."""

    def register(fn: CheckFn) -> CheckFn:
        CHECKS.append(Check(fn.__name__, fn, needs))
        return fn
    return register


def _solve(backend: str, problem: Problem, *, label: str, time_limit: float = _SMALL_LIMIT,
           start: np.ndarray | None = None) -> SolveResult:
    """Solve and hold the result to the invariants every result must keep."""
    result = solve(problem, backend, time_limit=time_limit, start=start)
    where = f"on {label!r} ({result!r}, message {result.message!r})"
    assert isinstance(result.status, Status), f"status {result.status!r} is not a Status {where}"
    assert result.backend == backend, f"result names backend {result.backend!r} {where}"
    assert (result.x is not None) == result.status.has_solution, \
        f"x is {'set' if result.x is not None else 'None'} with status {result.status.name} {where}"
    assert (result.objective is not None) == result.status.has_solution, \
        f"objective {result.objective!r} with status {result.status.name} {where}"
    if result.x is not None:
        v = verify(problem, result.x)
        assert v.ok, f"returned x fails exact verification: {v.summary()} {where}"
        assert result.objective == float(v.objective), \
            f"objective {result.objective!r} but x's exact objective is {float(v.objective)!r} {where}"
    if result.objective is not None and result.bound is not None:
        assert result.bound <= result.objective, \
            f"bound {result.bound!r} exceeds objective {result.objective!r} {where}"
        expected_gap = max(result.objective - result.bound, 0.0) / max(abs(result.objective), 1.0)
        assert result.gap is not None and abs(result.gap - expected_gap) <= 1e-9, \
            f"gap {result.gap!r}, expected {expected_gap!r} from objective and bound {where}"
    if result.status is Status.OPTIMAL:
        assert result.gap is not None and result.gap <= 1e-9, f"OPTIMAL with gap {result.gap!r} {where}"
    return result


def _expect(backend: str, problem: Problem, label: str, optimum: Fraction | float | None,
            why: str = "") -> SolveResult:
    """Solve and require the exact answer: INFEASIBLE when ``optimum`` is None, else
    OPTIMAL with that objective."""
    result = _solve(backend, problem, label=label)
    note = f" ({why})" if why else ""
    if optimum is None:
        assert result.status is Status.INFEASIBLE, \
            f"{label!r}: expected INFEASIBLE{note}, got {result.status.name} " \
            f"objective {result.objective!r} ({result.message})"
    else:
        assert result.status is Status.OPTIMAL, \
            f"{label!r}: expected OPTIMAL {float(optimum)!r}{note}, got {result.status.name} " \
            f"({result.message})"
        assert result.objective == float(optimum), \
            f"{label!r}: objective {result.objective!r}, exact optimum {float(optimum)!r}{note}"
    return result


def _battery() -> dict[str, Problem]:
    """A mixed set for the invariant checks: feasible, infeasible, strict, equality."""
    return {"mixed seed 1": mixed(1), "mixed seed 2": mixed(2),
            "x1+x2 > 2": STRICT["x1+x2 > 2"][0],
            "odd cycle": INFEASIBLE["odd cycle of equalities"],
            "two choices": EQUALITY["two choices"][0]}


@_check()
def check_optimal_known_instances(backend: str) -> None:
    """Small binary instances are solved OPTIMAL with their exact (brute-force) optimum."""
    for seed in (1, 2, 3):
        problem = mixed(seed)
        _expect(backend, problem, f"mixed seed {seed}", brute_force(problem).objective)
    cover = binary([[1, 1, 0, 0, 1], [0, 1, 1, 0, 0], [0, 0, 1, 1, 1], [1, 0, 0, 1, 0]], ">=", 1)
    _expect(backend, cover, "set cover", 2)
    for label, (problem, optimum) in FIRST_LAYER.items():
        _expect(backend, problem, label, optimum)


@_check()
def check_strict_vs_nonstrict(backend: str) -> None:
    """Strict and non-strict rows differ exactly at the boundary (x1+x2 > 1 needs both)."""
    for label, (problem, optimum, why) in STRICT.items():
        _expect(backend, problem, label, optimum, why)


@_check()
def check_float_near_ties(backend: str) -> None:
    """Rows are decided in exact arithmetic, even where float64 intuition says otherwise."""
    for label, (problem, optimum, why) in NEAR_TIES.items():
        _expect(backend, problem, label, optimum, why)


@_check()
def check_infeasible(backend: str) -> None:
    """Infeasible problems end INFEASIBLE, with no solution."""
    for label, problem in INFEASIBLE.items():
        _expect(backend, problem, label, None)


@_check()
def check_all_zero_optimal(backend: str) -> None:
    """When the all-zero assignment is feasible and costs are positive, it is the optimum."""
    for label, problem in ALL_ZERO.items():
        result = _expect(backend, problem, label, 0)
        assert result.x is not None and not np.any(result.x), f"{label!r}: x = {result.x!r}"


@_check()
def check_equality_rows(backend: str) -> None:
    """Equality rows are met exactly (integer and dyadic coefficients)."""
    for label, (problem, optimum) in EQUALITY.items():
        _expect(backend, problem, label, optimum)


@_check()
def check_negative_and_mixed(backend: str) -> None:
    """Negative and mixed-sign coefficients and costs give the exact optimum."""
    problem = binary([[-2, 3, -1, 0.5], [1, -1, 2, -1], [3, 0, 1, 0]], [">=", ">", "<="],
                      [-1.5, 0.5, 3.5], objective=[-1, 2, -3, 1])
    _expect(backend, problem, "mixed signs", brute_force(problem).objective)
    for seed in (4, 5):
        p = mixed(seed, n=10, m=6)
        _expect(backend, p, f"mixed seed {seed}", brute_force(p).objective)


@_check(needs=Capability.RELU)
def check_relu_network(backend: str) -> None:
    """A ReLU network instance is solved to its brute-force optimum."""
    for seed in (1, 8, 16):  # optima 2, 3, 3; every hidden neuron ambiguous
        problem = relu_network(seed)
        expected = brute_force(problem)
        result = _expect(backend, problem, f"relu network seed {seed}", expected.objective)
        assert result.x is not None


@_check()
def check_solutions_verify(backend: str) -> None:
    """Every returned x passes exact verification (smug_opt.verify)."""
    for label, problem in _battery().items():
        result = _solve(backend, problem, label=label)
        if result.x is not None:
            assert verify(problem, result.x).ok, f"{label!r}: x fails verification"


@_check()
def check_no_solution_without_status(backend: str) -> None:
    """x is None unless the status has a solution (OPTIMAL or FEASIBLE)."""
    for label, problem in _battery().items():
        result = _solve(backend, problem, label=label)
        assert (result.x is None) != result.status.has_solution, \
            f"{label!r}: status {result.status.name} with x {result.x!r}"
        if result.x is None:
            try:
                result.values()
            except ValueError:
                continue
            raise AssertionError(f"{label!r}: values() did not raise without a solution")


@_check()
def check_bound_and_gap(backend: str) -> None:
    """The bound never exceeds the objective and the gap is (objective - bound)/max(|obj|, 1)."""
    for label, problem in _battery().items():
        result = _solve(backend, problem, label=label)
        if result.status is Status.OPTIMAL:
            assert result.bound == result.objective, \
                f"{label!r}: OPTIMAL with bound {result.bound!r} != objective {result.objective!r}"
        if result.status is Status.INFEASIBLE:
            assert result.bound == float("inf"), f"{label!r}: INFEASIBLE with bound {result.bound!r}"


@_check()
def check_starts(backend: str) -> None:
    """A start never makes an answer wrong; an invalid one is reported and ignored.

    The backend may use a verified start or ignore it: the optimum is found either way."""
    cases = {f"mixed seed {seed}": mixed(seed) for seed in (1, 2, 3)}
    if backend_class(backend).capabilities.relu:
        cases["relu network seed 8"] = relu_network(8)
    for label, problem in cases.items():
        optimum = brute_force(problem).objective
        worst = _worst_feasible(problem)
        assert optimum is not None and worst is not None
        assert float(problem.objective @ _with_relus(problem, worst)) > optimum
        infeasible = next(s for s in (np.zeros(worst.size), np.ones(worst.size))
                          if not verify(problem, _with_relus(problem, s)).ok)
        for start in (worst, infeasible):
            holds = start is worst
            result = _solve(backend, problem, label=f"{label}, start {start.tolist()}", start=start)
            assert result.status is Status.OPTIMAL and result.objective == float(optimum), \
                f"{label!r} with a {'valid' if holds else 'rejected'} start: {result.status.name} " \
                f"{result.objective!r}, exact optimum {float(optimum)!r} ({result.message})"
            if not holds:
                assert "start rejected" in result.message, \
                    f"{label!r}: an invalid start was not reported ({result.message!r})"


def _worst_feasible(problem: Problem) -> np.ndarray | None:
    """The feasible binary assignment of largest objective (small problems only)."""
    worst: tuple[Fraction, np.ndarray] | None = None
    for bits in itertools.product((0.0, 1.0), repeat=int(problem.binary.sum())):
        v = verify(problem, _with_relus(problem, np.array(bits)))
        if v.ok and (worst is None or v.objective > worst[0]):
            worst = (v.objective, np.array(bits))
    return None if worst is None else worst[1]


def _with_relus(problem: Problem, binaries: np.ndarray) -> np.ndarray:
    """A full vector from binary values (ReLU outputs left 0: verify recomputes them)."""
    x = np.zeros(problem.num_vars)
    x[problem.binary] = binaries
    return x


@_check(needs=Capability.EXACT)
def check_exact_never_rejected(backend: str) -> None:
    """An exact backend's answers always survive verification (no rejected attempt)."""
    for label, (problem, _, _) in {**NEAR_TIES, **STRICT}.items():
        result = _solve(backend, problem, label=label)
        rejected = [a for a in result.attempts if a.verified is False]
        assert not rejected, f"{label!r}: {len(rejected)} attempt(s) rejected: {rejected[0].message}"


@_check(needs=Capability.LP)
def check_lp_solver(backend: str) -> None:
    """A declared LP solver's multipliers give a rigorous, tight bound (min/max ``v0`` s.t.
    ``v0 + v1 >= 1``, ``v0 <= 1``, ``v1 <= 0.25``, ``v >= 0``: 0.75 and 1)."""
    from smug_opt.bounds.lp import safe_min

    solver = backend_class(backend).lp_solver()
    assert solver is not None, "declares capabilities.lp, but lp_solver() returned None"
    A = sp.csr_matrix(np.array([[1.0, 1.0]]))
    row_lo, row_hi = np.array([1.0]), np.array([np.inf])
    col_lb, col_ub = np.zeros(2), np.array([1.0, 0.25])
    assert solver.load(A, row_lo, row_hi, col_lb, col_ub, _SMALL_LIMIT), "load(): a feasible LP failed"
    At = A.T.tocsr()
    for sign, optimum in ((1.0, 0.75), (-1.0, -1.0)):
        y = solver.minimize(0, sign, _SMALL_LIMIT)
        assert y is not None and np.shape(y) == (1,), \
            f"minimize(0, {sign}) gave {y!r}, expected one multiplier per row"
        bound = safe_min(np.array([sign, 0.0]), At, abs(At).tocsr(), row_lo, row_hi, col_lb, col_ub,
                         np.asarray(y, dtype=float))
        assert optimum - 1e-6 <= bound <= optimum, \
            f"minimize(0, {sign}): safe bound {bound!r} from multipliers {y!r}, exact optimum {optimum}"


def _warm_up(backend: str) -> float:
    """Start the backend's worker; returns the median time of a warm solve of a tiny problem."""
    tiny = binary([[1, 1]], ">=", 1)
    return statistics.median(_solve(backend, tiny, label="warm-up").times.total for _ in range(3))


@_check()
def check_time_limit(backend: str) -> str:
    """A solve nobody can finish stops itself: FEASIBLE or NO_SOLUTION, never killed.

    The instance is decided by no exact solver within the limit, so a proof (OPTIMAL,
    INFEASIBLE) is not expected. The solve must end within limit + grace + slack (the
    slack measured on warm solves of a tiny problem) without the core killing the worker:
    a backend that needs killing did not pass the time limit to its solver.
    """
    slack = 0.5 + 2.0 * _warm_up(backend)
    problem = hard_instance()
    start = time.monotonic()
    result = _solve(backend, problem, label="market split 6x50", time_limit=_HARD_LIMIT)
    wall = time.monotonic() - start
    assert result.status in (Status.FEASIBLE, Status.NO_SOLUTION), \
        f"market split 6x50: status {result.status.name} after {wall:.2f}s with limit " \
        f"{_HARD_LIMIT}s ({result.message})"
    allowed = _HARD_LIMIT + DEFAULT_GRACE + slack
    assert wall <= allowed, f"market split 6x50: {wall:.2f}s > limit {_HARD_LIMIT}s + grace " \
                            f"{DEFAULT_GRACE}s + slack {slack:.2f}s"
    assert not result.killed, \
        f"market split 6x50: the worker had to be killed {DEFAULT_GRACE}s past the limit (after " \
        f"{wall:.2f}s): pass options.time_limit (this attempt's share) on to the solver"
    return (f"{result.status.name} in {wall:.2f}s (limit {_HARD_LIMIT}s, overshoot "
            f"{wall - _HARD_LIMIT:+.2f}s{', killed' if result.killed else ''})")



@_check()
def check_timeout_with_incumbent(backend: str) -> str:
    """A solve stopped by its limit with a solution in hand claims no proof.

    Market split as least deviation: every assignment is a solution, none is provably
    optimal within the limit. No attempt may claim OPTIMAL (a time-out is not a proof,
    with or without a bound); the result is FEASIBLE with a verified solution, or
    NO_SOLUTION when none of the backend's float answers survived exact verification.
    """
    _warm_up(backend)  # a cold worker's start-up is spent from the limit
    problem = market_split_deviation()
    result = _solve(backend, problem, label="market split 6x50, least deviation", time_limit=_HARD_LIMIT)
    claims = [a for a in result.attempts if a.status is Status.OPTIMAL]
    assert not claims, \
        f"market split 6x50, least deviation: level {claims[0].level} claimed OPTIMAL " \
        f"(objective {claims[0].objective!r}) on a time-out ({claims[0].solver_status!r})"
    assert result.status in (Status.FEASIBLE, Status.NO_SOLUTION), \
        f"market split 6x50, least deviation: status {result.status.name}, expected FEASIBLE with " \
        f"the incumbent found before the limit ({result.message})"
    return f"{result.status.name} {result.objective!r}, bound {result.bound!r}"


@_check()
def check_strict_row_binds_continuous(backend: str) -> None:
    """A strict row that keeps the infimum out of reach gives FEASIBLE, never OPTIMAL.

    A continuous variable pushed by the objective against a strict row (``z > 1``,
    minimise ``z``) has no minimiser: a backend must return a point that satisfies the
    strict row exactly (so strict rows must be tightened, not relaxed, somewhere) and must
    not claim it optimal; a bound may not pass the infimum.
    """
    for label, (problem, infimum) in STRICT_CONTINUOUS.items():
        result = _solve(backend, problem, label=label)
        assert result.status is Status.FEASIBLE, \
            f"{label!r}: expected FEASIBLE (a point strictly inside; the infimum {infimum!r} is not " \
            f"attained), got {result.status.name} objective {result.objective!r} ({result.message})"
        assert result.bound is None or result.bound <= infimum, \
            f"{label!r}: bound {result.bound!r} above the infimum {infimum!r}"


@_check()
def check_unusual_endings(backend: str) -> None:
    """A solver ending that proves nothing (unbounded, numerical trouble) is never INFEASIBLE.

    Bounds of ±1e30 look infinite to float solvers, which then report "unbounded" on a
    problem whose exact optimum is 2 - 1e30. Such an ending maps to ERROR (or a verified
    solution), never to a claim: no attempt may say INFEASIBLE, and the result may not be
    INFEASIBLE or a wrong OPTIMAL.
    """
    problem = huge_bounds()
    optimum = exact_optimum(problem).value
    assert optimum is not None
    result = _solve(backend, problem, label="bounds past a solver's infinity")
    claims = [a for a in result.attempts if a.status is Status.INFEASIBLE]
    assert not claims, \
        f"bounds past a solver's infinity: level {claims[0].level} claimed INFEASIBLE on " \
        f"{claims[0].solver_status!r}, but 2 - 1e30 is the exact optimum (the core's certification " \
        "may have caught it; the backend must not make the claim): map unbounded/other endings to ERROR"
    assert result.status is not Status.INFEASIBLE, \
        f"bounds past a solver's infinity: INFEASIBLE, but 2 - 1e30 is the exact optimum " \
        f"(attempts: {[a.solver_status for a in result.attempts]}): map unbounded/other endings to ERROR"
    if result.status is Status.OPTIMAL:
        assert result.objective is not None
        assert abs(Fraction(result.objective) - optimum) <= Fraction(objective_tolerance(problem)), \
            f"bounds past a solver's infinity: OPTIMAL {result.objective!r}, optimum {float(optimum)!r}"
