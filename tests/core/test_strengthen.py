"""Strengthening keeps the problem's meaning: against exact brute force, on random small
problems, for every combination of pieces, and on every backend (on and off agree)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from conftest import FIRST_PARTY, skip_unless_usable
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from random_problems import problems

from smug_opt import Problem, ProblemBuilder, Status, save_problem, solve, verify
from smug_opt.strengthen import Pieces, strengthen, worth_strengthening
from smug_opt.strengthen.rows import knapsack, normal_rows, tables
from smug_opt.testing import brute_force
from smug_opt.verification import decide_rows

MAX_ENUMERATED = 12
PIECE_SETS = [Pieces(), Pieces.parse("none"), Pieces(tables=False), Pieces(implied=False),
              Pieces(fixings=False), Pieces(cuts=False), Pieces(components=False),
              Pieces(integer_rows=False)]
_common = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow,
                                                       HealthCheck.data_too_large]}
_NO_SHRINK = (Phase.explicit, Phase.reuse, Phase.generate)

small_problems = problems.filter(lambda p: p.num_vars <= MAX_ENUMERATED)


def _all_points(n: int) -> np.ndarray:
    return ((np.arange(2**n)[:, None] >> np.arange(n)) & 1).astype(np.float64)


def _exact_cost(problem: Problem, x: np.ndarray) -> Fraction:
    return sum((Fraction(float(c)) for c, v in zip(problem.objective, x, strict=True) if v),
               Fraction(0))


def _check_equivalent(problem: Problem, pieces: Pieces) -> None:
    """The parts together accept exactly the original's points that agree with the
    fixings, and those points include an optimal one."""
    s = strengthen(problem, pieces)
    X = _all_points(problem.num_vars)
    original_ok = _rows_hold(problem, X)
    if not s.applied:
        assert not original_ok.any() or "continuous" in s.stats["note"], s.stats
        return
    decided = s.fixed >= 0
    agree = np.all(X[:, decided] == s.fixed[decided], axis=1)
    parts_ok = np.ones(X.shape[0], dtype=bool)
    for part in s.parts:
        Y = np.hstack([X[:, part.columns], np.ones((X.shape[0], part.carried.size))])
        parts_ok &= _rows_hold(part.problem, Y)
    assert np.array_equal(original_ok[agree], parts_ok[agree]), (pieces, s.stats)
    if original_ok.any():
        best = min(_exact_cost(problem, x) for x in X[original_ok])
        kept = X[original_ok & agree]
        assert kept.shape[0] and min(_exact_cost(problem, x) for x in kept) == best, s.stats


@settings(max_examples=300, phases=_NO_SHRINK, **_common)
@given(problem=small_problems, which=st.sampled_from(range(len(PIECE_SETS))))
def test_strengthened_parts_accept_exactly_the_original_points(problem: Problem, which: int) -> None:
    _check_equivalent(problem, PIECE_SETS[which])


@settings(max_examples=150, phases=_NO_SHRINK, **_common)
@given(problem=small_problems)
def test_parts_solved_by_brute_force_give_the_original_optimum(problem: Problem) -> None:
    exact = brute_force(problem)
    s = strengthen(problem)
    if not s.applied:
        assert not exact.feasible
        return
    answers = [brute_force(part.problem) for part in s.parts]
    if not exact.feasible:
        assert not all(a.feasible for a in answers)
        return
    assert all(a.feasible for a in answers)
    x = s.expand([a.x for a in answers])
    check = verify(problem, x)
    assert check.ok and check.objective == exact.objective
    assert s.offset + sum((a.objective for a in answers), Fraction(0)) == exact.objective


def test_homogeneous_row_gets_the_cardinality_cut() -> None:
    """``a·M > 0`` with mixed signs: the empty mask fails, so some positive cell is needed
    (``M_0 + M_1 + M_2 >= 1``); lifted exactly, ``-3 M_3`` then needs all three positive
    cells (only 1 + 1 + 2 - 3 > 0): ``M_0 + M_1 + M_2 - 2 M_3 >= 1``."""
    problem = Problem.from_arrays([[1.0, 1.0, 2.0, -3.0]], ">", 0.0)
    s = strengthen(problem, Pieces(implied=False, fixings=False, integer_rows=False))
    (part,) = s.parts
    cuts = part.problem.A.toarray()[1:]
    assert [1.0, 1.0, 1.0, -2.0] in cuts.tolist()
    assert part.problem.rhs[1 + cuts.tolist().index([1.0, 1.0, 1.0, -2.0])] == 1
    for cut, rhs in zip(cuts, part.problem.rhs[1:], strict=True):  # every cut is valid
        X = _all_points(4)
        assert np.all(X[_rows_hold(problem, X)] @ cut >= rhs)


def test_a_strict_row_becomes_integer_cuts_exactly() -> None:
    """0.1 + 0.2 > 0.3 holds in exact arithmetic (0.1 + 0.2 is 0.30000000000000004 as a
    double sum but the exact rationals decide): the table is exact, the row is replaced."""
    problem = Problem.from_arrays([[0.1, 0.2, 0.3]], ">", 0.3)
    s = strengthen(problem, Pieces(components=False))
    assert s.stats["rows_removed"] == 1
    (part,) = s.parts
    assert np.all(part.problem.A.data == np.round(part.problem.A.data))
    assert brute_force(part.problem).objective == brute_force(problem).objective == 2


def test_tables_are_exact_where_floats_tie() -> None:
    row = Problem.from_arrays([[0.1, 0.2, -0.3]], ">=", 0.0)
    (table,) = tables(normal_rows(row), np.array([0]), 3)
    X = _all_points(3)
    assert np.array_equal(table, _rows_hold(row, X))


def test_knapsack_counts_exactly() -> None:
    cols, coefs = np.arange(4), np.array([0.5, 0.25, 0.25, -1.0])
    free = np.full(4, -1, dtype=np.int8)
    assert knapsack(cols, coefs, 0.5, True, free).count == 2  # 0.5 alone is not > 0.5
    assert knapsack(cols, coefs, 0.5, False, free).count == 1
    facts = knapsack(cols, coefs, 0.9, True, free)
    assert facts.count == 3 and set(facts.forced_on) == {0, 1, 2} and list(facts.forced_off) == [3]
    assert knapsack(cols, coefs, 1.0, True, free).count is None
    assert knapsack(cols, coefs, -2.0, True, free).trivial


def test_independent_components_become_parts() -> None:
    A = np.array([[1.0, -0.5, 0, 0], [0, 0, 1.0, -0.25]])
    s = strengthen(Problem.from_arrays(A, ">", [0.2, 0.5]), Pieces(fixings=False, implied=False))
    assert len(s.parts) == 2
    assert sorted(p.columns.tolist() for p in s.parts) == [[0, 1], [2, 3]]


def test_problems_with_continuous_variables_are_handed_on_unchanged() -> None:
    b = ProblemBuilder()
    m = b.add_binaries(2)
    y = b.add_continuous(1, 0.0, 10.0)
    b.add_relus(y, [[1.0, -1.0]], m, 0.5)
    b.add_constraints([[1.0]], y, ">", 0.6)
    b.set_objective(m, 1.0)
    s = strengthen(b.build())
    assert not s.applied and "continuous" in s.stats["note"] and len(s.parts) == 1


def test_pieces_parse() -> None:
    assert Pieces.parse("all") == Pieces()
    assert Pieces.parse("cuts,tables").enabled() == ("cuts", "tables")
    assert Pieces.parse("none").enabled() == ()
    with pytest.raises(ValueError, match="unknown strengthening piece.*cut"):
        Pieces.parse("cut")


def test_solve_records_the_strengthening() -> None:
    problem = Problem.from_arrays([[1.0, 1.0, 2.0, -3.0], [0.0, 1.0, -1.0, 1.0]], ">", [0.0, 0.5])
    on = solve(problem, "highs", time_limit=20, strengthen=True, certify=False)
    off = solve(problem, "highs", time_limit=20, strengthen=False, certify=False)
    assert off.strengthening is None and off.times.strengthen == 0
    assert on.strengthening is not None and on.strengthening.applied
    assert on.status is off.status is Status.OPTIMAL and on.objective == off.objective
    assert on.proof == off.proof == "solver"
    assert verify(problem, on.x).ok


def test_everything_fixed_is_solved_without_a_solver() -> None:
    problem = Problem.from_arrays([[1.0, -1.0]], ">", 0.5)  # only x = (1, 0) holds
    result = solve(problem, "highs", time_limit=10, strengthen=True)
    assert result.status is Status.OPTIMAL and result.x.tolist() == [1.0, 0.0]
    assert result.strengthening.parts == 0 and result.bound == 1 and result.proof == "exact"


# the default run: HiGHS (the default float backend) and the exact z3 and rc2 (12-77 s at load
# 12); -m slow: the other float MILP backends (21-51 s each)
_SLOW_HERE = ("cpsat", "scip", "pulp-cbc", "mip-cbc")


@pytest.mark.parametrize("backend", [pytest.param(b, marks=pytest.mark.slow) if b in _SLOW_HERE else b
                                     for b in FIRST_PARTY])
@settings(max_examples=25, phases=_NO_SHRINK, **_common)
@given(problem=problems)
def test_on_and_off_agree_on_every_backend(backend: str, problem: Problem) -> None:
    """Never a wrong claim with strengthening, and both settings agree when both prove."""
    skip_unless_usable(backend)
    exact = brute_force(problem)
    on = solve(problem, backend, time_limit=5.0, strengthen=True)
    off = solve(problem, backend, time_limit=5.0, strengthen=False)
    where = f"{backend}: on {on!r} ({on.message}), off {off!r}; exact {exact.objective}"
    assert on.status is not Status.ERROR, where
    if not exact.feasible:
        assert on.status in (Status.INFEASIBLE, Status.NO_SOLUTION), where
        return
    assert on.status is not Status.INFEASIBLE, where
    optimum = float(exact.objective)
    if on.x is not None:
        assert verify(problem, on.x).ok and on.objective >= optimum - 1e-9 * max(1, abs(optimum))
    if on.bound is not None:
        assert on.bound <= optimum, where
    if on.status is Status.OPTIMAL and problem.integral_objective:
        assert on.objective == optimum, where
        if off.status is Status.OPTIMAL:
            assert off.objective == on.objective, where


def test_cli_solve_strengthen_flag(tmp_path, capfd) -> None:
    from smug_opt.cli import main

    path = tmp_path / "p.smug"
    save_problem(Problem.from_arrays([[1.0, 1.0, 2.0, -3.0], [0.0, 1.0, -1.0, 1.0]], ">",
                                     [0.0, 0.5]), path)
    assert main(["solve", str(path), "--time-limit", "20", "--strengthen",
                 "--strengthen-pieces", "cuts,tables"]) == 0
    out = capfd.readouterr().out
    assert "OPTIMAL" in out and "strengthen cuts, tables:" in out
    assert main(["solve", str(path), "--time-limit", "20", "--no-strengthen"]) == 0
    assert "\nstrengthen " not in capfd.readouterr().out


def test_the_default_strengthens_only_homogeneous_strict_problems() -> None:
    """``a·x > 0`` rows (bias-free stems at γ = 0) make the relaxation say nothing: the
    default strengthens them; a row with a right-hand side does not trigger it."""
    from smug_opt.bench.generators import random_first_layer_problem

    assert worth_strengthening(random_first_layer_problem(500, seed=0, use_bias=False))
    assert not worth_strengthening(random_first_layer_problem(500, seed=0))
    assert not worth_strengthening(random_first_layer_problem(500, seed=0, gamma=0.5,
                                                              use_bias=False))
    homogeneous = Problem.from_arrays([[1.0, 1.0, 2.0, -3.0], [0.0, 1.0, -1.0, 1.0]], ">",
                                      [0.0, 0.5])
    assert solve(homogeneous, "highs", time_limit=20).strengthening.applied
    shifted = Problem.from_arrays([[1.0, 1.0, 2.0, -3.0]], ">", [0.5])
    assert solve(shifted, "highs", time_limit=20).strengthening is None


def test_a_start_reaches_the_parts() -> None:
    """A start is cut into the parts' cells: on a homogeneous problem (strengthened by
    default) the verified start is kept as the incumbent of its part."""
    problem = Problem.from_arrays([[1.0, 1.0, 2.0, -3.0], [1.0, -1.0, 0.0, 0.0]], ">", [0.0, 0.0])
    result = solve(problem, "highs", time_limit=20, start=np.array([1.0, 0.0, 1.0, 0.0]))
    assert result.strengthening.applied and result.status is Status.OPTIMAL
    assert result.objective == 1 and verify(problem, result.x).ok


def _rows_hold(problem, X):
    """Whether every row holds exactly at each point (a row of X): the one decider."""
    return decide_rows(problem, X).holds.all(axis=1)


@pytest.fixture
def unbundled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every part solved alone (no bundles): the tests of the time split count parts."""
    monkeypatch.setattr("smug_opt.strengthen.bundles.BUNDLE_WEIGHT", 0)


