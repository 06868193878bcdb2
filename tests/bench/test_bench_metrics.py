"""Benchmark metrics on hand-made result sets with answers worked out by hand."""

from __future__ import annotations

import math

import pytest

from smug_opt.backend import Status
from smug_opt.bench.metrics import (
    TIME_FLOOR,
    JobOutcome,
    best_known,
    classify,
    instance_results,
    performance_profile,
    primal_gap,
    primal_integral,
    shifted_geometric_mean,
)
from smug_opt.bench.records import RunRecord
from smug_opt.bench.summary import summarize_suites
from smug_opt.result import Timings

LIMIT = 10.0


def rec(backend: str, instance: str, status: Status, seconds: float | None = None, *,
        objective: float | None = None, bound: float | None = None, repeat: int = 0,
        verified: bool | None = None, incumbents: tuple = (), killed: bool = False) -> RunRecord:
    if verified is None:
        verified = True if objective is not None else None
    return RunRecord(
        suite="s", instance=instance, backend=backend, repeat=repeat, status=status,
        time_limit=LIMIT, threads=1, seed=0, objective=objective, bound=bound,
        times=None if seconds is None else Timings(total=seconds), verified=verified,
        reverified=True if objective is not None else None, incumbents=incumbents, killed=killed,
    )


def test_sgm_uses_shift_ten_and_floor_one():
    # (11 · 20 · 110)^(1/3) − 10
    assert shifted_geometric_mean([1.0, 10.0, 100.0]) == pytest.approx(24200 ** (1 / 3) - 10)
    assert shifted_geometric_mean([0.5], shift=0.0) == pytest.approx(1.0)  # max(1, t + s)
    assert math.isnan(shifted_geometric_mean([]))


def test_sgm_counts_unsolved_at_limit_and_scales_best_to_one():
    records = [
        rec("a", "p1", Status.OPTIMAL, 1.0, objective=3, bound=3),
        rec("a", "p2", Status.OPTIMAL, 2.0, objective=5, bound=5),
        rec("b", "p1", Status.OPTIMAL, 4.0, objective=3, bound=3),
        rec("b", "p2", Status.NO_SOLUTION, 10.4),  # overran: counted at the limit (10)
    ]
    (suite,) = summarize_suites(records)
    a, b = suite.backends
    assert a.sgm == pytest.approx(math.sqrt(11 * 12) - 10)
    assert b.sgm == pytest.approx(math.sqrt(14 * 20) - 10)
    assert a.sgm_scaled == pytest.approx(1.0)
    assert b.sgm_scaled == pytest.approx((math.sqrt(14 * 20) - 10) / (math.sqrt(11 * 12) - 10))
    assert (a.solved, b.solved, b.timeouts) == (2, 1, 1)
    assert b.median_time == pytest.approx(7.0)  # median of 4 and 10


def test_performance_profile_rho_values():
    profile = performance_profile({"a": [1.0, 2.0, math.inf], "b": [2.0, 1.0, 3.0]})
    assert profile.ratios["a"] == (1.0, 2.0, math.inf)
    assert profile.ratios["b"] == (2.0, 1.0, 1.0)
    assert profile.at("a", 1.0) == pytest.approx(1 / 3)
    assert profile.at("a", 2.0) == pytest.approx(2 / 3)
    assert profile.at("a", 1e9) == pytest.approx(2 / 3)  # the failure never counts
    assert profile.at("b", 1.0) == pytest.approx(2 / 3)
    assert profile.at("b", 1.999) == pytest.approx(2 / 3)
    assert profile.at("b", 2.0) == pytest.approx(1.0)
    assert profile.taus == (1.0, 2.0)
    assert profile.rho["a"] == (pytest.approx(1 / 3), pytest.approx(2 / 3))


def test_performance_profile_floors_tiny_times_and_all_failed_instances():
    profile = performance_profile({"a": [1e-6, math.inf], "b": [2 * TIME_FLOOR, math.inf]})
    assert profile.ratios["b"][0] == pytest.approx(2.0)  # 1 µs is read as 1 ms
    assert profile.ratios["a"][1] == math.inf and profile.ratios["b"][1] == math.inf


def test_primal_gap_is_bertholds():
    assert primal_gap(12.0, 10.0) == pytest.approx(2 / 12)
    assert primal_gap(10.0, 10.0) == 0.0
    assert primal_gap(0.0, 0.0) == 0.0
    assert primal_gap(-1.0, 1.0) == 1.0
    assert primal_gap(None, 10.0) == 1.0


def test_primal_integral_of_a_known_step_function():
    # gap 1 on [0, 1), 10/20 on [1, 3), 2/12 on [3, 5), 0 after: 1 + 1 + 1/3
    steps = [(3.0, 12.0), (1.0, 20.0), (5.0, 10.0), (7.0, 11.0)]  # unsorted; 11 is no improvement
    assert primal_integral(steps, 10.0, horizon=10.0) == pytest.approx(1 + 1 + 1 / 3)
    assert primal_integral([], 10.0, horizon=10.0) == pytest.approx(10.0)
    assert primal_integral([(12.0, 10.0)], 10.0, horizon=10.0) == pytest.approx(10.0)  # past horizon


