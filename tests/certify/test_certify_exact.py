"""Exact means exact: issue 19's false exact claims as regressions on every backend, the
certifier's differential check (enumeration and z3 must agree), its exact question, and
random small problems with ReLUs and continuous variables against an exact brute force."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from certify_cases import CASES, Case, assert_no_false_exact_claim
from conftest import FIRST_PARTY, skip_unless_accepts, skip_unless_usable
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from random_problems import coefficient

from smug_opt import Problem, ProblemBuilder, Status, load_problem, registry, solve, verify
from smug_opt.certify import _cross_checked, objective_below
from smug_opt.deadline import Deadline
from smug_opt.exact_enumeration import enumerate_optimum
from smug_opt.exact_questions import ExactQuestions
from smug_opt.testing.brute_force import brute_force, exact_optimum

pytestmark = pytest.mark.skipif("z3" not in registry.available_backends(), reason="needs z3")

REPROS = Path(__file__).resolve().parents[3] / "shared" / "repros"
FLOAT_BACKENDS = [b for b in FIRST_PARTY
                  if not registry.backend_class(b, check_available=False).capabilities.exact]
FAST = ("highs", "cpsat")  # the backends of the campaign; the rest run with -m slow


def _matrix(backends: tuple[str, ...] | list[str], *, slow: bool) -> list:
    marks = [pytest.mark.slow] if slow else []
    return [pytest.param(case, backend, id=f"{case.name}-{backend}", marks=marks)
            for case in CASES for backend in backends]


def _check(case: Case, problem: Problem, backend: str) -> None:
    skip_unless_usable(backend)
    skip_unless_accepts(backend, problem)
    optimum = case.optimum(problem)
    for certify in (True, None):  # explicit, and the numeric-range guard's default
        assert_no_false_exact_claim(problem, optimum, solve(problem, backend, time_limit=30,
                                                            certify=certify))


@pytest.mark.parametrize(("case", "backend"), _matrix(FAST, slow=False)
                         + _matrix([b for b in FIRST_PARTY if b not in FAST], slow=True))
def test_no_false_exact_claim(case: Case, backend: str) -> None:
    _check(case, case.build(), backend)


@pytest.mark.parametrize(("case", "backend"), _matrix(FIRST_PARTY, slow=True))
def test_no_false_exact_claim_on_the_shared_repros(case: Case, backend: str) -> None:
    if not REPROS.is_dir():
        pytest.skip(f"the shared repros are not here ({REPROS})")
    _check(case, load_problem(REPROS / case.repro), backend)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_rebuilt_cases_are_the_shared_repros(case: Case) -> None:
    if not REPROS.is_dir():
        pytest.skip(f"the shared repros are not here ({REPROS})")
    built, stored = case.build(), load_problem(REPROS / case.repro)
    for name in ("kinds", "lb", "ub", "senses", "rhs", "objective", "relu_out", "relu_const",
                 "relu_lo", "relu_hi"):
        assert np.array_equal(getattr(built, name), getattr(stored, name)), name
    assert (built.A != stored.A).nnz == 0 and (built.relu_in != stored.relu_in).nnz == 0


@pytest.mark.parametrize("case", [c for c in CASES if c.name.startswith("relu")], ids=lambda c: c.name)
def test_enumeration_counts_the_relu_outputs_objective(case: Case) -> None:
    p = case.build()
    assert enumerate_optimum(p).objective == brute_force(p).objective


def test_a_wrong_enumeration_is_caught_and_nothing_is_claimed() -> None:
    """Differential: enumeration's answer stands only when z3 confirms it."""
    case = next(c for c in CASES if c.name == "relu_cheap_binaries")
    p = case.build()
    result = solve(p, "highs", time_limit=30)
    worse = verify(p, np.array([1.0, 1, 1, 1, 1, 1, 1, 0]))  # feasible, far from optimal
    assert worse.ok and worse.objective > case.optimum(p)
    from smug_opt.backend import SolveOptions
    from smug_opt.certify import exact_options
    from smug_opt.strategies import SingleBackend, WorkerSettings

    z3 = ExactQuestions(p, SingleBackend(WorkerSettings(exact_options(SolveOptions()), isolate=True,
                                                        grace=1.0, memory_limit_mb=None)), Deadline.none())
    r = _cross_checked(p, result, worse, z3, start=0.0)
    assert r.proof is None and "the exact methods disagree" in r.message, r.message
    assert r.status is Status.FEASIBLE and verify(p, r.x).objective < worse.objective


