"""What the core believes of a backend's claims: OPTIMAL needs a proven bound, a fractional
binary proves nothing, an unattained infimum is never an optimum, every claim names its proof.

The lying backends here are registered the way plugins are, through an entry point of the
``smug_opt.backends`` group (injected into the registry for the test, solved in-process).
"""

from __future__ import annotations

from importlib.metadata import EntryPoint
from typing import Any, ClassVar

import numpy as np
import pytest
from conftest import skip_unless_accepts, usable_first_party
from scripted_backend import ScriptedBackend
from wrong_claims import CASES

from smug_opt import (
    Capabilities,
    Problem,
    RawResult,
    Status,
    registry,
    save_problem,
    solve,
)

UNATTAINED = {c.name: c for c in CASES}["unattained"]


class BoundlessOptimal(ScriptedBackend):
    """A float backend that says OPTIMAL with no bound (as on a time-out) for a poor solution."""

    name: ClassVar[str] = "test-boundless-optimal"

    def answer(self, problem: Problem) -> RawResult:
        x = np.ones(problem.num_vars)
        return RawResult(Status.OPTIMAL, x, float(problem.objective @ x), None, "timeout")


class ExactOptimal(BoundlessOptimal):
    """The same answer from a backend that declares itself exact (its word is the proof)."""

    name: ClassVar[str] = "test-exact-optimal"
    capabilities: ClassVar[Capabilities] = Capabilities(exact=True)


class FractionalOptimal(ScriptedBackend):
    """Says OPTIMAL with a binary at 0.3 and that solution's objective as its bound."""

    name: ClassVar[str] = "test-fractional-optimal"

    def answer(self, problem: Problem) -> RawResult:
        x = np.ones(problem.num_vars)
        x[0] = 0.3
        return RawResult(Status.OPTIMAL, x, float(problem.objective @ x),
                         float(problem.objective @ x), "Optimal")


LIARS = (BoundlessOptimal, ExactOptimal, FractionalOptimal)


@pytest.fixture
def liars(monkeypatch: pytest.MonkeyPatch) -> None:
    found = dict(registry._entry_points())
    for cls in LIARS:
        found[cls.name] = EntryPoint(cls.name, f"{__name__}:{cls.__name__}", registry.ENTRY_POINT_GROUP)
    registry.refresh()
    monkeypatch.setattr(registry, "_entry_points", lambda: found)
    yield
    registry._load.cache_clear()


# optimum 1, all ones: 3; not a cardinality row, whose count would be a bound by construction
ALL_ONES_OPTIMAL = Problem.from_arrays([[1.0, 2.0, 1.0]], ">=", [1.0])


def test_optimal_without_bound_from_a_float_backend_is_not_optimal(liars: None) -> None:
    r = solve(ALL_ONES_OPTIMAL, "test-boundless-optimal", isolate=False)
    assert r.status is Status.FEASIBLE and r.objective == 3.0
    assert r.bound is None and r.proof is None
    assert "without a bound" in r.message


def test_optimal_without_bound_from_an_exact_backend_is_its_proof(liars: None) -> None:
    p = Problem.from_arrays([[1.0, 1.0, 1.0]], ">=", [3.0])  # all ones is the optimum
    r = solve(p, "test-exact-optimal", isolate=False)
    assert r.status is Status.OPTIMAL and r.bound == 3.0 and r.proof == "exact"


def test_a_fractional_binary_makes_no_bound(liars: None) -> None:
    p = ALL_ONES_OPTIMAL
    r = solve(p, "test-fractional-optimal", isolate=False)
    assert r.status is Status.NO_SOLUTION and r.bound is None
    assert "fractional binary" in r.message


@pytest.mark.parametrize("backend", usable_first_party())
def test_every_claim_names_its_proof(backend: str) -> None:
    exact = registry.backend_class(backend).capabilities.exact
    # certify=False: the backend's own word (the default may certify it within its share)
    r = solve(Problem.from_arrays([[1.0, -2.0, 0.5], [0.0, 1.0, 1.0]], [">", "<="], [0.0, 1.5]),
              backend, time_limit=20, certify=False)
    assert r.status is Status.OPTIMAL and r.proof == ("exact" if exact else "solver")
    assert r.to_dict()["proof"] == r.proof and f"({r.proof})" in repr(r)
    r = solve(Problem.from_arrays([[1.0, 1.0]], ">=", [3.0]), backend, time_limit=20, certify=False)
    assert r.status is Status.INFEASIBLE and r.proof == ("exact" if exact else "solver")
    # one meaning of `verified` for INFEASIBLE on every backend: no solution was checked
    assert r.verified is None and "proof" in r.verification