@pytest.mark.parametrize("killed", [False, True])
def test_a_part_starved_of_its_share_gets_the_time_left_over(unbundled: None, killed: bool) -> None:
    """A part that ends unproven within its share (here: given none, as a busy machine
    can leave it) is solved again with the time the other parts left, from its solution;
    also when a worker of its race was killed (a race's z3 past its share: the part's
    FEASIBLE answer stood and 43 of 60 s were left unused on `chelsea`)."""
    from dataclasses import replace

    from smug_opt.backend_choice import BackendChoice
    from smug_opt.deadline import Deadline
    from smug_opt.strengthen.solve_parts import solve_strengthened

    rng = np.random.default_rng(3)
    blocks = [rng.normal(size=(5, 8)) for _ in range(2)]
    A = np.zeros((10, 16))
    A[:5, :8], A[5:, 8:] = blocks
    problem = Problem.from_arrays(A, ">", A.sum(axis=1) - np.abs(A).sum(axis=1) / 4)
    everything = np.ones(16)
    assert verify(problem, everything).ok
    limits: list[float | None] = []
    statuses: list[Status] = []

    def solve_part(part_problem, choice, deadline, start):  # a step (smug_opt.step.Step)
        limit = deadline.remaining()
        limits.append(limit)
        starved = len(limits) == 1
        result = solve(part_problem, choice, time_limit=1e-6 if starved else limit, start=start,
                       strengthen=False)
        statuses.append(result.status)
        return replace(result, killed=killed and starved)

    result = solve_strengthened(problem, Pieces(components=True, cuts=False, implied=False, fixings=False),
                                solve_part, BackendChoice.parse("highs"), Deadline.after(30),
                                solver="highs", start=everything)
    # two parts (the first starved: its start, unproven), then the first again
    assert statuses == [Status.FEASIBLE, Status.OPTIMAL, Status.OPTIMAL]
    assert limits[2] > 20  # nearly all of the 30 s the second part left
    assert result.status is Status.OPTIMAL and verify(problem, result.x).ok
    assert result.objective == float(brute_force(problem).objective)


