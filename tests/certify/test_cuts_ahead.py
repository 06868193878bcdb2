"""HiGHS's verified root cuts computed by a helper process while the solve runs
(:mod:`smug_opt.safe_search.ahead`): the cuts it hands over hold at every feasible point
(brute force, exact), are the rounds computed in this process, and a search given them
takes them at its root and still finds the brute-forced optimum."""

from __future__ import annotations

import contextlib
import itertools
import math
import time
from fractions import Fraction

import numpy as np
import pytest

from smug_opt import Problem, solve
from smug_opt.deadline import Deadline
from smug_opt.ir import ProblemBuilder, Sense
from smug_opt.safe_search import Settings, ahead, search, verified_cuts
from smug_opt.safe_search.ahead import MIN_BINARIES, CutsAhead, cuts_ahead, searched_problems
from smug_opt.safe_search.covers import Cut
from smug_opt.safe_search.search import _Search
from smug_opt.safe_search.verified_cuts import (
    fingerprint,
    highs_root_pool,
    remember,
    remembered,
    root_cut_rounds,
)
from smug_opt.spawn import Child, kill_group, spawn
from smug_opt.verification import decide_rows

pytest.importorskip("highspy")


def _knapsacks(seed: int, n: int = 16, rows: int = 8) -> Problem:
    """``min Σ x`` over ``n`` binaries, covering rows with 40-70 % of each row's weight."""
    rng = np.random.default_rng(seed)
    A = rng.uniform(0, 1, (rows, n)) * (rng.uniform(0, 1, (rows, n)) < 0.6)
    return Problem.from_arrays(A, ">=", A.sum(axis=1) * rng.uniform(0.4, 0.7, rows))


def _feasible(problem: Problem) -> np.ndarray:
    """Every feasible 0/1 point: rows decided in float64 (exactly for integer rows, whose
    sums float64 holds exactly; otherwise with a wide margin, and by :func:`decide_rows`
    at the points some row leaves within it)."""
    points = np.array(list(itertools.product([0.0, 1.0], repeat=problem.num_vars)))
    A = problem.A.toarray()
    ge, le = np.isin(problem.senses, [Sense.GE, Sense.GT]), np.isin(problem.senses, [Sense.LE, Sense.LT])
    sign = np.where(ge, 1.0, np.where(le, -1.0, 0.0))
    assert sign.all(), "inequality rows only"
    gap = (points @ A.T - problem.rhs) * sign
    integral = (np.round(A) == A).all(axis=1) & (np.round(problem.rhs) == problem.rhs)  # exact sums
    margin = np.where(integral, 0.0, 1e-6 * (1 + np.abs(A).sum(axis=1) + np.abs(problem.rhs)))
    strict = np.isin(problem.senses, [Sense.GT, Sense.LT])
    held = (gap > margin) | (integral & ~strict & (gap == 0))
    unclear = ((np.abs(gap) <= margin) & ~(integral & (gap == 0))).any(axis=1)
    holds = held.all(axis=1)
    holds[unclear] = decide_rows(problem, points[unclear]).holds.all(axis=1)
    return points[holds]


def _optimum(problem: Problem) -> Fraction:
    """The exact optimum by enumeration (every point's rows decided exactly)."""
    feasible = _feasible(problem)
    values = feasible @ problem.objective
    near = feasible[values <= values.min() + 1e-6]
    c = [Fraction(float(v)) for v in problem.objective]
    return min(sum((c[j] for j in np.flatnonzero(p)), Fraction(0)) for p in near)


def _holds_exactly(cut: Cut, point: np.ndarray) -> bool:
    return sum((Fraction(float(c)) for c, j in zip(cut.coefs, cut.cols, strict=True) if point[j] == 1),
               Fraction(0)) >= Fraction(cut.rhs)


