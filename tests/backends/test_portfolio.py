"""The racing portfolio (backend "auto" and "a,b,c"): proofs, kills, shared incumbents,
the measured choice of backends, and agreement with brute force."""

from __future__ import annotations

import time

import numpy as np
import pytest
from tiny_problems import two_cell_relu

from smug_opt import Problem, Status, solve, verify
from smug_opt.portfolio import LARGE_ROWS, auto_backends, describe, race_backends
from smug_opt.result import Proof
from smug_opt.testing import brute_force
from smug_opt.testing.instances import mixed, relu_network


def _cover() -> Problem:
    return Problem.from_arrays([[1, 1, 0, 0, 1], [0, 1, 1, 0, 0], [0, 0, 1, 1, 1], [1, 0, 0, 1, 0]],
                               ">=", 1.0)


def test_the_first_proof_ends_the_race_and_the_rest_are_killed(toy_plugin: str) -> None:
    start = time.monotonic()
    r = solve(_cover(), "toy-bruteforce,toy-hang", time_limit=30)
    wall = time.monotonic() - start
    assert r.status is Status.OPTIMAL and r.objective == 2.0 and verify(_cover(), r.x).ok
    assert wall < 15, f"the hanging backend was not stopped ({wall:.1f}s)"
    entries = {e.backend: e for e in r.race}
    assert entries["toy-bruteforce"].proved and entries["toy-bruteforce"].best_solution
    assert not entries["toy-hang"].proved and entries["toy-hang"].status in ("STOPPED", "NO_SOLUTION")
    assert r.backend == "toy-bruteforce,toy-hang"
    assert any("proved it" in line for line in describe(r))


def test_a_start_and_a_bound_from_different_backends_prove_together(toy_plugin: str) -> None:
    # toy-hang never answers; HiGHS proves the bound 2; the optimal start is the solution
    r = solve(_cover(), "highs,toy-hang", time_limit=30, start=[0, 1, 0, 1, 0])
    assert r.status is Status.OPTIMAL and r.objective == 2.0 and r.bound == 2.0


def _decided_by_board(bounds: dict[str, float]) -> tuple[Status, Proof | None]:
    """A race of HiGHS and z3 decided while both still ran: HiGHS's verified solution 2
    (the optimum of the cover) on the board, ``bounds`` posted by the named backends."""
    from smug_opt.backend import SolveOptions
    from smug_opt.portfolio import _Board, _combine, _Entry

    problem = _cover()
    board = _Board(problem, 1e-9)
    board.offer("highs", verify(problem, np.array([0.0, 1.0, 0.0, 1.0, 0.0])))
    for name, bound in bounds.items():
        board.post_bound(name, bound)
    r = _combine(problem, "highs,z3", [_Entry("highs"), _Entry("z3")], board, SolveOptions(), 1.0)
    return r.status, r.proof


def test_a_race_decided_by_an_exact_bound_is_proven_exactly_whoever_found_the_solution() -> None:
    """z3's bound (an exact backend's) met exactly by HiGHS's verified solution proves it in
    exact arithmetic; a float solver's bound, or an exact bound below the objective beside a
    float one that decides, proves it only within the float tolerance."""
    assert _decided_by_board({"z3": 2.0}) == (Status.OPTIMAL, Proof.EXACT)
    assert _decided_by_board({"highs": 2.0}) == (Status.OPTIMAL, Proof.SOLVER)
    assert _decided_by_board({"z3": 1.0, "highs": 2.0}) == (Status.OPTIMAL, Proof.SOLVER)
    assert _decided_by_board({"z3": 1.0}) == (Status.FEASIBLE, None)


def test_a_race_without_a_proof_keeps_the_best_solution_and_bound(toy_plugin: str) -> None:
    start = np.ones(5)
    r = solve(_cover(), "toy-hang,toy-crash", time_limit=1.0, grace=0.5, start=start)
    assert r.status is Status.FEASIBLE and r.objective == 5.0
    # no backend proved a bound; the cover rows (each a cardinality row) state one
    assert r.bound == 1.0 and "bound 1 by construction: row 0 keeps at least 1" in r.message
    assert len(r.race) == 2


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_auto_agrees_with_brute_force(seed: int) -> None:
    for problem in (mixed(seed), relu_network(seed)):
        expected = brute_force(problem)
        r = solve(problem, "auto", time_limit=30)
        assert r.status is Status.OPTIMAL and r.objective == float(expected.objective), r.message
        assert verify(problem, r.x).ok


def test_auto_chooses_by_problem_class() -> None:
    assert auto_backends(relu_network(1))[:2] == ("cpsat", "highs")
    assert auto_backends(mixed(1))[:2] == ("highs", "mip-cbc")
    big = Problem.from_arrays(np.ones((LARGE_ROWS, 3)), ">", 0.5)
    assert auto_backends(big)[:2] == ("highs", "z3")
    assert race_backends(mixed(1), "auto", workers=2) == ["highs", "mip-cbc"]
    assert race_backends(mixed(1), "auto", workers=1) == ["highs"]
    assert race_backends(mixed(1), "scip, z3") == ["scip", "z3"]


