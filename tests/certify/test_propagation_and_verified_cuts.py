"""The safe search's node propagation and its verified HiGHS cuts are rigorous: against brute
force on small problems (near-tie coefficients included), a row's deductions never exclude a
feasible point of the box, a dual proof never closes a box holding a point below its
cutoff, :func:`row_minimum` never exceeds the exact minimum (nor falls far below it), a
tampered cut is rejected or lowered, and the search with every new switch finds the
brute-forced optimum."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from random_problems import first_layer_like, problems

from smug_opt import Problem
from smug_opt.bounds.lp import DualParts, box_bound
from smug_opt.deadline import Deadline
from smug_opt.ir import ProblemBuilder
from smug_opt.safe_search import Settings, search
from smug_opt.safe_search.covers import Cut, KnapsackRow, knapsack_rows
from smug_opt.safe_search.propagation import DualProofs, RowPropagator, propagate
from smug_opt.safe_search.prove import prove_optimum
from smug_opt.safe_search.relaxation import Relaxation
from smug_opt.safe_search.verified_cuts import highs_root_pool, proven_root_cuts, row_minimum, verified_cuts
from smug_opt.testing.brute_force import brute_force
from smug_opt.verification import decide_rows, verify

pytest.importorskip("highspy")


def _points(n: int) -> np.ndarray:
    return np.array(list(itertools.product((0.0, 1.0), repeat=n)))


def _feasible(problem: Problem) -> np.ndarray:
    points = _points(problem.num_vars)
    return points[decide_rows(problem, points).holds.all(axis=1)]  # exact where float64 cannot tell


def _holds_exactly(row: KnapsackRow, points: np.ndarray) -> np.ndarray:
    dense = np.zeros(points.shape[1])
    dense[row.cols] = row.a
    alone = Problem.from_arrays([dense], ">" if row.strict else ">=", [row.b])
    return decide_rows(alone, points).holds[:, 0]


def _box(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    state = rng.integers(-1, 2, n)  # -1 free, else fixed to it
    return np.where(state == 1, 1.0, 0.0), np.where(state == 0, 0.0, 1.0)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=problems, seed=st.integers(0, 2**32 - 1))
def test_row_deductions_keep_every_feasible_point_of_the_box(problem: Problem, seed: int) -> None:
    rows = knapsack_rows(problem)
    propagator = RowPropagator(rows)
    rng = np.random.default_rng(seed)
    points = _points(problem.num_vars)
    satisfying = np.ones(len(points), dtype=bool)
    for row in rows:
        satisfying &= _holds_exactly(row, points)
    for _ in range(4):
        lb, ub = _box(rng, problem.num_vars)
        inside = satisfying & np.all((points >= lb) & (points <= ub), axis=1)
        narrowed_lb, narrowed_ub = lb.copy(), ub.copy()
        alive = propagate(narrowed_lb, narrowed_ub, [propagator.deduce])
        if inside.any():
            assert alive, (lb, ub, points[inside][0])
            kept = np.all((points[inside] >= narrowed_lb) & (points[inside] <= narrowed_ub), axis=1)
            assert kept.all(), (lb, ub, narrowed_lb, narrowed_ub, points[inside][~kept][0])


def test_a_row_forces_what_it_must_and_closes_what_it_cannot_hold() -> None:
    """``x1 + x2 + 2**-53·x3 > 1``: in float64 ``1 + 2**-53`` is 1, so x3 looks useless and
    both x1 and x2 look needed; exactly, (1, 0, 1) satisfies the row, so nothing is forced.
    ``x1 + x2 >= 2`` with x2 off is closed. ``3x1 + 2x2 + 2x3 >= 5`` needs x1 (2 + 2 < 5)
    but neither x2 nor x3."""
    row = KnapsackRow(np.arange(3), np.array([1.0, 1.0, 2.0**-53]), 1.0, strict=True)
    lb, ub = np.zeros(3), np.ones(3)
    assert propagate(lb, ub, [RowPropagator([row]).deduce])
    assert np.all(lb == 0)  # (1, 0, 1) satisfies the row exactly: nothing is forced on
    pair = KnapsackRow(np.arange(2), np.array([1.0, 1.0]), 2.0, strict=False)
    lb, ub = np.zeros(2), np.array([1.0, 0.0])
    assert not propagate(lb, ub, [RowPropagator([pair]).deduce])
    ge = KnapsackRow(np.arange(3), np.array([3.0, 2.0, 2.0]), 5.0, strict=False)
    lb, ub = np.zeros(3), np.ones(3)
    assert propagate(lb, ub, [RowPropagator([ge]).deduce])
    assert list(lb) == [1.0, 0.0, 0.0] and list(ub) == [1.0, 1.0, 1.0]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=first_layer_like(), seed=st.integers(0, 2**32 - 1))
def test_a_dual_proof_never_closes_a_box_with_a_better_point(problem: Problem, seed: int) -> None:
    """Multipliers from LPs over random boxes, kept as proofs, judged on other random boxes
    with the optimum + 1 as the cutoff: a box they close or narrow holds no point of
    objective <= optimum (the cutoff's improving points)."""
    optimum = brute_force(problem).objective
    if optimum is None:
        return
    rng = np.random.default_rng(seed)
    lp = Relaxation(problem)
    proofs = DualProofs(problem.num_vars, 8)
    binaries = np.arange(problem.num_vars)
    for _ in range(6):
        lb, ub = _box(rng, problem.num_vars)
        answer = lp.solve(lb, ub, 30.0)
        if answer.status == "optimal" and answer.duals is not None:
            proofs.add(lp.dual_parts(answer.duals))
    feasible = _feasible(problem)
    objective = feasible @ problem.objective
    cutoff = float(optimum)  # prune a bound > optimum: the points of objective <= optimum must survive

    def prunes(bounds: np.ndarray) -> np.ndarray:
        return np.vectorize(lambda v: Fraction(v) > optimum, otypes=[bool])(bounds)

    for _ in range(6):
        lb, ub = _box(rng, problem.num_vars)
        good = feasible[np.all((feasible >= lb) & (feasible <= ub), axis=1) & (objective <= cutoff)]
        dead, ones, zeros = proofs.deduce(lb, ub, binaries, prunes)
        if good.size:
            assert not dead
            assert np.all(good[:, ones] == 1) and np.all(good[:, zeros] == 0)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=problems, seed=st.integers(0, 2**32 - 1))
