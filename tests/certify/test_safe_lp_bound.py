"""The safe LP bound (Neumaier-Shcherbina on an LP solver's duals): never above the exact
optimum, and certify's first, cheap step for integral objectives."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from random_problems import generic

from smug_opt import Problem, Status, registry, solve
from smug_opt.deadline import Deadline
from smug_opt.safe_lp_bound import safe_lp_bound, strengthened_safe_lp_bound
from smug_opt.testing import brute_force

pytestmark = pytest.mark.skipif("highs" not in registry.available_backends(), reason="needs HiGHS")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=generic())
def test_never_above_the_exact_optimum(problem: Problem) -> None:
    exact = brute_force(problem)
    strengthened = strengthened_safe_lp_bound(problem, deadline=Deadline.after(5))
    for bound in (safe_lp_bound(problem, seconds=5), strengthened):
        if exact.feasible and bound is not None:
            assert Fraction(bound) <= exact.objective, (bound, exact.objective)


def test_a_fractional_lp_optimum_proves_the_count() -> None:
    p = Problem.from_arrays([[1.0, 1.0, 1.0]], ">=", [1.5])  # LP 1.5, optimum 2
    bound = safe_lp_bound(p, seconds=5)
    assert 1.0 < bound <= 1.5


def test_each_part_of_an_integral_objective_rounds_its_bound_up() -> None:
    """Two independent knapsack rows (two parts after strengthening), each with LP bound
    7/3 and optimum 3: the parts' bounds summed (14/3) do not prove 6, rounded up (3 + 3) they do."""
    w, c = [6.0, 4.0, 4.0, 8.0, 4.0, 3.0], [3.0, 1.0, 2.0, 1.0, 1.0, 3.0]
    A = np.zeros((2, 12))
    A[0, :6], A[1, 6:] = w, w
    p = Problem.from_arrays(A, ">=", [13.55, 13.55], objective=c + c)
    assert brute_force(p).objective == 6
    assert strengthened_safe_lp_bound(p, deadline=Deadline.after(5)) == 6.0


def test_certify_settles_by_the_lp_bound_before_z3() -> None:
    n = 20  # too many binaries to enumerate; not a cardinality row (no proof by construction)
    weights = np.where(np.arange(n) % 2 == 0, 2.0, 1.0)
    p = Problem.from_arrays([weights], ">=", [5.5])  # LP 2.75, optimum 3 (three 2s)
    r = solve(p, "highs", time_limit=30, certify=True)
    assert r.status is Status.OPTIMAL and r.objective == 3.0 and r.proof == "exact"
    assert "the safe LP bound" in r.message and "z3" not in r.message


def test_the_old_seconds_keyword_still_works_with_a_deprecation_warning() -> None:
    problem = Problem.from_arrays([[1.0, 1.0]], ">=", [1.0])
    with pytest.warns(DeprecationWarning, match="deadline=Deadline.after"):
        old = strengthened_safe_lp_bound(problem, seconds=5)
    assert old == strengthened_safe_lp_bound(problem, deadline=Deadline.after(5)) and old is not None
    with pytest.raises(ValueError, match="deadline must be a Deadline with a time limit"):
        strengthened_safe_lp_bound(problem, deadline=Deadline.none())
