"""certify=True: a floating-point solver's claim becomes exact (enumeration or z3 on the
residual question), is corrected when it was wrong, or is downgraded when time runs out."""

from __future__ import annotations

import os
import time
from dataclasses import replace
from fractions import Fraction
from importlib.metadata import EntryPoint
from typing import Any, ClassVar

import numpy as np
import pytest
from scripted_backend import ScriptedBackend

from smug_opt import Problem, ProblemBuilder, RawResult, Sense, Status, registry, solve, verify
from smug_opt.certify import ENUMERATION_BINARIES, certify
from smug_opt.deadline import Deadline

pytestmark = pytest.mark.skipif("z3" not in registry.available_backends(), reason="needs z3")


class FalseInfeasible(ScriptedBackend):
    """Says INFEASIBLE about everything."""

    name: ClassVar[str] = "test-false-infeasible"

    def answer(self, problem: Problem) -> RawResult:
        return RawResult(Status.INFEASIBLE, solver_status="infeasible")


class ProudOptimal(ScriptedBackend):
    """Says all ones is OPTIMAL, with a bound to match."""

    name: ClassVar[str] = "test-proud-optimal"

    def answer(self, problem: Problem) -> RawResult:
        x = np.ones(problem.num_vars)
        value = float(problem.objective @ x)
        return RawResult(Status.OPTIMAL, x, value, value, "optimal")


class Failing(ScriptedBackend):
    """Fails on everything, as a CBC that refuses a coefficient of 1e22 does."""

    name: ClassVar[str] = "test-failing"

    def answer(self, problem: Problem) -> RawResult:
        return RawResult(Status.ERROR, solver_status="model not valid")


@pytest.fixture
def liars(monkeypatch: pytest.MonkeyPatch) -> None:
    found = dict(registry._entry_points())
    for cls in (FalseInfeasible, ProudOptimal, Failing):
        found[cls.name] = EntryPoint(cls.name, f"{__name__}:{cls.__name__}", registry.ENTRY_POINT_GROUP)
    registry.refresh()
    monkeypatch.setattr(registry, "_entry_points", lambda: found)
    yield
    registry._load.cache_clear()