def test_row_minimum_is_a_rigorous_and_close_lower_bound(problem: Problem, seed: int) -> None:
    rng = np.random.default_rng(seed)
    points = _points(problem.num_vars)
    for row in knapsack_rows(problem):
        size = int(rng.integers(1, problem.num_vars + 1))
        cols = np.sort(rng.choice(problem.num_vars, size, replace=False))
        coefs = rng.choice([-2.0, -1.0, 0.5, 1.0, 3.0, 0.1, 1 / 3], size)
        bound = row_minimum(row, cols, coefs)
        holds = _holds_exactly(row, points)
        if not holds.any():  # any bound is a lower bound on a minimum over no point
            continue
        exact = min(sum((Fraction(float(c)) for c, j in zip(coefs, cols, strict=True) if p[j] == 1),
                        Fraction(0)) for p in points[holds])
        assert bound is not None and Fraction(bound) <= exact
        assert bound >= float(exact) - 1e-6 * (1 + abs(float(exact))) or _near_tie(row, points)


def _near_tie(row: KnapsackRow, points: np.ndarray) -> bool:
    """Some point misses the row by a hair or sits on it (the bound may count it as satisfying)."""
    gaps = points[:, row.cols] @ row.a - row.b
    return bool(np.any((gaps <= 0) & (gaps > -1e-6 * (1 + np.abs(row.a).sum() + abs(row.b)))))