def test_every_part_of_many_gets_at_least_the_least_share(unbundled: None) -> None:
    """Hundreds of tiny parts (a 3x3 stem has 340) must not each get a share shorter than
    a worker's start: the first part killed in its share ended the solve NO_SOLUTION."""
    from smug_opt.backend_choice import BackendChoice
    from smug_opt.deadline import Deadline
    from smug_opt.strengthen.solve_parts import MIN_PART_SECONDS, solve_strengthened

    parts = 12
    A = np.zeros((parts, 2 * parts))
    for k in range(parts):
        A[k, 2 * k:2 * k + 2] = [1.0, 2.0]
    problem = Problem.from_arrays(A, ">", np.full(parts, 1.5))
    given: list[float] = []

    def solve_part(part_problem, choice, deadline, start):  # a step (smug_opt.step.Step)
        given.append(deadline.remaining())
        return solve(part_problem, choice, time_limit=deadline, start=start, strengthen=False)

    result = solve_strengthened(problem, Pieces(components=True, cuts=False, implied=False, fixings=False),
                                solve_part, BackendChoice.parse("highs"), Deadline.after(parts * 1.0),
                                solver="highs")
    assert len(given) == parts  # an equal share would be 1 s (12 s, 12 parts)
    assert min(given) >= MIN_PART_SECONDS - 0.05
    assert result.status is Status.OPTIMAL and result.objective == parts


