"""The safe search's cover cuts are valid: every cut the separator returns holds at every
feasible binary point (brute force), a planted invalid cover is rejected by the exact check
(also where float64 arithmetic would accept it), and the search with cuts still finds the
brute-forced optimum."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from random_problems import first_layer_like, problems

from smug_opt import Problem
from smug_opt.deadline import Deadline
from smug_opt.safe_search import Settings, search
from smug_opt.safe_search.covers import CoverSeparator, KnapsackRow, cover_holds, knapsack_rows
from smug_opt.safe_search.relaxation import Relaxation
from smug_opt.testing.brute_force import brute_force
from smug_opt.verification import decide_rows

pytest.importorskip("highspy")


def _feasible_points(problem: Problem) -> np.ndarray:
    points = np.array(list(itertools.product((0.0, 1.0), repeat=problem.num_vars)))
    return points[decide_rows(problem, points).holds.all(axis=1)]  # exact where float64 cannot tell


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=problems, seed=st.integers(0, 2**32 - 1))
def test_every_separated_cover_holds_at_every_feasible_point(problem: Problem, seed: int) -> None:
    separator = CoverSeparator(knapsack_rows(problem))
    rng = np.random.default_rng(seed)
    feasible = _feasible_points(problem)
    for x in [rng.uniform(0, 1, problem.num_vars), rng.integers(0, 2, problem.num_vars).astype(float)]:
        for cut in separator.separate(x):
            assert cut.violation(x) > 0
            activity = feasible[:, cut.cols] @ cut.coefs
            assert np.all(activity >= cut.rhs), (cut, feasible[activity < cut.rhs])


def test_a_cover_that_float64_would_accept_is_rejected_exactly() -> None:
    """``x1 + 2**-53·x2 + x3 > 1``: in float64 ``1 + 2**-53`` is 1, so "x3 must be on" looks
    valid; exactly, (1, 1, 0) satisfies the row, and the check says so."""
    row = KnapsackRow(np.arange(3), np.array([1.0, 2.0**-53, 1.0]), 1.0, strict=True)
    assert 1.0 + 2.0**-53 <= 1.0  # the float64 misjudgement the check must not make
    assert not cover_holds(row, np.array([2]), 1)
    assert cover_holds(row, np.array([1, 2]), 1)  # with x2 off, x1 alone reaches only 1: not > 1
    p = Problem.from_arrays([[1.0, 2.0**-53, 1.0]], ">", [1.0])
    feasible = _feasible_points(p)
    for x in (np.array([1.0, 1.0, 0.0]), np.array([0.9, 0.9, 0.1]), np.array([0.0, 0.0, 0.0])):
        for cut in CoverSeparator(knapsack_rows(p)).separate(x):
            assert np.all(feasible[:, cut.cols] @ cut.coefs >= cut.rhs), cut


def test_a_planted_invalid_cover_is_rejected() -> None:
    """``3x1 + 2x2 + 2x3 >= 4``: {x1} is no cover (x2 = x3 = 1 reach 4); {x1, x2} needs one
    of its two on (x3 alone reaches 2), not both (x1 and x3 reach 5)."""
    row = KnapsackRow(np.arange(3), np.array([3.0, 2.0, 2.0]), 4.0, strict=False)
    assert not cover_holds(row, np.array([0]), 1)
    assert cover_holds(row, np.array([0, 1]), 1)
    assert not cover_holds(row, np.array([0, 1]), 2)
    assert not cover_holds(row, np.array([0, 1]), 3)  # more than the set: never claimed


def test_cover_cuts_lift_the_safe_lp_bound_to_the_integer_optimum() -> None:
    """``3·Σ x > 10`` over 10 binaries: the LP's minimum of ``Σ x`` is 10/3, every solution
    has 4 on; a few rounds of covers say so: the safe bound exceeds 3."""
    p = Problem.from_arrays([[3.0] * 10], ">", [10.0])
    lp, separator = Relaxation(p), CoverSeparator(knapsack_rows(p))
    lb, ub = np.zeros(10), np.ones(10)
    bounds = []
    for _ in range(5):
        answer = lp.solve(lb, ub, 30.0)
        assert answer.status == "optimal" and answer.x is not None and answer.duals is not None
        bounds.append(lp.safe_bound(answer.duals, lb, ub)[0])
        cuts = separator.separate(answer.x)
        assert all(c.violation(answer.x) > 0 for c in cuts)
        lp.add_cuts(cuts)
    assert bounds[0] < 3.34 and bounds[-1] > 3 and lp.cuts > 0


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=first_layer_like())
def test_the_search_with_cuts_finds_the_brute_forced_optimum(problem: Problem) -> None:
    """On SMUG-shaped rows (the generic ones, with coefficients up to 1e16, can leave HiGHS
    without an answer at every node: the slow tests of test_safe_search.py cover them)."""
    optimum = brute_force(problem).objective
    outcome = search(problem, None, Deadline.after(60), Settings(cut_rounds=5, node_cut_rounds=2))
    assert outcome.proven, outcome.why
    assert (outcome.best is None) if optimum is None else (
        outcome.best is not None and outcome.best.objective == optimum)