def test_a_tampered_cut_is_rejected_or_lowered() -> None:
    """``3x1 + 2x2 + 2x3 >= 4``: ``x1 + x2 + x3 >= 2`` holds at every point (one 2 is not
    enough); claimed ``>= 3`` it is not proven; ``x1 >= 1`` does not hold ((0, 1, 1))."""
    row = KnapsackRow(np.arange(3), np.array([3.0, 2.0, 2.0]), 4.0, strict=False)
    ones = np.ones(3)
    assert row_minimum(row, np.arange(3), ones) == pytest.approx(2.0)
    kept = verified_cuts([Cut(np.arange(3), ones, 2.0)], [row])
    assert len(kept) == 1 and kept[0].rhs <= 2.0
    assert verified_cuts([Cut(np.arange(3), ones, 3.0)], [row]) == []
    assert verified_cuts([Cut(np.array([0]), np.array([1.0]), 1.0)], [row]) == []


@st.composite
def covering_knapsacks(draw: st.DrawFn) -> Problem:
    """``min Σ x`` over 16 binaries and 4-8 rows ``a·x >= β`` (sparse weights in (0, 1), ``β``
    40-70 % of the row's total): HiGHS's root separates cuts on most of them."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    rows = draw(st.integers(4, 8))
    A = rng.uniform(0, 1, (rows, 16)) * (rng.uniform(0, 1, (rows, 16)) < 0.6)
    sense = draw(st.sampled_from([">=", ">"]))
    return Problem.from_arrays(A, sense, A.sum(axis=1) * rng.uniform(0.4, 0.7, rows))


def _holds_at(cut: Cut, points: np.ndarray) -> bool:
    activity = points[:, cut.cols] @ cut.coefs
    close = activity < cut.rhs + 1e-9 * (1 + np.abs(cut.coefs).sum())  # decided exactly
    return all(sum((Fraction(float(c)) for c, j in zip(cut.coefs, cut.cols, strict=True) if p[j] == 1),
                   Fraction(0)) >= Fraction(cut.rhs) for p in points[close])


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=covering_knapsacks())
def test_every_verified_highs_cut_holds_at_every_feasible_point(problem: Problem) -> None:
    feasible = _feasible(problem)
    for cut in verified_cuts(highs_root_pool(problem, 30.0)[0], knapsack_rows(problem)):
        assert _holds_at(cut, feasible), cut


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=covering_knapsacks())
def test_every_cut_of_later_rounds_holds_at_every_feasible_point(problem: Problem) -> None:
    """Rounds after the first separate on the problem with earlier cuts as rows: each cut
    kept still holds at every feasible point (brute force, exact)."""
    feasible = _feasible(problem)
    for cut in proven_root_cuts(problem, 30.0, rounds=3):
        assert _holds_at(cut, feasible), cut


def test_later_rounds_prove_more_cuts() -> None:
    """Not vacuous: on 10 covering knapsacks a second round proves cuts the first did not
    give, after the first round's, and stops early where it proves none."""
    added = 0
    for seed in range(10):
        rng = np.random.default_rng(seed)
        A = rng.uniform(0, 1, (12, 16)) * (rng.uniform(0, 1, (12, 16)) < 0.8)
        p = Problem.from_arrays(A, ">=", A.sum(axis=1) * rng.uniform(0.5, 0.8, 12))
        first = proven_root_cuts(p, 30.0, rounds=1)
        both = proven_root_cuts(p, 30.0, rounds=2)
        assert [c.rhs for c in both[:len(first)]] == [c.rhs for c in first]
        added += len(both) - len(first)
        if len(both) == len(first):
            assert [c.rhs for c in proven_root_cuts(p, 30.0, rounds=5)] == [c.rhs for c in first]
    assert added >= 5, added


