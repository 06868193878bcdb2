"""The neighbourhood search on large strengthened parts: windows are connected cells, a
window's problem accepts exactly the original's points that agree outside it, the search
returns verified solutions only, and its solution proves a part where it meets the bound."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from conftest import skip_unless_usable

from smug_opt import Problem, Status, solve, verify
from smug_opt.backend_choice import BackendChoice, ChoiceKind
from smug_opt.deadline import Deadline
from smug_opt.result import Proof
from smug_opt.strengthen import neighbourhood_search as search
from smug_opt.strengthen import strengthen
from smug_opt.testing import brute_force


def _chain(cells: int, seed: int) -> Problem:
    """Bias-free rows over overlapping windows of 4 cells (a 1-D stem): one connected part."""
    rng = np.random.default_rng(seed)
    rows = cells - 3
    A = np.zeros((rows, cells))
    for i in range(rows):
        A[i, i:i + 4] = rng.normal(size=4)
    A *= np.sign(A.sum(axis=1) + 1e-9)[:, None]  # the full mask holds every row
    return Problem.from_arrays(A, ">", np.zeros(rows))


def _adjacency(problem: Problem):
    pattern = (problem.A != 0).astype(np.int32)
    return (pattern.T @ pattern).tocsr()


def test_a_window_is_cells_connected_through_rows_around_its_centre() -> None:
    problem = _chain(20, 0)
    free = search.window(_adjacency(problem), 10, 5)
    assert free.tolist() == sorted(free.tolist()) and 10 in free and free.size == 5
    assert free.max() - free.min() <= 6  # a chain: the window stays near its centre
    assert search.window(_adjacency(problem), 0, 100).size == 20


def test_a_window_accepts_exactly_the_points_that_agree_outside_it() -> None:
    problem = _chain(10, 1)
    x = np.ones(10)
    free = np.array([2, 3, 4, 5])
    sub = search.restricted(problem, x, free)
    for bits in range(2 ** free.size):
        y = x.copy()
        y[free] = (bits >> np.arange(free.size)) & 1
        inside = verify(sub, y[free]).ok
        assert inside == verify(problem, y).ok


def test_the_search_returns_a_verified_solution_and_a_whole_window_finds_the_optimum(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With windows as large as the problem the first window is the problem: z3 solves it
    to its optimum (brute force); whatever it returns is verified."""
    skip_unless_usable("highs")
    skip_unless_usable("z3")
    problem = _chain(12, 2)
    optimum = brute_force(problem).objective
    monkeypatch.setattr(search, "WINDOW_CELLS", 12)
    with search.NeighbourhoodSearch(problem, Deadline.after(20)) as running:
        running._thread.join(timeout=5)
        found, windows = running.stop()
    assert found is not None and found.ok and verify(problem, found.x).ok
    assert windows >= 1 and float(problem.objective @ found.x) == optimum == found.objective


def test_the_search_needs_binary_problems() -> None:
    from tiny_problems import two_cell_relu

    with pytest.raises(ValueError, match="binary-only"):
        search.NeighbourhoodSearch(two_cell_relu(), Deadline.after(1))


def test_the_searchs_solution_proves_a_part_where_it_meets_the_bound() -> None:
    """A part's solve that ended FEASIBLE at a bound equal to the optimum, with a worse
    solution, is OPTIMAL with the search's optimal one, proven the way that bound is: exactly
    when it is an exact backend's, else by the float solver's word; a bound below the
    optimum proves nothing; a worse found solution changes nothing."""
    from smug_opt.strengthen.solve_parts import _with_found

    skip_unless_usable("highs")
    problem = _chain(12, 3)
    optimal = brute_force(problem)
    found = verify(problem, optimal.x)
    solved = solve(problem, "highs", time_limit=30, strengthen=False)
    worse = np.ones(12)
    ended = replace(solved, status=Status.FEASIBLE, x=worse, objective=12.0, bound=optimal.objective,
                    proof=None)
    proven = _with_found(problem, ended, found, 3, exact_bound=False)
    assert proven.status is Status.OPTIMAL and proven.objective == optimal.objective
    assert proven.proof is Proof.SOLVER and verify(problem, proven.x).ok and "3 windows" in proven.message
    exactly = _with_found(problem, ended, found, 3, exact_bound=True)
    assert exactly.status is Status.OPTIMAL and exactly.proof is Proof.EXACT
    below = replace(ended, bound=optimal.objective - 1)
    for exact_bound in (False, True):
        open_ = _with_found(problem, below, found, 3, exact_bound=exact_bound)
        assert open_.status is Status.FEASIBLE and open_.proof is None
        assert open_.objective == optimal.objective and open_.bound == optimal.objective - 1
    kept = _with_found(problem, proven, verify(problem, worse), 1, exact_bound=False)
    assert kept.status is Status.OPTIMAL and np.array_equal(kept.x, proven.x)


