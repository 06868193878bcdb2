"""The safe LP bound (Neumaier-Shcherbina on an LP solver's duals): never above the exact
optimum, and certify's first, cheap step for integral objectives."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from random_problems import generic

from smug_opt import Problem, Status, registry, solve
from smug_opt.bounds.lp import dual_parts, dual_parts_by_block
from smug_opt.deadline import Deadline
from smug_opt.safe_lp_bound import safe_lp_bound, strengthened_safe_lp_bound
from smug_opt.strengthen.outcome import PartMatrix
from smug_opt.strengthen.reuse import strengthen_reused
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


def test_each_block_s_dual_parts_are_those_of_the_block_alone_bit_for_bit() -> None:
    """One pass over a block-diagonal matrix (the strengthened parts' LP) gives each block
    exactly what :func:`dual_parts` gives on that block alone, for any multipliers."""
    rng = np.random.default_rng(7)
    blocks = []
    for _ in range(5):
        m, n = int(rng.integers(1, 6)), int(rng.integers(1, 8))
        A = sp.random(m, n, density=0.6, random_state=rng, format="csr") * rng.choice([-1e3, 0.1, 3.0])
        lo = np.where(rng.random(m) < 0.3, -np.inf, rng.normal(size=m))
        hi = np.where(rng.random(m) < 0.3, np.inf, lo + rng.random(m))
        y = rng.normal(size=m) * 10.0 ** rng.integers(-8, 8)
        blocks.append((A.tocsr(), lo, hi, rng.normal(size=n), y))
    A = sp.block_diag([b[0] for b in blocks], format="csr")
    At = A.T.tocsr()
    row_starts = np.cumsum([0] + [b[0].shape[0] for b in blocks])
    col_starts = np.cumsum([0] + [b[0].shape[1] for b in blocks])
    c, lo, hi, y = (np.concatenate([b[k] for b in blocks]) for k in (3, 1, 2, 4))
    together = dual_parts_by_block(c, At, abs(At).tocsr(), lo, hi, y, row_starts, col_starts)
    for (block, lo, hi, c, y), joint in zip(blocks, together, strict=True):
        bt = block.T.tocsr()
        alone = dual_parts(c, bt, abs(bt).tocsr(), lo, hi, y)
        assert (joint.row_sum, joint.row_abs, joint.rows) == (alone.row_sum, alone.row_abs, alone.rows)
        assert np.array_equal(joint.r, alone.r) and np.array_equal(joint.r_err, alone.r_err)


def test_the_parts_bound_reads_their_arrays_without_building_their_problems() -> None:
    A = np.zeros((3, 9))
    for k in range(3):  # three independent strict rows: three parts
        A[k, 3 * k:3 * k + 3] = [1.0, 2.0, -0.5]
    p = Problem.from_arrays(A, ">", [0.0, 0.0, 0.0])
    s = strengthen_reused(p)
    assert len(s.parts) == 3
    bound = strengthened_safe_lp_bound(p, deadline=Deadline.after(5))
    assert bound is not None and Fraction(bound) <= brute_force(p).objective
    assert all("problem" not in vars(part) for part in s.parts)  # built on first use only
    for part in s.parts:
        built, again = part.problem, PartMatrix.of(part.problem).build()
        for name in ("kinds", "lb", "ub", "senses", "rhs", "objective"):
            assert np.array_equal(getattr(built, name), getattr(again, name))
        assert (built.A != again.A).nnz == 0 and built.A.shape == again.A.shape
        assert part.matrix.integral_objective == built.integral_objective