def _ahead(problem: Problem, rounds: int) -> list[tuple[Problem, list[Cut]]]:
    """The helper run to its end on ``problem``: each problem the search takes (the
    strengthened parts, any size) with the cuts collected for it."""
    helper = CutsAhead(problem, Deadline.after(60.0), rounds=rounds, min_binaries=1)
    assert helper.child is not None
    helper.child.proc.wait(timeout=60)  # it ends once every part's rounds are sent
    helper.collect()
    parts = searched_problems(problem, 1)
    assert parts
    handed = [(part, remembered(part, ahead=True)) for part in parts]
    return [(part, cuts) for part, cuts in handed if cuts is not None]


@pytest.mark.slow
def test_the_cuts_computed_ahead_hold_at_every_feasible_point_and_are_the_rounds_here() -> None:
    handed = 0
    for seed in range(4):
        for part, cuts in _ahead(_knapsacks(seed), rounds=3):
            here = list(root_cut_rounds(part, 30.0, 3))
            assert [(c.cols.tolist(), c.coefs.tolist(), c.rhs) for c in cuts] == \
                [(c.cols.tolist(), c.coefs.tolist(), c.rhs) for c in (here[-1].cuts if here else [])]
            feasible = _feasible(part)
            for cut in cuts:
                activity = feasible[:, cut.cols] @ cut.coefs
                close = feasible[activity < cut.rhs + 1e-9 * (1 + np.abs(cut.coefs).sum())]
                assert all(_holds_exactly(cut, p) for p in close), cut
            handed += len(cuts)
    assert handed >= 10, handed  # not vacuous


def test_a_search_takes_the_cuts_computed_ahead_at_its_root_and_finds_the_optimum() -> None:
    taken = 0
    for seed in range(1):
        for part, cuts in _ahead(_knapsacks(seed), rounds=2):
            late = Settings(highs_cuts_after=10**6)
            assert _Search(part, None, Deadline.after(60.0), late).settings.highs_cuts_after == 0
            outcome = search(part, None, Deadline.after(60.0), Settings(highs_cuts_after=10**6))
            assert outcome.proven and outcome.best is not None
            assert outcome.best.objective == _optimum(part)
            taken += len(cuts)
    assert taken >= 5, taken


@pytest.fixture
def forgotten(monkeypatch: pytest.MonkeyPatch) -> None:
    """The made-up cuts below kept apart from every other test's (they hold for no problem)."""
    monkeypatch.setattr(verified_cuts, "_known", {})


@pytest.mark.usefixtures("forgotten")
def test_cuts_remembered_for_another_problem_are_not_taken() -> None:
    """Cuts are found by the fingerprint of the rows, bounds and kinds: a problem with one
    right-hand side changed gets none of them."""
    problem = _knapsacks(5)
    remember(fingerprint(problem), 1, [Cut(np.arange(16), np.ones(16), 16.0)], ahead=True)
    A, rhs = problem.A.toarray(), problem.rhs.copy()
    rhs[0] *= 0.99
    assert remembered(Problem.from_arrays(A, ">=", rhs), ahead=True) is None
    assert remembered(Problem.from_arrays(A, ">=", problem.rhs.copy()), ahead=True) is not None


@pytest.mark.usefixtures("forgotten")
def test_cuts_of_more_rounds_stand_in_for_fewer_only_when_computed_ahead() -> None:
    """A benchmark asking for one round after five in the same process gets one round's
    cuts; certification takes whatever the helper computed (at least the round it asks)."""
    problem, cuts = _knapsacks(6), [Cut(np.arange(16), np.ones(16), 16.0)]
    remember(fingerprint(problem), 5, cuts)
    assert remembered(problem, 5) is cuts and remembered(problem, 1) is None
    assert remembered(problem, 5, ahead=True) is None
    remember(fingerprint(problem), 5, cuts, ahead=True)
    assert remembered(problem, 1) is cuts and remembered(problem, 6) is None