@pytest.mark.parametrize("backend", usable_first_party())
def test_unattained_infimum_is_never_optimal(backend: str) -> None:
    # min z s.t. z > 1, z in [0, 4]: infimum 1, no minimiser
    skip_unless_accepts(backend, UNATTAINED.build())
    r = solve(UNATTAINED.build(), backend, time_limit=20)
    assert r.status is Status.FEASIBLE and r.proof is None
    assert r.objective > 1.0 and (r.bound is None or r.bound <= 1.0)


def test_z3_reports_the_unattained_infimum_as_its_bound() -> None:
    r = solve(UNATTAINED.build(), "z3", time_limit=20)
    assert r.status is Status.FEASIBLE and r.bound == 1.0
    assert "no minimiser exists" in r.message


def test_highs_proves_a_pure_lp() -> None:
    # no binaries: HiGHS's MIP dual bound is 0 there; the LP optimum is the bound
    from smug_opt import ProblemBuilder

    b = ProblemBuilder()
    z = b.add_continuous(2, 0.0, 4.0)
    b.add_constraints([[1.0, 2.0]], z, ">=", [3.0])
    b.set_objective(z, [1.0, 1.0])
    r = solve(b.build(), "highs", time_limit=20)
    assert r.status is Status.OPTIMAL and r.objective == pytest.approx(1.5)
    assert r.bound == pytest.approx(1.5, abs=1e-5)


@pytest.mark.parametrize(("backend", "flags", "expected"), [
    ("z3", [], "infeasibility proven in exact arithmetic"),
    ("highs", [], "infeasibility proven in exact arithmetic"),  # the default certification
    ("highs", ["--no-certify"], "infeasibility rests on HiGHS"),
])
def test_cli_says_what_was_proven(backend: str, flags: list[str], expected: str, tmp_path: Any,
                                  capfd: pytest.CaptureFixture[str]) -> None:
    from smug_opt.cli import main

    path = tmp_path / "p.smug"
    save_problem(Problem.from_arrays([[1.0, 1.0], [1.0, -1.0]], [">", ">"], [1.0, 0.5]), path)
    from smug_opt.cli import EXIT_NO_ANSWER

    assert main(["solve", str(path), "--backend", backend, "--time-limit", "20", *flags]) == EXIT_NO_ANSWER
    out = capfd.readouterr().out
    assert "INFEASIBLE" in out and f"proof      {expected}" in out
    assert "solution   no solution to verify: infeasibility is a proof" in out


@pytest.mark.parametrize("backend", usable_first_party())
def test_unknown_options_are_rejected_before_a_worker_starts(
        backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    solve_module = sys.modules["smug_opt.solve_loop"]  # where a solve asks a worker to run

    def no_worker(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a worker was asked to run")

    monkeypatch.setattr(solve_module, "run_attempt", no_worker)
    accepted = registry.backend_class(backend).options
    assert accepted, f"{backend} declares no options"
    with pytest.raises(ValueError, match=rf"'bogus_option'.*it accepts: {sorted(accepted)[0]}"):
        solve(ALL_ONES_OPTIMAL, backend, extras={"bogus_option": 1})


def test_a_backend_that_declares_no_options_accepts_none(liars: None) -> None:
    with pytest.raises(ValueError, match="it accepts: none"):
        solve(ALL_ONES_OPTIMAL, "test-boundless-optimal", isolate=False, extras={"verbose": 1})


def _strict_tie() -> Problem:
    """``m + z > 2`` with m binary, z in [0, 1]: only a tie at m = z = 1, so infeasible."""
    from smug_opt import ProblemBuilder

    b = ProblemBuilder()
    m = b.add_binaries(1)
    z = b.add_continuous(1, 0.0, 1.0)
    b.add_constraints([[1.0, 1.0]], [int(m[0]), int(z[0])], ">", [2.0])
    b.set_objective(m, [1.0])
    return b.build()


@pytest.mark.parametrize("backend", [b for b in usable_first_party()
                                     if not registry.backend_class(b).capabilities.exact])
def test_a_strict_tie_left_open_names_the_exact_backend(backend: str) -> None:
    r = solve(_strict_tie(), backend, time_limit=20)
    assert r.status in (Status.NO_SOLUTION, Status.INFEASIBLE), r
    if r.status is Status.NO_SOLUTION:
        assert "only because of strict rows" in r.message and "'z3'" in r.message


def test_z3_settles_the_strict_tie() -> None:
    r = solve(_strict_tie(), "z3", time_limit=20, extras={"encoding": "exact"})
    assert r.status is Status.INFEASIBLE and r.proof == "exact"