def test_a_part_that_ends_with_no_answer_is_solved_once_more(unbundled: None) -> None:
    """A part whose share ends before any answer (here: starved, no start; on a busy
    machine a worker replaced mid-solve) is solved again while time is left, instead of
    ending the whole solve NO_SOLUTION."""
    from smug_opt.backend_choice import BackendChoice
    from smug_opt.deadline import Deadline
    from smug_opt.strengthen.solve_parts import solve_strengthened

    A = np.zeros((2, 4))
    A[0, :2], A[1, 2:] = [1.0, 2.0], [2.0, 1.0]
    problem = Problem.from_arrays(A, ">", [1.5, 1.5])
    statuses: list[Status] = []

    def solve_part(part_problem, choice, deadline, start):  # a step (smug_opt.step.Step)
        starved = not statuses
        result = solve(part_problem, choice, time_limit=1e-6 if starved else deadline, start=None,
                       strengthen=False)
        statuses.append(result.status)
        return result

    result = solve_strengthened(problem, Pieces(components=True, cuts=False, implied=False, fixings=False),
                                solve_part, BackendChoice.parse("highs"), Deadline.after(30), solver="highs")
    assert statuses == [Status.NO_SOLUTION, Status.OPTIMAL, Status.OPTIMAL]
    assert result.status is Status.OPTIMAL and result.objective == 2