def test_the_question_asks_below_a_value_that_is_no_float() -> None:
    p = Problem.from_arrays([[1.0, 1.0]], ">=", [2.0], objective=[0.1, 0.2])
    value = Fraction(0.1) + Fraction(0.2)  # the optimum; no float64 equals it
    assert Fraction(float(value)) != value
    question = objective_below(p, value)
    assert question.num_vars > p.num_vars  # written exactly with fixed float terms
    assert sum(map(Fraction, question.lb[p.num_vars:].tolist()), Fraction(question.rhs[-1])) == value
    assert solve(question, "z3", time_limit=30, extras={"encoding": "exact"}).status is Status.INFEASIBLE
    r = solve(p, "highs", time_limit=30, certify=True)
    assert r.status is Status.OPTIMAL and r.proof == "exact" and Fraction(r.bound) <= value


# --------------------------------------------------------------- random problems
@st.composite
def relu_problems(draw: st.DrawFn) -> Problem:
    """Binaries, ReLUs over binaries and earlier ReLU outputs, rows over both, real costs on
    both (the objective's share on ReLU outputs is what enumeration must count)."""
    n, r = draw(st.integers(1, 5)), draw(st.integers(1, 3))
    b = ProblemBuilder()
    m = b.add_binaries(n)
    y = b.add_continuous(r, 0.0, 1e3)
    for k in range(r):
        inputs = [*m, *y[:k]]
        b.add_relus(y[k:k + 1], [[draw(coefficient) for _ in inputs]], inputs,
                    [draw(st.sampled_from([0.0, 1e-9, -1e-9, 0.5, -0.5, 0.1]))])
    every = [*m, *y]
    for _ in range(draw(st.integers(1, 3))):
        b.add_constraints([[draw(coefficient) for _ in every]], every,
                          draw(st.sampled_from(["<=", ">=", "<", ">"])),
                          [draw(st.sampled_from([0.0, 0.3, 1e-9, -1e-9, 1.0, -1.0, 2.5]))])
    b.set_objective(every, [draw(st.sampled_from([0.0, 1.0, 0.1, 0.3, -0.5, 2.0, 1e-7]))
                            for _ in every])
    return b.build()


@st.composite
def continuous_problems(draw: st.DrawFn) -> Problem:
    """Binaries plus one bounded continuous variable in rows and objective."""
    n = draw(st.integers(1, 6))
    b = ProblemBuilder()
    m = b.add_binaries(n)
    lo = draw(st.sampled_from([0.0, -1.0, 0.1, -1e6]))
    t = b.add_continuous(1, lo, lo + draw(st.sampled_from([0.2, 1.0, 2e6, 1e-6])))
    every = [*m, *t]
    for _ in range(draw(st.integers(1, 3))):
        b.add_constraints([[draw(coefficient) for _ in every]], every,
                          draw(st.sampled_from(["<=", ">=", "<", ">", "=="])),
                          [draw(st.sampled_from([0.0, 0.3, 1e-9, -0.1, 1.0, 0.5]))])
    b.set_objective(every, [draw(st.sampled_from([0.0, 1.0, 0.5, 2.0, 1e-3, -0.3]))
                            for _ in every])
    return b.build()


def _certified_against_brute_force(backend: str, problem: Problem) -> None:
    skip_unless_usable(backend)
    optimum = exact_optimum(problem).value
    assert_no_false_exact_claim(problem, optimum, solve(problem, backend, time_limit=30, certify=True))


_common = {"deadline": None, "phases": (Phase.explicit, Phase.reuse, Phase.generate),
           "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large]}


@pytest.mark.parametrize("backend", FLOAT_BACKENDS)
@settings(max_examples=4, **_common)
@given(problem=st.one_of(relu_problems(), continuous_problems()))
def test_certified_claims_match_brute_force(backend: str, problem: Problem) -> None:
    _certified_against_brute_force(backend, problem)


@pytest.mark.slow
@pytest.mark.parametrize("backend", FLOAT_BACKENDS)
@settings(max_examples=150, **_common)
@given(problem=st.one_of(relu_problems(), continuous_problems()))
def test_certified_claims_match_brute_force_long(backend: str, problem: Problem) -> None:
    _certified_against_brute_force(backend, problem)
