"""The core solve loop on a real backend (HiGHS): statuses, bounds, retries, limits."""

import subprocess
import sys
import time

import numpy as np
import pytest

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
    # rejected exactly, cut off, and the next relaxation proves the optimum
    p = Problem.from_arrays([[1.0, 1.0, 1.0]], ">", [0.0])
    r = solve(p, "highs", time_limit=20)
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
    assert wall < 1.0 + smug_opt.solve.__globals__["DEFAULT_GRACE"] + 1.0
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