def test_a_cut_over_a_continuous_column_is_never_taken() -> None:
    """:func:`row_minimum` takes every column of a cut to be binary (a continuous column in
    [0, 5] would be bounded as if at most 1): HiGHS's pool on this problem holds 5 cuts over
    its two continuous columns (measured), all dropped before verification."""
    rng = np.random.default_rng(33)
    b = ProblemBuilder()
    columns = np.concatenate([b.add_binaries(10), b.add_continuous(2, 0.0, 5.0)])
    A = rng.uniform(0, 1, (6, 12)) * (rng.uniform(0, 1, (6, 12)) < 0.7)
    A[:, 10:] *= rng.choice([-1, 1], (6, 2))
    b.add_constraints(A, columns, ">=", np.abs(A).sum(axis=1) * rng.uniform(0.3, 0.6, 6))
    b.set_objective(columns, np.concatenate([np.ones(10), rng.uniform(0.1, 1, 2)]))
    p = b.build()
    pool = highs_root_pool(p, 30.0)[0]
    assert pool and all(p.binary[cut.cols].all() for cut in pool)


def test_proven_root_cuts_are_computed_once_for_the_same_problem() -> None:
    """The budgeted search and the longer one after it take the same cuts from one MIP root,
    and so does an equal problem (the same rows, bounds and kinds); another rhs gets its own."""
    rng = np.random.default_rng(0)
    A = rng.uniform(0, 1, (8, 16)) * (rng.uniform(0, 1, (8, 16)) < 0.6)
    rhs = A.sum(axis=1) * rng.uniform(0.4, 0.7, 8)
    p = Problem.from_arrays(A, ">=", rhs)
    first = proven_root_cuts(p, 30.0)
    assert first and proven_root_cuts(p, 30.0) is first
    again = verified_cuts(highs_root_pool(p, 30.0)[0], knapsack_rows(p))
    assert [c.rhs for c in first[:len(again)]] == [c.rhs for c in again]  # the first round's
    assert proven_root_cuts(Problem.from_arrays(A, ">=", rhs.copy()), 30.0) is first
    assert proven_root_cuts(Problem.from_arrays(A, ">=", rhs * 0.9), 30.0) is not first


def test_highs_separates_cuts_the_rows_prove_on_covering_knapsacks() -> None:
    """Not vacuous: on 20 such problems HiGHS's root gives cuts and most are proven."""
    pool = proven = 0
    for seed in range(20):
        rng = np.random.default_rng(seed)
        A = rng.uniform(0, 1, (8, 16)) * (rng.uniform(0, 1, (8, 16)) < 0.6)
        p = Problem.from_arrays(A, ">=", A.sum(axis=1) * rng.uniform(0.4, 0.7, 8))
        cuts = highs_root_pool(p, 30.0)[0]
        pool, proven = pool + len(cuts), proven + len(verified_cuts(cuts, knapsack_rows(p)))
    assert pool >= 10 and proven >= pool // 2, (pool, proven)


SWITCHES = [Settings(propagation=True), Settings(propagation=True, dual_proofs=0),
            Settings(highs_cuts_after=0), Settings(highs_cuts_after=0, highs_cut_rounds=3),
            Settings(propagation=True, highs_cuts_after=1, cut_rounds=0)]


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=st.one_of(problems, first_layer_like(), covering_knapsacks()),
       switches=st.sampled_from(SWITCHES), pick=st.integers(0, 2**16))
