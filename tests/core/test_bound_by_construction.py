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
    costly = replace(timed_out, x=np.ones(3), objective=3.0)
    assert exact_by_construction(p, costly) is costly


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
