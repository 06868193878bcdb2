"""Cuts proven by probing their support against all the rows: every kept cut holds at every
feasible point (brute force, exact), a cut that fails at some feasible point is never kept,
and probing proves cuts that no single row does."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from smug_opt import Problem
from smug_opt.safe_search.covers import Cut, knapsack_rows
from smug_opt.safe_search.probed_cuts import probed_cuts
from smug_opt.safe_search.propagation import RowPropagator
from smug_opt.safe_search.verified_cuts import highs_root_pool, verified_cuts
from smug_opt.verification import decide_rows


def _feasible(problem: Problem) -> np.ndarray:
    points = np.array(list(itertools.product((0.0, 1.0), repeat=problem.num_vars)))
    return points[decide_rows(problem, points).holds.all(axis=1)]


def _holds_everywhere(cut: Cut, points: np.ndarray) -> bool:
    coefs = [Fraction(float(c)) for c in cut.coefs]
    rhs = Fraction(cut.rhs)
    return all(sum((c for c, j in zip(coefs, cut.cols, strict=True) if p[j] == 1), Fraction(0)) >= rhs
               for p in points)


def _probed(problem: Problem, cuts: list[Cut]) -> list[Cut]:
    return probed_cuts(cuts, RowPropagator(knapsack_rows(problem)), np.asarray(problem.lb, dtype=np.float64),
                       np.asarray(problem.ub, dtype=np.float64))


def test_an_implication_of_two_rows_is_proven_and_a_false_one_rejected() -> None:
    """``x0 + x1 >= 1`` and ``x1 + x2 <= 1``: ``x0 - x2 >= 0`` holds (``x2 = 1`` forces
    ``x1 = 0``, then ``x0 = 1``) though neither row alone proves it; ``x0 - x2 >= 1`` fails
    at (0, 1, 0), ``x0 >= 1`` at (0, 1, 0)."""
    p = Problem.from_arrays([[1.0, 1.0, 0.0], [0.0, -1.0, -1.0]], ">=", [1.0, -1.0])
    cols = np.array([0, 2])
    implied = Cut(cols, np.array([1.0, -1.0]), 0.0)
    assert verified_cuts([implied], knapsack_rows(p)) == []
    assert len(_probed(p, [implied])) == 1
    assert _probed(p, [Cut(cols, np.array([1.0, -1.0]), 1.0), Cut(np.array([0]), np.array([1.0]), 1.0)]) == []


def _case(seed: int) -> tuple[Problem, list[Cut]]:
    """Eight binaries under 3-6 sparse rows with weights in {-2..2} (some ``>``), and 30
    random cuts over 1-4 of them with right-hand sides in {-1..2}."""
    rng = np.random.default_rng(seed)
    rows = int(rng.integers(3, 7))
    A = rng.integers(-2, 3, (rows, 8)).astype(np.float64) * (rng.uniform(0, 1, (rows, 8)) < 0.5)
    senses = [">" if s else ">=" for s in rng.uniform(0, 1, rows) < 0.3]
    p = Problem.from_arrays(A, senses, np.minimum(A, 0).sum(axis=1) + rng.integers(0, 3, rows))
    cuts = []
    for _ in range(30):
        cols = rng.choice(8, int(rng.integers(1, 5)), replace=False)
        cuts.append(Cut(cols, rng.choice([-1.0, 1.0, 2.0], cols.size), float(rng.integers(-1, 3))))
    return p, cuts


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1))
def test_every_probed_cut_holds_at_every_feasible_point(seed: int) -> None:
    problem, cuts = _case(seed)
    feasible = _feasible(problem)
    for cut in _probed(problem, cuts):
        assert _holds_everywhere(cut, feasible), cut


def test_probing_proves_cuts_no_single_row_proves() -> None:
    """Not vacuous: over 12 seeds of the cases above, probing keeps valid cuts that
    :func:`verified_cuts` drops, and drops every invalid one."""
    beyond_rows = invalid = 0
    for seed in range(12):
        problem, cuts = _case(seed)
        feasible = _feasible(problem)
        if not feasible.size:
            continue
        by_row = {(c.cols.tobytes(), c.coefs.tobytes()) for c in verified_cuts(cuts, knapsack_rows(problem))}
        kept = _probed(problem, cuts)
        beyond_rows += sum((c.cols.tobytes(), c.coefs.tobytes()) not in by_row for c in kept)
        invalid += sum(not _holds_everywhere(c, feasible) for c in cuts)
        assert all(_holds_everywhere(c, feasible) for c in kept)
    assert beyond_rows >= 3 and invalid >= 20, (beyond_rows, invalid)


def test_highs_gives_its_cut_pool_when_its_root_reaches_the_optimum() -> None:
    """On this covering knapsack (11 rows, 19 binaries, ``min Σ x``) HiGHS's root rounds its
    bound up to a rounding heuristic's solution and ends without reading out its cut pool
    under its default gaps and the integral objective (measured: no callback); the pool
    is read all the same."""
    rng = np.random.default_rng(4)
    A = rng.uniform(0, 1, (11, 19)) * (rng.uniform(0, 1, (11, 19)) < 0.6)
    p = Problem.from_arrays(A, ">=", A.sum(axis=1) * rng.uniform(0.4, 0.7, 11))
    pool, finished = highs_root_pool(p, 30.0)
    assert finished and pool