def test_the_search_with_propagation_and_highs_cuts_finds_the_brute_forced_optimum_s(
        problem: Problem, switches: Settings, pick: int) -> None:
    """From no incumbent and from any feasible point (so cutoffs of every height occur)."""
    optimum = brute_force(problem).objective
    feasible = _feasible(problem)
    starts = [None] + ([verify(problem, feasible[pick % len(feasible)])] if len(feasible) else [])
    for start in starts:
        outcome = search(problem, start, Deadline.after(60), switches)
        assert outcome.proven, outcome.why
        if optimum is None:
            assert outcome.best is None
        else:
            assert outcome.best is not None and outcome.best.objective == optimum


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=covering_knapsacks(), nodes=st.integers(1, 6), depth_first=st.booleans())
def test_a_search_cut_short_bounds_every_better_solution(problem: Problem, nodes: int,
                                                         depth_first: bool) -> None:
    """The lowest open bound of a search stopped by its node limit (best or depth first) is
    below every solution better than the one it holds (brute force)."""
    outcome = search(problem, None, Deadline.after(60),
                     Settings(max_nodes=nodes, cut_rounds=0, depth_first=depth_first))
    if outcome.proven or outcome.bound is None:
        return
    feasible = _feasible(problem)
    objective = feasible @ problem.objective
    better = objective if outcome.best is None else objective[objective < float(outcome.best.objective)]
    assert all(Fraction(outcome.bound) <= Fraction(float(v)) for v in better)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=covering_knapsacks())
def test_a_proof_cut_short_bounds_the_optimum_over_the_parts(problem: Problem) -> None:
    """``prove_optimum`` stopped by its node limit: the bound it reports (over strengthening's
    parts) is at most the brute-forced optimum."""
    outcome = prove_optimum(problem, None, Deadline.after(60), Settings(max_nodes=2, cut_rounds=0))
    optimum = brute_force(problem).objective
    if not outcome.proven and outcome.bound is not None and optimum is not None:
        assert Fraction(outcome.bound) <= optimum


def test_a_search_stopped_in_its_root_cut_rounds_reports_no_bound() -> None:
    """The LP budget spent before the root is processed: nothing is open, nothing is bounded
    (an infinite bound once reached ``prove_optimum``'s exact sum)."""
    p = Problem.from_arrays([[3.0] * 10], ">", [10.0])
    outcome = search(p, verify(p, np.ones(10)), Deadline.after(30), Settings(max_lps=1))
    assert not outcome.proven and outcome.bound is None
    proof = prove_optimum(p, verify(p, np.ones(10)), Deadline.after(30), Settings(max_lps=1),
                          strengthened=False)
    assert not proof.proven and proof.bound is None


def test_a_node_propagation_fixes_completely_is_decided_by_its_point() -> None:
    """Hypothesis's case: propagation fixes all six binaries at the root, and HiGHS's LP
    point strays from the fixed bounds by its tolerance (x1 = 2.5e-9, x4 = 1 − 3e-9), so it
    looks fractional; the search gave up on the node, it now decides its one point exactly."""
    A = [[9.094947017729282e-13, -0.2, 3.0, 0.0, -5.0, 0.0],
         [3.0, -5.0, 134217728.0, 4.591055674207325, -0.30000000000000004, 4.0],
         [0.9222870363840023, 256.0, 0.0, 1e-06, -3.637978807091713e-12, 2.00001]]
    objective = [2.1044776556072335, 1.3161550194673213, 2.1044776556072335, 3.0759840934890933e-109,
                 3.0, 2.1044776556072335]
    p = Problem.from_arrays(A, ["<=", ">", ">"], [2.8000000000009098, 134217736.29105568,
                                                  -3.6379788070917125e-12], objective=objective)
    optimum = brute_force(p)
    for start in (None, verify(p, optimum.x)):
        outcome = search(p, start, Deadline.after(60), Settings(propagation=True, dual_proofs=0))
        assert outcome.proven and outcome.best is not None, outcome.why
        assert outcome.best.objective == optimum.objective


def test_dual_proofs_keep_the_newest_up_to_their_capacity() -> None:
    """Three proofs into room for two: the oldest is replaced, the bounds are the two newest's."""
    rng = np.random.default_rng(0)
    parts = [DualParts(float(k), float(k), 3, rng.normal(size=4), np.full(4, 1e-15)) for k in range(3)]
    proofs = DualProofs(4, 2)
    for p in parts:
        proofs.add(p)
    lb, ub = np.zeros(4), np.ones(4)
    assert len(proofs) == 2
    assert sorted(proofs.bounds(lb, ub).tolist()) == sorted(box_bound(p, lb, ub) for p in parts[1:])
