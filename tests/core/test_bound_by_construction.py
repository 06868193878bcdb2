"""Optima exact by construction: a verified objective meeting a bound the problem states
outright (its boxes, a cardinality row) is an exact OPTIMAL, whatever solver found it."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import numpy as np
import pytest
from tiny_problems import random_input, random_mlp

from smug_opt import Problem, Status, solve
from smug_opt.bound_by_construction import construction_bound, exact_by_construction, optimal_start
from smug_opt.verification import verify


def test_an_empty_mask_is_exact() -> None:
    p = Problem.from_arrays([[1.0, -2.0, 0.5]], "<=", [3.0])  # the empty mask holds: 0 cells
    r = solve(p, "highs", time_limit=20)
    assert r.status is Status.OPTIMAL and r.objective == 0.0 and r.proof == "exact"
    assert "optimal by construction" in r.message and r.bound == 0.0
    assert r.exactness("mask") == "mask verified exactly; minimality proven exactly"


def test_a_negative_cost_reaching_its_box_is_exact() -> None:
    p = Problem.from_arrays([[1.0, 1.0]], ">=", [1.0], objective=[-0.1, 0.2])
    r = solve(p, "highs", time_limit=20)
    assert r.status is Status.OPTIMAL and r.proof == "exact" and r.objective == -0.1
    assert Fraction(r.bound) <= Fraction(-0.1)


def test_a_cardinality_row_proves_a_count() -> None:
    A = [[1.0, 1.0, 1.0, 1.0], [3.0, 1.0, 1.0, 0.5]]
    p = Problem.from_arrays(A, [">=", ">="], [2.0, 3.5])  # two cells needed, {0, 1} suffices
    bound = construction_bound(p)
    assert bound.value == 2 and "row 0" in bound.why
    r = solve(p, "highs", time_limit=20)
    assert r.status is Status.OPTIMAL and r.objective == 2.0 and r.proof == "exact"
    harder = Problem.from_arrays(A, [">=", ">="], [2.0, 5.0])  # optimum 3 > the row's 2
    r = solve(harder, "highs", time_limit=20, certify=False)  # not by construction: the solver's word
    assert r.objective == 3.0 and r.proof == "solver"


@pytest.mark.parametrize(("row", "sense", "rhs", "k"), [
    ([0.5, 0.5, 0.5, 0.5], ">", 1.0, 3),      # Σx > 2
    ([-1.0, -1.0, -1.0, -1.0], "<=", -2.5, 3),  # Σx >= 2.5
    ([1.0, 1.0, 1.0, 1.0], "==", 2.0, 2),
])
def test_cardinality_rows_are_read_exactly(row: list, sense: str, rhs: float, k: int) -> None:
    p = Problem.from_arrays([row], sense, [rhs], objective=[2.0, 3.0, 2.0, 4.0])
    assert construction_bound(p).value == 2 * k  # k cells at the least cost, 2


def test_a_feasible_result_at_the_bound_becomes_optimal() -> None:
    p = Problem.from_arrays([[1.0, 1.0, 1.0]], ">=", [1.0])
    r = solve(p, "highs", time_limit=20, strengthen=False)
    timed_out = replace(r, status=Status.FEASIBLE, proof=None, bound=0.0)
    proven = exact_by_construction(p, timed_out)
    assert proven.status is Status.OPTIMAL and proven.proof == "exact" and proven.bound == 1.0
    costly = replace(timed_out, x=np.ones(3), objective=3.0)  # above the row: stays FEASIBLE
    raised = exact_by_construction(p, costly)
    assert raised.status is Status.FEASIBLE and raised.proof is None
    assert raised.bound == 1.0 and raised.gap == pytest.approx(2 / 3)
    assert "bound 1 by construction: row 0 keeps at least 1 of its cells" in raised.message
    assert exact_by_construction(p, raised) is raised  # already at the row's bound


def test_a_solver_bound_above_the_rows_is_kept_and_boxes_raise_nothing() -> None:
    p = Problem.from_arrays([[1.0, 1.0, 1.0]], ">=", [1.0])
    r = solve(p, "highs", time_limit=20, strengthen=False)
    higher = replace(r, status=Status.FEASIBLE, proof=None, x=np.ones(3), objective=3.0, bound=2.0)
    assert exact_by_construction(p, higher) is higher
    no_row = Problem.from_arrays([[1.0, 2.0, 1.0]], ">=", [1.0])  # not a cardinality row
    r = solve(no_row, "highs", time_limit=20, strengthen=False)
    unbounded = replace(r, status=Status.FEASIBLE, proof=None, x=np.ones(3), objective=3.0, bound=None)
    assert exact_by_construction(no_row, unbounded) is unbounded  # the boxes' 0 is no news
    nothing = replace(unbounded, status=Status.NO_SOLUTION, x=None, objective=None, gap=None)
    assert exact_by_construction(p, nothing).bound == 1.0  # no incumbent, a bound all the same


def test_a_stress_record_that_times_out_keeps_min_cells_as_its_bound() -> None:
    """The race may stop before any solver's bound reaches the encoder's cardinality row: the
    result's bound is still the row's (issue 17: maxpool/cifar records said bound 0)."""
    from smug_opt.encode import full_network

    n = len(full_network(random_mlp(1), random_input(1)).metadata["cells"])
    p = full_network(random_mlp(1), random_input(1), max_cells=n)  # every cell allowed
    k = p.metadata["min_cells"]
    assert 1 <= k < n
    r = solve(p, "highs", time_limit=30)
    everything = np.zeros(p.num_vars)
    everything[:n] = 1.0  # every cell: a feasible mask above the optimum (ReLUs recomputed)
    v = verify(p, everything)
    assert v.ok
    timed_out = replace(r, status=Status.FEASIBLE, proof=None, x=v.x, objective=float(n), bound=0.0)
    raised = exact_by_construction(p, timed_out)
    assert raised.status is Status.FEASIBLE and raised.bound == float(k)
    assert "min_cells" in raised.message and "enumeration" in raised.message


def test_a_stress_optimum_at_min_cells_is_exact() -> None:
    from smug_opt.encode import full_network

    p = full_network(random_mlp(1), random_input(1))
    assert p.metadata["min_cells"] == 1
    r = solve(p, "highs", time_limit=30)
    assert r.status is Status.OPTIMAL and r.objective == 1.0 and r.proof == "exact"
    assert "keeps at least 1 of its cells" in r.message and "min_cells" in r.message
    assert "before solving" in r.message and not r.attempts  # the greedy start settled it


def test_a_start_at_the_bound_needs_no_solver_and_others_do() -> None:
    A = [[1.0, 1.0, 1.0, 1.0], [3.0, 1.0, 1.0, 0.5]]
    p = Problem.from_arrays(A, [">=", ">="], [2.0, 3.5])  # optimum 2: {0, 1}
    settled = optimal_start(p, np.array([1.0, 1.0, 0.0, 0.0]), "highs")
    assert settled is not None and settled.status is Status.OPTIMAL and settled.proof == "exact"
    assert settled.objective == 2.0 and settled.bound == 2.0 and settled.verified is True
    assert optimal_start(p, np.array([0.0, 1.0, 1.0, 0.0]), "highs") is None  # 2 cells, fails row 1
    assert optimal_start(p, np.array([1.0, 1.0, 1.0, 0.0]), "highs") is None  # holds, above the bound
    r = solve(p, "highs", time_limit=20, start=np.array([1.0, 1.0, 0.0, 0.0]))
    assert r.status is Status.OPTIMAL and not r.attempts and "before solving" in r.message
    r = solve(p, "highs", time_limit=20, start=np.array([1.0, 1.0, 1.0, 0.0]))
    assert r.status is Status.OPTIMAL and r.objective == 2.0 and r.attempts  # the solver ran