def _wait_for_a_round(helper: CutsAhead, seconds: float = 120.0) -> None:
    """Until the thread reading the helper has a round (without collecting it)."""
    until = time.monotonic() + seconds
    while not helper.received():
        assert time.monotonic() < until, "no round arrived"
        time.sleep(0.05)


def test_a_helper_collected_at_once_ends_without_error() -> None:
    """Collected before it sent anything (the solve ended first): no error, the helper ends."""
    helper = CutsAhead(_knapsacks(7, n=120, rows=40), Deadline.after(60.0))
    helper.collect()
    assert helper.child is None


@pytest.mark.usefixtures("forgotten")
def test_a_helper_ended_early_hands_over_what_it_finished() -> None:
    """Collected once a round has arrived: that round's cuts are remembered for the part."""
    problem = _knapsacks(8, n=120, rows=40)
    parts = searched_problems(problem, MIN_BINARIES)
    assert parts and all(remembered(p, 1, ahead=True) is None for p in parts)
    helper = CutsAhead(problem, Deadline.after(120.0))
    _wait_for_a_round(helper)
    helper.collect()
    assert helper.child is None
    assert any(remembered(p, 1, ahead=True) is not None for p in parts)


def test_a_helper_past_its_memory_budget_ends_itself_and_hands_over_nothing() -> None:
    """A helper's HiGHS has no memory limit of its own: the helper watches its resident
    memory and exits (status 3) past the budget; the solve goes on without its cuts."""
    helper = CutsAhead(_knapsacks(7, n=120, rows=40), Deadline.after(60.0), limit_mb=1.0)
    assert helper.child is not None
    assert helper.child.proc.wait(timeout=60) == 3
    assert helper.collect() == 0 and helper.child is None


def test_cuts_ahead_keeps_to_the_memory_budget_it_is_given() -> None:
    """``cuts_ahead`` passes the solve's worker budget on: 1 MB ends the helper (status 3)."""
    helper = cuts_ahead(_knapsacks(7, n=120, rows=40), Deadline.after(60.0), 1.0)
    assert helper is not None and helper.child is not None
    assert helper.child.proc.wait(timeout=60) == 3
    helper.close()