def test_auto_races_highs_and_z3_on_every_strengthened_part(unbundled: None) -> None:
    """``auto`` hands each part to HiGHS and z3 (pseudo-Boolean parts, whatever their
    size); a named backend or race reaches the parts as given."""
    from smug_opt.backend_choice import BackendChoice
    from smug_opt.deadline import Deadline
    from smug_opt.strengthen.solve_parts import PART_RACE, solve_strengthened

    for name in ("highs", "z3", "mip-cbc"):
        skip_unless_usable(name)
    rng = np.random.default_rng(3)
    A = np.zeros((10, 16))
    A[:5, :8], A[5:, 8:] = rng.normal(size=(5, 8)), rng.normal(size=(5, 8))
    problem = Problem.from_arrays(A, ">", A.sum(axis=1) - np.abs(A).sum(axis=1) / 4)
    optimum = solve(problem, "highs", time_limit=30, strengthen=False).objective
    seen: list[BackendChoice] = []

    def solve_part(part_problem, choice, deadline, start):  # a step (smug_opt.step.Step)
        seen.append(choice)
        return solve(part_problem, choice, time_limit=deadline.remaining(), start=start, strengthen=False)

    pieces = Pieces(components=True, cuts=False, implied=False, fixings=False)
    for text, expected in (("auto", PART_RACE), ("highs", ("highs",)),
                           ("highs,mip-cbc", ("highs", "mip-cbc"))):
        seen.clear()
        result = solve_strengthened(problem, pieces, solve_part, BackendChoice.parse(text),
                                    Deadline.after(30), solver=text)
        assert result.status is Status.OPTIMAL and result.objective == optimum
        assert verify(problem, result.x).ok
        assert len(seen) == 2 and all(c.names == expected for c in seen), (text, seen)


def test_z3_gets_its_part_extras_only_where_it_solves_strengthened_parts() -> None:
    """z3's core batches (:data:`PART_Z3_EXTRAS`) go to the parts wherever z3 solves them,
    minimal cores (:data:`SMALL_PART_Z3_EXTRAS`) only to the parts that are not large; the
    caller's own extras win, and a part race without z3 gets none (its backends would reject
    the keys)."""
    from smug_opt.backend_choice import BackendChoice
    from smug_opt.registry import available_backends
    from smug_opt.strengthen.solve_parts import PART_RACE, PART_Z3_EXTRAS, SMALL_PART_Z3_EXTRAS, part_extras

    def extras(text: str, given: dict | None = None, large: bool = True) -> dict:
        return part_extras(BackendChoice.parse(text, check=False), given or {}, large=large)

    small = {**PART_Z3_EXTRAS, **SMALL_PART_Z3_EXTRAS}
    assert extras("z3") == dict(PART_Z3_EXTRAS) == extras("highs,z3")
    assert extras("z3", large=False) == small == extras("highs,z3", large=False) != extras("z3")
    assert extras("z3", {"maxres.max_core_size": 3}) == {"maxres.max_core_size": 3}
    assert extras("z3", {"core.minimize": False}, large=False)["core.minimize"] is False
    assert extras("highs") == {} and extras("highs,mip-cbc", {"presolve": "off"}) == {"presolve": "off"}
    assert extras("highs", large=False) == {}
    auto_has_z3 = set(PART_RACE) <= set(available_backends())
    assert extras("auto") == (dict(PART_Z3_EXTRAS) if auto_has_z3 else {})
    assert extras("auto", large=False) == (small if auto_has_z3 else {})


