"""The core solve loop on a real backend (HiGHS): statuses, bounds, retries, limits."""

import subprocess
import sys
import time

import numpy as np
import pytest
from tiny_problems import two_cell_relu

import smug_opt
from smug_opt import Problem, ProblemBuilder, Status, solve
from smug_opt.registry import UnknownBackendError


def test_import_loads_no_solver_and_no_tensorflow():
    code = ("import sys, smug_opt, smug_opt.cli, smug_opt.bridges; "
            "heavy = [m for m in ('tensorflow', 'keras', 'highspy', 'z3', 'ortools', 'pulp', 'mip') "
            "if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_known_optimum():
    p = Problem.from_arrays([[1.0, -2.0, 0.5], [0.0, 1.0, 1.0]], [">", "<="], [0.0, 1.5])
    r = solve(p, "highs", time_limit=20)
    assert r.status is Status.OPTIMAL and r.objective == 1.0 and r.bound == 1.0 and r.gap == 0.0
    assert r.verified and smug_opt.verify(p, r.x).ok


def test_strict_tie_at_zero_is_resolved_by_a_no_good_cut():
    # the all-zero mask sits exactly on the boundary 0 > 0; level 0 (>=) picks it, it is
    # rejected exactly, cut off, and the next relaxation proves the optimum (the core's own
    # loop: strengthening, which the default applies to such a row, would remove the tie)
    p = Problem.from_arrays([[1.0, 1.0, 1.0]], ">", [0.0])
    r = solve(p, "highs", time_limit=20, strengthen=False)
    assert r.status is Status.OPTIMAL and r.objective == 1.0
    assert r.attempts[0].verified is False


def test_float_near_tie_infeasible_is_proven():
    # exactly 0.1 + 0.2 < 0.30000000000000004, though floats might say otherwise
    p = Problem.from_arrays([[0.1, 0.2]], ">", [0.30000000000000004])
    r = solve(p, "highs", time_limit=20)
    assert r.status is Status.INFEASIBLE and r.x is None


def test_float_near_tie_feasible():
    p = Problem.from_arrays([[0.1, 0.2]], ">", [0.3])
    r = solve(p, "highs", time_limit=20)
    assert r.status is Status.OPTIMAL and r.objective == 2.0


def test_relu_problem_optimum_matches_brute_force():
    rng = np.random.default_rng(7)
    n, h = 8, 4
    W1, b1 = rng.normal(size=(h, n)), rng.normal(size=h)
    w2, b2 = rng.normal(size=h), 0.3
    b = ProblemBuilder()
    m = b.add_binaries(n)
    y = b.add_continuous(h, 0.0, 100.0)
    b.add_relus(y, W1, m, b1)
    b.add_constraints(w2[None, :], y, ">", -b2)
    b.set_objective(m, 1.0)
    p = b.build()
    masks = ((np.arange(2**n)[:, None] >> np.arange(n)) & 1).astype(float)
    ok = (np.maximum(masks @ W1.T + b1, 0) @ w2 + b2) > 0
    best = masks[ok].sum(axis=1).min() if ok.any() else None
    r = solve(p, "highs", time_limit=30)
    if best is None:
        assert r.status is Status.INFEASIBLE
    else:
        assert r.status is Status.OPTIMAL and r.objective == best


def test_time_limit_is_honest_and_kept():
    rng = np.random.default_rng(1)
    A = rng.normal(size=(80, 80))
    x = (rng.random(80) < 0.5).astype(float)
    p = Problem.from_arrays(A, ">", A @ x - 0.5)
    t = time.monotonic()
    r = solve(p, "highs", time_limit=1.0)
    wall = time.monotonic() - t
    assert wall < 1.0 + smug_opt.solving.DEFAULT_GRACE + 1.0
    assert r.status in (Status.FEASIBLE, Status.NO_SOLUTION, Status.OPTIMAL)
    if r.status is Status.FEASIBLE:
        assert r.bound is None or r.bound <= r.objective
        assert smug_opt.verify(p, r.x).ok


def test_errors_are_clear():
    p = Problem.from_arrays([[1.0]], ">=", [1.0])
    with pytest.raises(UnknownBackendError, match="installed backends: .*highs"):
        solve(p, "no-such-solver")
    with pytest.raises(TypeError, match="Problem"):
        solve("p.smug", "highs")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="time_limit"):
        solve(p, "highs", time_limit=-1)


def test_result_accessors():
    p = Problem.from_arrays([[1.0, 1.0]], ">=", [3.0])
    r = solve(p, "highs", time_limit=10)
    assert r.status is Status.INFEASIBLE
    with pytest.raises(ValueError, match="no solution"):
        r.values()
    d = r.to_dict()
    assert d["status"] == "INFEASIBLE" and d["x"] is None and d["bound"] is None


# ------------------------------------------------------------------------ starts
def _cover() -> Problem:
    return Problem.from_arrays([[1, 1, 0, 0, 1], [0, 1, 1, 0, 0], [0, 0, 1, 1, 1], [1, 0, 0, 1, 0]],
                               ">=", 1.0)


def test_a_verified_start_is_the_incumbent_when_the_solver_finds_nothing(toy_plugin: str) -> None:
    start = np.array([1.0, 1.0, 1.0, 1.0, 0.0])  # feasible, 4 cells (optimum 2)
    r = solve(_cover(), "toy-hang", time_limit=0.5, grace=0.5, start=start)
    assert r.status is Status.FEASIBLE and r.killed
    assert r.objective == 4.0 and np.array_equal(r.x, start)
    assert r.incumbents[0][1] == 4.0


def test_a_start_never_hides_a_better_solution() -> None:
    r = solve(_cover(), "highs", time_limit=20, start=[1, 1, 1, 1, 0])
    assert r.status is Status.OPTIMAL and r.objective == 2.0


def test_a_start_that_fails_verification_is_reported_and_ignored() -> None:
    r = solve(_cover(), "highs", time_limit=20, start=[0, 0, 0, 0, 0])
    assert r.status is Status.OPTIMAL and r.objective == 2.0
    assert "start rejected" in r.message


def test_the_problem_s_own_start_is_used_unless_disabled(toy_plugin: str) -> None:
    p = _cover().with_metadata(start=[1, 1, 1, 1, 0])
    assert solve(p, "toy-hang", time_limit=0.5, grace=0.5).objective == 4.0
    assert solve(p, "toy-hang", time_limit=0.5, grace=0.5, start=None).status is Status.NO_SOLUTION


def test_a_start_of_binaries_only_is_completed_with_exact_relu_outputs() -> None:
    p = two_cell_relu()
    r = solve(p, "highs", time_limit=20, start=[1, 1])
    assert r.status is Status.OPTIMAL and r.objective == 2.0 and r.x[2] == 1.5


@pytest.mark.parametrize(("start", "error"), [([1, 1], "2 values"), ([np.nan] * 5, "NaN"),
                                              ("greedy", "start must be")])
def test_bad_starts_are_named(start, error) -> None:
    with pytest.raises(ValueError, match=error):
        solve(_cover(), "highs", start=start)