def test_the_search_verifies_each_point_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every point the search verifies is verified once (a window that finds no better
    point is not verified at all), and its verification is what the part's result uses."""
    from smug_opt.strengthen import solve_parts

    skip_unless_usable("highs")
    skip_unless_usable("z3")
    problem = _chain(40, 6)
    seen: list[bytes] = []

    def counted(p: Problem, x: np.ndarray, **kwargs: object):
        seen.append(np.asarray(x, dtype=np.float64).tobytes())
        return verify(p, x, **kwargs)

    monkeypatch.setattr(search, "verify", counted)
    monkeypatch.setattr(search, "WINDOW_CELLS", 10)
    with search.NeighbourhoodSearch(problem, Deadline.after(20), start=np.ones(40)) as running:
        running._thread.join(timeout=8)
        found, windows = running.stop()
    assert found is not None and found.ok and windows >= 2
    assert len(seen) == len(set(seen)) and len(seen) < windows + 2  # start, HiGHS's, improvements
    monkeypatch.setattr(solve_parts, "verify", counted)
    before = len(seen)
    ended = solve(problem, "highs", time_limit=30, strengthen=False)
    ended = replace(ended, status=Status.FEASIBLE, x=np.ones(40), objective=40.0, proof=None)
    used = solve_parts._with_found(problem, ended, found, windows, exact_bound=True)
    assert len(seen) == before and np.array_equal(used.x, found.x)


def test_only_large_parts_of_the_part_race_are_searched(monkeypatch: pytest.MonkeyPatch) -> None:
    from smug_opt.strengthen.solve_parts import PART_RACE, searched

    monkeypatch.setattr(search, "usable", lambda: True)
    part = strengthen(_chain(40, 4)).parts[0]
    race = BackendChoice(ChoiceKind.RACE, PART_RACE)
    monkeypatch.setattr(search, "MIN_CELLS", part.columns.size)
    assert searched(part, race)
    assert not searched(part, BackendChoice.parse("highs", check=False))
    assert searched(part, race, {"maxres.max_core_size": 1000})  # z3's own extras
    assert not searched(part, race, {"presolve": "off"})  # HiGHS's: the race keeps HiGHS
    monkeypatch.setattr(search, "MIN_CELLS", part.columns.size + 1)
    assert not searched(part, race)


def test_a_part_is_searched_exactly_when_a_race_of_the_partner_takes_the_extras(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``searched`` asks the race's own rule (:func:`smug_opt.portfolio.unaccepted_extras`):
    a large part is searched exactly when racing its partners (z3, and RC2 where usable)
    would not refuse the extras."""
    from smug_opt.portfolio import _check_race_extras, unaccepted_extras
    from smug_opt.strengthen.solve_parts import PART_RACE, searched, searched_partners

    skip_unless_usable("z3")
    monkeypatch.setattr(search, "usable", lambda: True)
    part = strengthen(_chain(40, 4)).parts[0]
    monkeypatch.setattr(search, "MIN_CELLS", 1)
    race = BackendChoice(ChoiceKind.RACE, PART_RACE)
    partners = searched_partners()
    assert partners[0] == "z3"
    for extras in ({}, {"maxres.max_core_size": 1000}, {"presolve": "off"},
                   {"rlimit": 5, "mip_rel_gap": 0.1}, {"trim": 2}):
        refused = unaccepted_extras(partners, extras)
        assert searched(part, race, extras) is not refused
        if refused:
            with pytest.raises(ValueError, match="accepts the option"):
                _check_race_extras(list(partners), extras)
        else:
            _check_race_extras(list(partners), extras)
    assert unaccepted_extras(("z3", "highs"), {"presolve": "off", "zzz": 1}) == ["zzz"]


def test_the_second_pass_searches_a_large_part_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A large part left unproven by its first solve is solved again in the second pass with
    the search beside z3, as the first time (not by the part race alone)."""
    from smug_opt.backend import SolveOptions
    from smug_opt.strategies import Race, WorkerSettings
    from smug_opt.strengthen.solve_parts import PART_RACE, PART_Z3_EXTRAS, _second_pass

    for name in ("highs", "z3"):
        skip_unless_usable(name)
    monkeypatch.setattr(search, "MIN_CELLS", 1)
    part = strengthen(_chain(30, 7)).parts[0]
    step = Race(WorkerSettings(SolveOptions(extras=dict(PART_Z3_EXTRAS)), isolate=True, grace=2.0,
                               memory_limit_mb=None))
    ones = np.ones(part.problem.num_vars)
    first = solve(part.problem, "highs", time_limit=30, strengthen=False)
    results = [replace(first, status=Status.FEASIBLE, x=ones, objective=float(part.problem.objective @ ones),
                       proof=None, message="")]
    _second_pass([part], results, (step, step), BackendChoice(ChoiceKind.RACE, PART_RACE),
                 Deadline.after(30), PART_Z3_EXTRAS)
    again = results[0]
    assert "neighbourhood search" in again.message
    assert again.status is Status.OPTIMAL and again.objective == first.objective
    assert verify(part.problem, again.x).ok


def test_solve_under_auto_searches_large_parts_and_keeps_the_optimum(monkeypatch: pytest.MonkeyPatch) -> None:
    """Through :func:`smug_opt.solve`: with every part counted large, ``auto`` races z3
    against the search and returns the optimum HiGHS proves on the problem as stated; with a
    HiGHS option among the extras the parts keep HiGHS in their race and solve as well."""
    for name in ("highs", "z3"):
        skip_unless_usable(name)
    monkeypatch.setattr(search, "MIN_CELLS", 1)
    problem = _chain(30, 5)
    optimum = solve(problem, "highs", time_limit=30, strengthen=False).objective
    searched_run = solve(problem, "auto", time_limit=30, strengthen=True)
    assert searched_run.status is Status.OPTIMAL and searched_run.objective == optimum
    assert verify(problem, searched_run.x).ok and "neighbourhood search" in searched_run.message
    kept = solve(problem, "auto", time_limit=30, strengthen=True, extras={"presolve": "off"})
    assert kept.status is Status.OPTIMAL and kept.objective == optimum
    assert "neighbourhood search" not in kept.message