def test_a_helper_dead_before_it_reads_the_problem_leaves_certification_without_cuts_ahead(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The helper is optional: one that dies at once (here killed before it is sent the
    problem, so the send meets a closed socket) gives no cuts ahead instead of failing the
    certified solve."""
    started = []

    def dead_on_arrival(module: str) -> Child:
        child = spawn(module)
        kill_group(child.proc)
        child.proc.wait()
        started.append(child)
        return child

    monkeypatch.setattr(ahead, "spawn", dead_on_arrival)
    assert cuts_ahead(_knapsacks(7, n=120, rows=40), Deadline.after(60.0), None) is None
    assert len(started) == 1 and started[0].proc.returncode is not None


@pytest.mark.slow
def test_a_certified_solve_gives_the_helper_the_callers_memory_budget(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``solve(memory_limit_mb=...)`` reaches the helper (it ran with the default budget
    whatever the caller asked); ``math.inf`` (no budget) reaches it as None. The helper
    class is the real one, recording what it was given."""
    given: list[float | None] = []

    class Recorded(CutsAhead):
        def __init__(self, *args: object, limit_mb: float | None = None, **kwargs: object) -> None:
            given.append(limit_mb)
            super().__init__(*args, limit_mb=limit_mb, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ahead, "CutsAhead", Recorded)
    problem = _knapsacks(0, n=MIN_BINARIES + 10)
    for budget in (2345.0, math.inf):
        r = solve(problem, "highs", time_limit=60, certify=True, memory_limit_mb=budget)
        assert r.status.name == "OPTIMAL", r.message
    assert given == [2345.0, None]


@pytest.mark.slow
def test_the_helper_sends_each_round_s_new_cuts_only() -> None:
    """Read off the helper's socket: no cut is sent twice (messages carried every cut so
    far, each round again), and each part's messages put together are its rounds here."""
    multi = 0
    for seed in (4, 6):  # covering knapsacks whose cuts come in two rounds (measured)
        rng = np.random.default_rng(seed)
        A = rng.uniform(0, 1, (12, 16)) * (rng.uniform(0, 1, (12, 16)) < 0.8)
        multi += _rounds_sent_once(Problem.from_arrays(A, ">=", A.sum(axis=1) * rng.uniform(0.5, 0.8, 12)))
    assert multi >= 1  # not vacuous: a part whose cuts came in two rounds or more


def _rounds_sent_once(problem: Problem) -> int:
    """The helper's messages on ``problem`` checked as above; how many parts took more than
    one message with cuts."""
    child = spawn("smug_opt.safe_search.ahead_worker")
    try:
        child.conn.send((problem, 3, 60.0, 1, None))
        messages = []
        with contextlib.suppress(EOFError):
            while True:
                messages.append(child.conn.recv())
    finally:
        child.proc.wait(timeout=60)
        child.conn.close()
    multi = 0
    for part in searched_problems(problem, 1):
        key = fingerprint(part)
        sent = [cut for k, _, new in messages if k == key for cut in new]
        here = list(root_cut_rounds(part, 30.0, 3))
        assert [(c.cols.tolist(), c.rhs) for c in sent] == [(c.cols.tolist(), c.rhs) for c in
                                                           (here[-1].cuts if here else [])]
        multi += sum(k == key and len(new) > 0 for k, _, new in messages) > 1
    return multi


def test_rounds_are_final_only_when_highs_finished_its_root() -> None:
    """A root stopped by HiGHS's time limit with no new cut does not end the rounds as if
    they were all done; a finished one proving nothing new does."""
    rng = np.random.default_rng(1)
    A = rng.uniform(0, 1, (12, 400)) * (rng.uniform(0, 1, (12, 400)) < 0.8)
    big = Problem.from_arrays(A, ">=", A.sum(axis=1) * rng.uniform(0.5, 0.8, 12))
    _, finished = highs_root_pool(big, 1e-3)
    assert not finished and not any(r.final for r in root_cut_rounds(big, 1e-3, 5))
    ends = [list(root_cut_rounds(_knapsacks(seed, rows=12), 30.0, 10))[-1:] for seed in range(4)]
    assert all(r[0].final for r in ends if r), ends
    assert sum(bool(r) for r in ends) >= 3


def test_no_helper_where_the_search_will_not_need_one() -> None:
    deadline = Deadline.after(60.0)
    assert cuts_ahead(_knapsacks(0), deadline, None) is None  # few binaries: enumerated or short
    assert cuts_ahead(_knapsacks(0, n=MIN_BINARIES + 10), Deadline.after(0.5), None) is None  # no time
    b = ProblemBuilder()
    x = b.add_binaries(MIN_BINARIES + 10)
    y = b.add_continuous(1, 0.0, 10.0)
    b.add_relus(y, np.ones((1, 4)), x[:4], lo=-10.0, hi=10.0)
    b.add_constraints(np.ones((1, x.size)), x, ">=", [3.0])
    b.set_objective(x, np.ones(x.size))
    assert cuts_ahead(b.build(), deadline, None) is None  # ReLUs: no safe search
    helper = cuts_ahead(_knapsacks(0, n=MIN_BINARIES + 10), deadline, None)
    assert helper is not None
    helper.close()


@pytest.mark.slow
def test_a_certified_solve_with_the_helper_is_exact_and_optimal() -> None:
    """End to end on a problem large enough for the helper: the claim is certified exact
    and agrees with HiGHS's optimum, whether the cuts came in time or not."""
    problem = _knapsacks(3, n=MIN_BINARIES + 20, rows=30)
    r = solve(problem, "highs", time_limit=120, certify=True)
    assert r.status.name == "OPTIMAL" and r.proof == "exact", r.message
    plain = solve(problem, "highs", time_limit=120, certify=False)
    assert r.objective == plain.objective