@pytest.mark.parametrize(("backend", "error"), [("highs,nope", "nope"), ("highs,highs", "distinct"),
                                                (",", "distinct")])
def test_bad_races_are_named(backend: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        solve(_cover(), backend)


def test_a_race_solves_the_strengthened_parts() -> None:
    """Strengthening works inside a race: each part is raced, the answer is verified
    against the original problem and agrees with a single backend and brute force."""
    problem = Problem.from_arrays([[1.0, 1.0, 2.0, -3.0], [0.0, 1.0, -1.0, 1.0]], ">", [0.0, 0.5])
    raced = solve(problem, "highs,cpsat", time_limit=20, strengthen=True)
    single = solve(problem, "highs", time_limit=20, strengthen=False)
    assert raced.strengthening is not None and raced.strengthening.applied
    assert raced.status is single.status is Status.OPTIMAL
    assert raced.objective == single.objective == float(brute_force(problem).objective)
    assert verify(problem, raced.x).ok and raced.backend == "highs,cpsat"


def test_a_race_gives_each_backend_its_own_options_and_names_unknown_ones() -> None:
    """``presolve`` is HiGHS's option: in a race with CBC it reaches HiGHS only and the race
    proves the optimum; an option no raced backend declares is refused before any worker."""
    problem = _cover()
    raced = solve(problem, "highs,mip-cbc", time_limit=20, extras={"presolve": "off"})
    assert raced.status is Status.OPTIMAL and raced.objective == float(brute_force(problem).objective)
    assert [e.status for e in raced.race if e.status == Status.ERROR.name] == [], raced.race
    with pytest.raises(ValueError, match="no backend of the race .* accepts the option.*'no_such'"):
        solve(problem, "highs,mip-cbc", time_limit=20, extras={"no_such": 1})


def test_race_result_is_json_ready() -> None:
    import json

    r = solve(_cover(), "highs,mip-cbc", time_limit=20)
    out = json.loads(json.dumps(r.to_dict()))
    assert {e["backend"] for e in out["race"]} == {"highs", "mip-cbc"}


def test_builder_problem_with_relus_races_cpsat_first() -> None:
    r = solve(two_cell_relu(), "auto", time_limit=20)
    assert r.status is Status.OPTIMAL and r.objective == 2.0
    assert r.race[0].backend == "cpsat"


def test_bench_and_stress_accept_auto_as_one_pseudo_backend() -> None:
    from smug_opt.bench.harness import resolve_backends

    assert resolve_backends("highs,auto") == ("highs", "auto")
    with pytest.raises(ValueError, match="nope"):
        resolve_backends("auto,nope")


# ------------------------------------------------------- race orders: a shipped data file
def _portfolio_pairs():
    """benchmarks/portfolio_pairs.py, the script that writes the race orders."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "portfolio_pairs.py"
    spec = importlib.util.spec_from_file_location("portfolio_pairs", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_race_orders_come_from_the_package_data_file_unchanged() -> None:
    from smug_opt.portfolio import FIRST_LAYER_ORDER, LARGE_ORDER, RACE_ORDERS, RELU_ORDER

    assert RELU_ORDER == ("cpsat", "highs", "mip-cbc", "scip", "pulp-cbc", "z3")
    assert LARGE_ORDER == ("highs", "z3", "mip-cbc", "scip", "pulp-cbc", "cpsat")
    assert FIRST_LAYER_ORDER == ("highs", "mip-cbc", "pulp-cbc", "scip", "cpsat", "z3")
    assert set(RACE_ORDERS) == {"relu", "large", "first_layer"}


def test_the_race_orders_file_is_what_the_bench_writes_from_the_committed_runs() -> None:
    import json

    pairs = _portfolio_pairs()
    data = json.loads(pairs.ORDERS_FILE.read_text())
    assert pairs.written_orders(data) == data


def test_a_run_reorders_backends_only_beyond_the_noise() -> None:
    pairs = _portfolio_pairs()
    Score = pairs.Score
    singles = {("a",): Score(5, 2.0), ("b",): Score(5, 2.0), ("c",): Score(5, 1.0), ("d",): Score(5, 1.5)}
    found = {**singles, ("a", "b"): Score(5, 1.9), ("a", "c"): Score(5, 1.0), ("a", "d"): Score(5, 2.0),
             ("b", "c"): Score(5, 1.0), ("b", "d"): Score(5, 2.0), ("c", "d"): Score(5, 1.0)}
    # a + c (1.0) beats a + b (1.9) beyond 15%: they lead, the better one first; d (1.5) moves
    # ahead of b (2.0), and x (not measured) keeps its place
    assert pairs.reordered(["a", "b", "x", "d", "c"], found, 0.15) == ["c", "a", "d", "x", "b"]
    near = {**found, ("a", "c"): Score(5, 1.8), ("b", "c"): Score(5, 1.8), ("c", "d"): Score(5, 1.8)}
    near = {**near, ("c",): Score(5, 1.8), ("d",): Score(5, 1.9)}
    assert pairs.reordered(["a", "b", "x", "d", "c"], near, 0.15) == ["a", "b", "x", "d", "c"]  # noise