def test_record_primal_integral_adds_the_final_solution():
    r = rec("a", "p", Status.OPTIMAL, 4.0, objective=10, bound=10, incumbents=((1.0, 20.0),))
    (x,) = instance_results([r])
    assert x.primal_integral == pytest.approx(1 + 3 * 0.5)  # 20 found at 1 s, 10 at 4 s
    assert instance_results([rec("a", "p", Status.OPTIMAL, 4.0, objective=10)])[0].primal_integral is None


def test_gap_to_best_known_over_backends():
    records = [
        rec("a", "p", Status.FEASIBLE, 10.0, objective=12, bound=8),
        rec("b", "p", Status.OPTIMAL, 3.0, objective=10, bound=10),
        rec("c", "p", Status.NO_SOLUTION, 10.0),
    ]
    assert best_known(records) == {("s", "p"): 10.0}
    gaps = {x.backend: x.gap_to_best for x in instance_results(records)}
    assert gaps == {"a": pytest.approx(2 / 12), "b": 0.0, "c": 1.0}
    a, _, c = summarize_suites(records)[0].backends
    assert (a.feasible, a.solved, a.timeouts) == (1, 0, 1)
    assert (c.feasible, c.timeouts) == (0, 1)


@pytest.mark.parametrize(("record", "why"), [
    (rec("a", "p", Status.OPTIMAL, 1.0, objective=12, bound=12), "claimed optimal"),
    (rec("a", "p", Status.FEASIBLE, 10.0, objective=11, bound=10.5), "lower bound"),
    (rec("a", "p", Status.INFEASIBLE, 1.0), "claimed infeasible"),
    (rec("a", "p", Status.NO_SOLUTION, 1.0, verified=False), "failed exact verification"),
])
def test_wrong_answers_are_never_solved(record, why):
    reference = rec("b", "p", Status.OPTIMAL, 2.0, objective=10, bound=10)
    best = best_known([record, reference])[("s", "p")]
    assert best == 10.0
    assert classify(record, best) is JobOutcome.WRONG
    (suite,) = summarize_suites([record, reference])
    a = next(b for b in suite.backends if b.backend == "a")
    assert (a.solved, a.wrong) == (0, 1)
    assert any(why in reason for *_, reason in suite.wrong)
    assert suite.profile.ratios["a"] == (math.inf,)


def test_outcomes_and_errors():
    assert classify(rec("a", "p", Status.ERROR, killed=True), None) is JobOutcome.ERROR
    assert classify(rec("a", "p", Status.NO_SOLUTION, 10.0), None) is JobOutcome.TIMEOUT
    assert classify(rec("a", "p", Status.INFEASIBLE, 1.0), None) is JobOutcome.SOLVED
    (suite,) = summarize_suites([rec("a", "p", Status.ERROR, killed=True), rec("a", "q", Status.OPTIMAL, 1.0,
                                                                          objective=1, bound=1)])
    (a,) = suite.backends
    assert (a.errors, a.killed, a.solved) == (1, 1, 1)


def test_repeats_take_the_median_and_need_every_repeat_solved():
    records = [rec("a", "p", Status.OPTIMAL, t, objective=3, bound=3, repeat=i)
               for i, t in enumerate([1.0, 5.0, 2.0])]
    (x,) = instance_results(records)
    assert (x.outcome, x.seconds, x.repeats) == (JobOutcome.SOLVED, 2.0, 3)
    records[1] = rec("a", "p", Status.FEASIBLE, 10.0, objective=4, bound=2, repeat=1)
    (x,) = instance_results(records)
    assert (x.outcome, x.seconds, x.objective) == (JobOutcome.FEASIBLE, 2.0, 3.0)


def test_certified_counts_exact_claims_and_their_certification_seconds():
    """Claims are OPTIMAL/INFEASIBLE jobs; certified ones have proof "exact"; the median
    certification seconds run over the claims (0 where certification was not asked)."""
    def claim(instance: str, status: Status, proof: str | None, certify: float) -> RunRecord:
        return RunRecord(suite="s", instance=instance, backend="a", repeat=0, status=status,
                         time_limit=LIMIT, threads=1, seed=0, proof=proof,
                         times=Timings(total=certify + 1.0, overhead=certify, certify=certify))

    records = [claim("p1", Status.OPTIMAL, "exact", 0.5), claim("p2", Status.OPTIMAL, "solver", 0.0),
               claim("p3", Status.INFEASIBLE, "exact", 2.0), claim("p4", Status.FEASIBLE, None, 3.0)]
    assert [r.certified for r in records] == [True, False, True, None]
    (suite,) = summarize_suites(records)
    (a,) = suite.backends
    assert (a.claims, a.certified, a.median_certify_seconds) == (3, 2, 0.5)
    (none,) = summarize_suites([rec("b", "p1", Status.FEASIBLE, 1.0, objective=3)])
    (empty,) = none.backends
    assert (empty.claims, empty.certified, empty.median_certify_seconds) == (0, 0, None)