def test_small_and_large_parts_are_solved_with_their_own_steps(unbundled: None,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Parts below ``MIN_CELLS`` cells go to the parts' step, the others to the large parts'
    step (which z3 runs with other settings); the answer is the brute-force optimum."""
    from smug_opt.backend_choice import BackendChoice
    from smug_opt.deadline import Deadline
    from smug_opt.strengthen import neighbourhood_search as search
    from smug_opt.strengthen.solve_parts import solve_strengthened

    rng = np.random.default_rng(4)
    A = np.zeros((10, 16))
    A[:5, :6], A[5:, 6:] = rng.normal(size=(5, 6)), rng.normal(size=(5, 10))
    problem = Problem.from_arrays(A, ">", A.sum(axis=1) - np.abs(A).sum(axis=1) / 4)
    monkeypatch.setattr(search, "MIN_CELLS", 8)
    sizes: dict[str, list[int]] = {"small": [], "large": []}

    def step(kind: str):
        def solve_part(part_problem, choice, deadline, start):  # a step (smug_opt.step.Step)
            sizes[kind].append(part_problem.num_vars)
            return solve(part_problem, choice, time_limit=deadline.remaining(), start=start,
                         strengthen=False)
        return solve_part

    result = solve_strengthened(problem, Pieces(components=True, cuts=False, implied=False, fixings=False),
                                step("small"), BackendChoice.parse("highs"), Deadline.after(30),
                                solver="highs", solve_large=step("large"))
    assert sizes == {"small": [6], "large": [10]}
    assert result.status is Status.OPTIMAL and verify(problem, result.x).ok
    assert result.objective == float(brute_force(problem).objective)


def test_z3_with_its_part_extras_finds_the_optimum_of_strengthened_problems() -> None:
    """The parts' z3 settings change its search, never its answer: bias-free rows
    (homogeneous, strict: the strengthened family) solved by z3 and raced under ``auto``
    match exact brute force; ``auto`` on a ReLU problem (not strengthened: its own race,
    which may lack z3) still solves."""
    from tiny_problems import two_cell_relu

    skip_unless_usable("z3")
    rng = np.random.default_rng(7)
    for _ in range(3):
        A = rng.normal(size=(8, 12)) * (rng.random((8, 12)) < 0.5)
        A[:, 0] += 0.1  # no empty row
        A *= np.sign(A.sum(axis=1))[:, None]  # the full mask holds every row
        problem = Problem.from_arrays(A, ">", np.zeros(8))
        optimum = brute_force(problem).objective
        for backend in ("z3", "auto"):
            result = solve(problem, backend, time_limit=30, strengthen=True)
            assert result.status is Status.OPTIMAL and result.strengthening.applied
            assert result.objective == optimum and verify(problem, result.x).ok
    relu = solve(two_cell_relu(), "auto", time_limit=30, strengthen=True)
    assert relu.status is Status.OPTIMAL and relu.objective == 2


def test_light_parts_are_packed_into_bundles_with_the_same_optimum() -> None:
    """Small independent parts without strict rows (one reading a cell fixed on: carried)
    are packed into bundles: every cell is still in exactly one part, and the solve's
    optimum is the brute-force one. Parts with strict rows are solved alone."""
    from smug_opt.backend_choice import BackendChoice
    from smug_opt.deadline import Deadline
    from smug_opt.strengthen.bundles import BUNDLE_WEIGHT, bundled, weight
    from smug_opt.strengthen.solve_parts import solve_strengthened

    rng = np.random.default_rng(5)
    blocks, size = 4, 3
    A = np.zeros((2 * blocks + 1, blocks * size))
    for k in range(blocks):
        cells = slice(k * size, (k + 1) * size)
        A[2 * k:2 * k + 2, cells] = rng.normal(size=(2, size))
        A[2 * k:2 * k + 2, cells] *= np.sign(A[2 * k:2 * k + 2, cells].sum(axis=1))[:, None]
    A[-1, 0] = 1.0  # cell 0 is forced on: the first block's rows carry it
    rhs = np.append(A[:-1].sum(axis=1) / 4, 1.0)
    problem = Problem.from_arrays(A, ">=", rhs)
    pieces = Pieces(cuts=False, implied=False, integer_rows=False)  # rows kept: cells carried
    prepared = strengthen(problem, pieces)
    packed = bundled(prepared.parts)
    assert len(packed) < len(prepared.parts) and all(weight(p) <= BUNDLE_WEIGHT for p in packed)
    assert any(p.carried.size for p in packed)
    cells = np.sort(np.concatenate([p.columns for p in packed]))
    assert np.array_equal(cells, np.sort(np.concatenate([p.columns for p in prepared.parts])))
    optimum = brute_force(problem).objective
    result = solve_strengthened(problem, pieces, lambda q, c, d, s: solve(q, c, time_limit=d, start=s,
                                                                          strengthen=False),
                                BackendChoice.parse("highs"), Deadline.after(30), solver="highs")
    assert result.status is Status.OPTIMAL and result.objective == optimum
    assert verify(problem, result.x).ok
    strict = Problem.from_arrays(A[:-1], ">", np.zeros(A.shape[0] - 1))
    alone = strengthen(strict, pieces).parts
    assert len(bundled(alone)) == len(alone) > 1