def _wide(n: int = ENUMERATION_BINARIES + 6, seed: int = 0) -> tuple[Problem, float]:
    """Too many binaries to enumerate; the optimum is known: weights of the first half
    reaching the sum of its three largest, and one of the rest."""
    rng = np.random.default_rng(seed)
    A = np.zeros((2, n))
    A[0, : n // 2] = rng.integers(1, 20, n // 2) / 4.0  # exact in binary
    A[1, n // 2:] = 1.0
    need = float(np.sort(A[0, : n // 2])[::-1][:3].sum())  # the three largest: optimum 3 + 1
    return Problem.from_arrays(A, [">=", ">"], [need, 0.0]), 4.0


SMALL = Problem.from_arrays([[1.0, 2.0, 0.5], [1.0, 1.0, 0.0]], [">", ">="], [1.0, 1.0])  # optimum 1


def test_enumeration_corrects_a_wrong_infeasible(liars: None) -> None:
    r = solve(SMALL, "test-false-infeasible", isolate=False, certify=True)
    assert r.status is Status.OPTIMAL and r.objective == 1.0 and r.proof == "exact"
    assert "claim was wrong" in r.message or "was not optimal" in r.message
    assert verify(SMALL, r.x).ok


def test_a_failed_solve_of_an_enumerable_problem_is_answered_exactly(liars: None) -> None:
    assert solve(SMALL, "test-failing", isolate=False, certify=False).status is Status.ERROR
    r = solve(SMALL, "test-failing", isolate=False, certify=True)
    assert r.status is Status.OPTIMAL and r.objective == 1.0 and r.proof == "exact", r.message
    assert "the solver failed" in r.message and verify(SMALL, r.x).ok
    infeasible = Problem.from_arrays([[1.0, 1.0]], [">"], [2.0])
    r = solve(infeasible, "test-failing", isolate=False, certify=True)
    assert r.status is Status.INFEASIBLE and r.proof == "exact", r.message


def _with_relu(p: Problem) -> Problem:
    """``p`` plus a ReLU of the first binary (cost 0): the safe search does not take it."""
    b = ProblemBuilder()
    x = b.add_binaries(p.num_vars)
    b.add_constraints(p.A.toarray(), x, [Sense(s) for s in p.senses], p.rhs)
    y = b.add_continuous(1, 0.0, 1.0)
    b.add_relus(y, [[1.0]], x[:1], lo=[0.0], hi=[1.0])
    b.set_objective(x, p.objective)
    return b.build()


def test_the_safe_search_and_z3_prove_the_residual_question() -> None:
    p, optimum = _wide()
    p = replace(p, objective=np.full(p.num_vars, 1.1))  # no safe LP bound meets it exactly
    plain = solve(p, "highs", time_limit=30, certify=False)
    assert plain.status is Status.OPTIMAL and plain.proof == "solver"
    r = solve(p, "highs", time_limit=30, certify=True)
    assert r.status is Status.OPTIMAL and r.proof == "exact"
    assert verify(p, r.x).objective == 4 * Fraction(1.1) and r.objective == float(4 * Fraction(1.1))
    assert "branch-and-bound with safe LP bounds" in r.message
    with_relu = _with_relu(p)  # the same question with a ReLU: z3 answers it
    r = solve(with_relu, "highs", time_limit=30, certify=True)
    assert r.status is Status.OPTIMAL and r.proof == "exact"
    assert verify(with_relu, r.x).objective == 4 * Fraction(1.1)
    assert "z3 (exact) proved no solution is better" in r.message
    assert plain.times.certify == 0 and 0 < r.times.certify <= r.times.total  # the bench's column
    r = solve(_wide()[0], "highs", time_limit=30, certify=True)  # count of cells: the LP bound
    assert r.objective == optimum and r.proof == "exact" and "the safe LP bound" in r.message


def test_z3_corrects_a_wrong_optimal(liars: None) -> None:
    p, optimum = _wide()
    r = solve(p, "test-proud-optimal", isolate=False, time_limit=60, certify=True)
    assert r.status is Status.OPTIMAL and r.objective == optimum and r.proof == "exact"
    assert verify(p, r.x).ok


def test_z3_certifies_infeasibility() -> None:
    n = ENUMERATION_BINARIES + 6
    p = Problem.from_arrays(np.ones((1, n)), ">", [float(n)])
    r = solve(p, "highs", time_limit=30, certify=True)
    assert r.status is Status.INFEASIBLE and r.proof == "exact" and "certified INFEASIBLE" in r.message


@pytest.mark.parametrize(("status", "downgraded"), [(Status.OPTIMAL, Status.FEASIBLE),
                                                    (Status.INFEASIBLE, Status.NO_SOLUTION)])
def test_claims_are_downgraded_when_time_runs_out(status: Status, downgraded: Status) -> None:
    p, _ = _wide()
    result = solve(p, "highs", time_limit=30, certify=False)  # the claim as the solver made it
    if status is Status.INFEASIBLE:
        result = replace(result, status=Status.INFEASIBLE, x=None, objective=None, bound=float("inf"))
    from smug_opt.backend import SolveOptions
    from smug_opt.certify import exact_options
    from smug_opt.strategies import SingleBackend, WorkerSettings

    ask = SingleBackend(WorkerSettings(exact_options(SolveOptions()), isolate=True, grace=1.0,
                                       memory_limit_mb=None))
    r = certify(p, result, ask=ask, deadline=Deadline.after(-1.0))
    assert r.status is downgraded and r.proof is None
    assert "could not be certified" in r.message and "time limit" in r.message


def test_certify_keeps_the_time_limit() -> None:
    rng = np.random.default_rng(1)
    A = rng.normal(size=(60, 60))
    x = (rng.random(60) < 0.5).astype(float)
    p = Problem.from_arrays(A, ">", A @ x - 0.5)
    t = time.monotonic()
    r = solve(p, "highs", time_limit=3.0, certify=True)
    assert time.monotonic() - t < 3.0 + 1.0 + 1.5  # limit + grace + process hand-off
    assert r.proof in (None, "exact")


def test_cli_certify(tmp_path: Any, capfd: pytest.CaptureFixture[str]) -> None:
    from smug_opt import save_problem
    from smug_opt.cli import main

    path = tmp_path / "p.smug"
    save_problem(SMALL, path)
    assert main(["solve", str(path), "--backend", "highs", "--certify", "--time-limit", "20"]) == 0
    out = capfd.readouterr().out
    assert "OPTIMAL" in out and "proof      optimality proven in exact arithmetic" in out


def test_out_of_range_inputs_are_flagged_and_certified_by_default() -> None:
    from smug_opt.numeric_range import numeric_issues

    p = Problem.from_arrays([[1e-310, 1e-310]], [">="], [1.5e-310])  # R13: optimum 2
    assert [i.kind for i in numeric_issues(p)] == ["subnormal", "subnormal"]
    r = solve(p, "highs", time_limit=20)
    assert r.status is Status.OPTIMAL and r.objective == 2.0 and r.proof == "exact"
    assert r.numeric_issues and "float-faithful range" in r.message
    # (R13's row is a cardinality row: its optimum is exact by construction even uncertified)
    unequal = Problem.from_arrays([[1e-310, 2e-310, 1e-310]], [">="], [2.5e-310])  # optimum 2
    assert solve(unequal, "highs", time_limit=20).proof == "exact"
    assert solve(unequal, "highs", time_limit=20, certify=False).proof == "solver"
    assert solve(p, "z3", time_limit=20).message == ""  # exact backends need no warning
    costly = Problem.from_arrays([[1.0, 1.0]], ">=", [1.0], objective=[1e15 + 1, 1e15])  # R8
    assert [i.kind for i in numeric_issues(costly)] == ["cost-scale"]
    r = solve(costly, "mip-cbc", time_limit=20)
    assert r.status is Status.OPTIMAL and r.objective == 1e15 and r.proof == "exact"


def test_a_wide_row_is_flagged_only() -> None:
    from smug_opt.numeric_range import numeric_issues

    p = Problem.from_arrays([[1e9, 1.0, 1.0]], ">=", [2.0])
    (issue,) = numeric_issues(p)
    assert issue.kind == "row-range" and not issue.certify
    r = solve(p, "highs", time_limit=20, certify=False)
    assert r.proof == "solver" and r.numeric_issues == (str(issue),)


def test_default_certification_is_one_lp_not_a_share_of_time(monkeypatch) -> None:
    """The default certifies a claim by one safe LP bound of the problem as stated, whatever
    the solve took (so a record's ``proof`` never depends on the machine's load): a claim it
    settles becomes exact; one it cannot settle keeps ``proof: solver`` (no downgrade),
    while an explicit ``certify=True`` downgrades it."""
    import smug_opt.certify_rule as rule
    from smug_opt.certify import certify_within_budget, worth_certifying

    wide, _ = _wide()
    p = replace(wide, senses=np.array([Sense.GE, Sense.GE], dtype=wide.senses.dtype),
                rhs=np.array([wide.rhs[0], 1.0]))  # LP: the three largest weights, and 1
    assert worth_certifying(p) and not worth_certifying(_with_relu(p))
    plain = solve(p, "highs", time_limit=30, certify=False)
    assert plain.status is Status.OPTIMAL and plain.proof == "solver"
    for total in (0.0, 0.01, 60.0):  # a fast or a slow solve: the same work, the same answer
        settled = certify_within_budget(p, replace(plain, times=replace(plain.times, total=total)),
                                        Deadline.after(60))
        assert settled.status is Status.OPTIMAL and settled.proof == "exact"
        assert "the safe LP bound" in settled.message
    assert solve(p, "highs", time_limit=30).proof == "exact"
    monkeypatch.setattr(rule, "DEFAULT_MAX_NONZEROS", p.A.nnz - 1)  # past the rule's size
    assert not worth_certifying(p) and solve(p, "highs", time_limit=30).proof == "solver"
    # the strict row relaxes to ">= 0": the LP bound 3 does not prove 4
    plain = solve(wide, "highs", time_limit=30, certify=False)
    kept = certify_within_budget(wide, plain, Deadline.after(60))
    assert kept.status is Status.OPTIMAL and kept.proof == "solver" and kept.objective == plain.objective
    from smug_opt.backend import SolveOptions
    from smug_opt.certify import exact_options
    from smug_opt.strategies import SingleBackend, WorkerSettings

    ask = SingleBackend(WorkerSettings(exact_options(SolveOptions()), isolate=True, grace=1.0,
                                       memory_limit_mb=None))
    explicit = certify(wide, plain, ask=ask, deadline=Deadline.after(-1.0))
    assert explicit.status is Status.FEASIBLE and explicit.proof is None


def test_a_default_certification_out_of_budget_never_downgrades() -> None:
    """A default certification with no time left (or whose one LP settles nothing) leaves an
    OPTIMAL or INFEASIBLE claim as it was, ``proof: solver``: only certify=True downgrades."""
    from smug_opt.certify import certify_within_budget

    wide, _ = _wide()
    none = Problem.from_arrays(np.array([[1.0, 1.0]]), [">="], [3.0])
    for p, status in ((wide, Status.OPTIMAL), (none, Status.INFEASIBLE)):
        claim = solve(p, "highs", time_limit=30, certify=False)
        assert claim.status is status and claim.proof == "solver"
        kept = certify_within_budget(p, claim, Deadline.after(-1.0))
        assert (kept.status, kept.proof, kept.objective) == (status, "solver", claim.objective)


def test_a_long_safe_search_hands_the_residual_question_to_z3(monkeypatch) -> None:
    """certify=True: the safe search may solve ``SEARCH_LPS`` LPs; past them z3 answers
    (measured on every bench suite: z3 settled in seconds what the search had not in 60 s)."""
    import smug_opt.certify as certify_module

    p, _ = _wide()
    p = replace(p, objective=np.full(p.num_vars, 1.1))  # a search of 3 LPs
    r = solve(p, "highs", time_limit=30, certify=True)
    assert r.proof == "exact" and "branch-and-bound with safe LP bounds" in r.message
    monkeypatch.setattr(certify_module, "SEARCH_LPS", 1)
    r = solve(p, "highs", time_limit=30, certify=True)
    assert r.status is Status.OPTIMAL and r.proof == "exact", r.message
    assert "LP limit" in r.message and "z3 (exact) proved no solution is better" in r.message
    assert verify(p, r.x).objective == 4 * Fraction(1.1)


def test_the_safe_search_resumes_when_z3_does_not_settle_its_share(monkeypatch) -> None:
    """Past ``SEARCH_LPS`` z3 gets ``RESIDUAL_SHARE`` of the time left; when it does not
    settle the claim there (here: a share of nothing), the search resumes without a budget."""
    import smug_opt.certify as certify_module

    p, _ = _wide()
    p = replace(p, objective=np.full(p.num_vars, 1.1))  # a search of ~115 LPs
    monkeypatch.setattr(certify_module, "SEARCH_LPS", 10)
    monkeypatch.setattr(certify_module, "RESIDUAL_SHARE", 1e-9)
    r = solve(p, "highs", time_limit=30, certify=True)
    assert r.status is Status.OPTIMAL and r.proof == "exact", r.message
    assert "branch-and-bound with safe LP bounds" in r.message and "LP limit" not in r.message
    assert verify(p, r.x).objective == 4 * Fraction(1.1)


def _covering(seed: int = 2) -> Problem:
    """30 binaries under 12 random covering rows: HiGHS's optimum 14 takes the safe search
    ~270 LPs (its root LP bound 13 does not prove it); after 60 its lowest open bound is 12.4."""
    rng = np.random.default_rng(seed)
    A = rng.uniform(0, 1, (12, 30)) * (rng.uniform(0, 1, (12, 30)) < 0.5)
    return Problem.from_arrays(A, ">", A.sum(axis=1) * rng.uniform(0.4, 0.6, 12))


@pytest.mark.parametrize("close_gap, settled_by", [(Fraction(4), "branch-and-bound with safe LP bounds"),
                                                   (Fraction(0), "z3 (exact) proved no solution is better")])
def test_a_search_near_its_end_goes_on_before_z3(monkeypatch, close_gap: Fraction, settled_by: str) -> None:
    """Past ``SEARCH_LPS``, a search whose lowest open bound is within ``CLOSE_GAP`` of what
    prunes (12.4 against 13 here) goes on without a budget and proves the claim; one further
    from it hands the residual question to z3 first."""
    import smug_opt.certify as certify_module

    p = _covering()
    monkeypatch.setattr(certify_module, "SEARCH_LPS", 60)
    monkeypatch.setattr(certify_module, "CLOSE_GAP", close_gap)
    r = solve(p, "highs", time_limit=60, certify=True)
    assert r.status is Status.OPTIMAL and r.proof == "exact", r.message
    assert settled_by in r.message
    assert verify(p, r.x).objective == 14


def test_the_search_uses_the_cores_this_process_may_run_on() -> None:
    from smug_opt.certify import MAX_SEARCH_WORKERS, search_workers

    assert search_workers() == max(1, min(len(os.sched_getaffinity(0)), MAX_SEARCH_WORKERS))
