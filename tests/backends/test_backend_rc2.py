"""The RC2 MaxSAT backend: its exact CNF encoding of rows (against exact arithmetic, with
a real SAT solver), its exact answers (against brute force), its refusals and its limit."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from random_problems import coefficient, problems

from smug_opt import Problem, ProblemBuilder, Sense, Status, solve, verify
from smug_opt.registry import backend_class
from smug_opt.testing import brute_force

pytestmark = pytest.mark.skipif(backend_class("rc2", check_available=False).unavailable_reason()
                                is not None, reason="python-sat is not installed")

_HOLDS = {"<=": lambda a, b: a <= b, ">=": lambda a, b: a >= b, "==": lambda a, b: a == b,
          "<": lambda a, b: a < b, ">": lambda a, b: a > b}


def _encoded(coefs: list[float], sense: str, rhs: float) -> list[list[int]]:
    from smug_opt_backends.pb_cnf import Encoder, at_least_rows

    encoder = Encoder(len(coefs) + 1)
    for lits, weights, bound in at_least_rows(list(range(len(coefs))), coefs, sense, rhs):
        encoder.add(lits, weights, bound, 0)
    return encoder.clauses


def _assert_same_solutions(coefs: list[float], sense: str, rhs: float) -> None:
    """Every 0/1 assignment satisfies the clauses (with some values of the new variables)
    exactly when it satisfies the row in exact rationals."""
    from pysat.solvers import Solver

    clauses = _encoded(coefs, sense, rhs)
    n = len(coefs)
    with Solver(name="cd19", bootstrap_with=[c for c in clauses if c]) as sat:
        for bits in itertools.product([0, 1], repeat=n):
            exact = _HOLDS[sense](sum((Fraction(a) for a, b in zip(coefs, bits, strict=True) if b),
                                      Fraction(0)), Fraction(rhs))
            assumed = [j + 1 if b else -(j + 1) for j, b in enumerate(bits)]
            encoded = all(clauses) and sat.solve(assumptions=assumed)
            assert encoded == exact, (coefs, sense, rhs, bits)


_row = st.tuples(st.lists(coefficient, min_size=1, max_size=7), st.sampled_from(list(_HOLDS)),
                 st.one_of(coefficient, st.sampled_from([0.0, 0.6, 0.30000000000000004])))
_quick = settings(max_examples=150, deadline=None, phases=(Phase.explicit, Phase.generate),
                  suppress_health_check=[HealthCheck.too_slow])


@_quick
@given(row=_row)
def test_clauses_hold_exactly_the_rows_solutions(row: tuple[list[float], str, float]) -> None:
    _assert_same_solutions(*row)


@_quick
@given(row=_row)
def test_bdds_hold_exactly_the_rows_solutions(row: tuple[list[float], str, float]) -> None:
    """The same with every row a BDD (no minimal covers)."""
    from smug_opt_backends import pb_cnf

    kept = pb_cnf.MAX_COVERS
    pb_cnf.MAX_COVERS = 0
    try:
        _assert_same_solutions(*row)
    finally:
        pb_cnf.MAX_COVERS = kept


def test_minimal_covers_of_a_small_row() -> None:
    """3a + 2b + 2c + d >= 5 (slack 3): a cover weighs more than 3 and no longer does
    without its lightest literal ({a, d}: without both, b + c = 4 < 5)."""
    from smug_opt_backends.pb_cnf import minimal_covers

    assert sorted(map(sorted, minimal_covers([3, 2, 2, 1], 5) or [])) == [[0, 1], [0, 2], [0, 3], [1, 2]]


@settings(max_examples=25, deadline=None, phases=(Phase.explicit, Phase.generate),
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(problem=problems)
def test_every_answer_is_the_exact_optimum(problem: Problem) -> None:
    """An exact backend on tiny problems: always OPTIMAL with brute force's optimum (the
    bound equal to it) or INFEASIBLE, never FEASIBLE, whatever the coefficients."""
    exact = brute_force(problem)
    result = solve(problem, "rc2", time_limit=20)
    if not exact.feasible:
        assert result.status is Status.INFEASIBLE, result.message
        return
    assert result.status is Status.OPTIMAL, result.message
    assert result.x is not None and verify(problem, result.x).objective == exact.objective
    assert result.bound is not None and Fraction(result.bound) <= exact.objective
    assert exact.objective - Fraction(result.bound) < Fraction(1, 2**40) * max(1, abs(exact.objective))


def test_costs_are_exact_rationals() -> None:
    """0.1 + 0.2 is not 0.3 in floats: the cheaper of {x0, x1} and {x2} is decided exactly."""
    p = Problem.from_arrays([[1.0, 1.0, 2.0]], ">=", 2.0, objective=[0.1, 0.2, 0.30000000000000004])
    r = solve(p, "rc2", time_limit=20)
    assert r.status is Status.OPTIMAL and r.x is not None and r.x.tolist() == [1.0, 1.0, 0.0]
    assert r.proof is not None and r.proof.value == "exact"


def test_refuses_continuous_variables_by_name() -> None:
    b = ProblemBuilder()
    m = b.add_binaries(2)
    z = b.add_continuous(1, 0.0, 1.0)
    b.add_constraints(np.array([[1.0, 1.0, 1.0]]), np.concatenate([m, z]), [Sense.GE], [1.0])
    b.set_objective(m, [1.0, 1.0])
    r = solve(b.build(), "rc2", time_limit=20)
    assert r.status is Status.ERROR and "1 continuous variable" in r.message and "z3" in r.message


def test_refuses_a_row_past_the_node_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """A row whose exact BDD is larger than the budget is an ERROR saying so, not a hang."""
    from smug_opt_backends import pb_cnf

    monkeypatch.setattr(pb_cnf, "MAX_NODES", 3)
    monkeypatch.setattr(pb_cnf, "MAX_COVERS", 0)
    p = Problem.from_arrays([[5.0, 4.0, 3.0, 2.0, 1.5, 1.25]], ">=", 7.0)
    r = solve(p, "rc2", time_limit=20, isolate=False)
    assert r.status is Status.ERROR and "budget of 3 BDD nodes" in r.message


def test_the_time_limit_stops_a_long_bdd_in_process() -> None:
    """One row's BDD takes as long as it takes to build (an 80-column knapsack row: 93 s to
    its 2,000,000-node budget); in process nothing kills it, so the encoder polls the clock."""
    import time

    rng = np.random.default_rng(0)
    w = rng.uniform(1, 1000, 80)
    p = Problem.from_arrays([w.tolist()], ">=", float(w.sum() / 2), objective=rng.uniform(1, 10, 80))
    began = time.monotonic()
    r = solve(p, "rc2", time_limit=1.0, isolate=False)
    assert r.status is Status.NO_SOLUTION and time.monotonic() - began < 5.0


def test_a_row_no_assignment_meets_is_infeasible() -> None:
    p = Problem.from_arrays([[1.0, 1.0], [1.0, 0.0]], [">", "<"], [1.0, 0.0])
    assert solve(p, "rc2", time_limit=20).status is Status.INFEASIBLE
    both_past_two = Problem.from_arrays([[1.0, 1.0]], ">", 2.0)
    assert solve(both_past_two, "rc2", time_limit=20).status is Status.INFEASIBLE
