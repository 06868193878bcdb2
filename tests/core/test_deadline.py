"""A deadline is one moment in time, made once at the edge and read by every step, also in
a worker in another process: it travels as a wall-clock moment, so it expires there at the
same wall time as in the process that made it, however long it took to get there."""

from __future__ import annotations

import multiprocessing
import pickle
import time

import pytest
from conftest import skip_unless_usable

from smug_opt.backend import SolveOptions, Status
from smug_opt.deadline import Deadline
from smug_opt.testing.instances import hard_instance
from smug_opt.workers import run_attempt, warm_workers


def _wall_end_in_child(payload: bytes, out: multiprocessing.Queue) -> None:
    deadline = pickle.loads(payload)
    left = deadline.remaining()
    out.put(None if left is None else time.time() + left)


def test_a_pickled_deadline_travels_as_a_wall_clock_moment():
    d = Deadline.after(30.0)
    _, (wall,) = d.__reduce__()
    assert abs(wall - (time.time() + 30.0)) < 0.1
    assert Deadline.none().__reduce__()[1] == (None,)
    back = pickle.loads(pickle.dumps(d))
    assert abs(back.at - d.at) < 0.05 and pickle.loads(pickle.dumps(Deadline.none())).at is None


def test_a_deadline_sent_to_another_process_expires_at_the_same_wall_time():
    d = Deadline.after(20.0)
    expected = d.wall_time()
    context = multiprocessing.get_context("spawn")  # a fresh interpreter, as a worker is
    out = context.Queue()
    child = context.Process(target=_wall_end_in_child, args=(pickle.dumps(d), out))
    child.start()
    seen = out.get(timeout=60)
    child.join(timeout=10)
    assert seen is not None and abs(seen - expected) < 0.1, (seen, expected)


def test_shifted_and_seconds_left():
    d = Deadline.after(10.0)
    assert 11.5 < d.shifted(2.0).remaining() <= 12.0 and 7.5 < d.shifted(-2.0).remaining() <= 8.0
    assert Deadline.none().shifted(5.0).at is None and Deadline.none().seconds_left(1e-3) is None
    assert Deadline.after(-1.0).seconds_left(1e-3) == 1e-3


def test_a_solver_worker_stops_at_the_deadline_made_before_it_was_asked():
    """The deadline is made, then a second passes before the (isolated, warm) worker is
    asked: the solver still stops at the deadline's wall time, not a second later, and is
    not killed (its hard deadline is far away)."""
    skip_unless_usable("highs")
    warm_workers(["highs"])
    made = time.monotonic()
    deadline = Deadline.after(3.0)
    time.sleep(1.0)
    outcome = run_attempt("highs", hard_instance(), SolveOptions(), 0, deadline=deadline,
                          hard_deadline=deadline.shifted(20.0))
    ended = time.monotonic() - made
    assert not outcome.killed and outcome.raw is not None, outcome
    assert outcome.raw.status is not Status.OPTIMAL, "the hard instance was solved: not a test"
    assert 2.5 < ended < 3.7, f"ended {ended:.2f}s after a 3 s deadline was made"


@pytest.mark.parametrize("seconds", [None, 5.0])
def test_a_solve_records_the_time_limit_it_was_given(seconds):
    from smug_opt import Problem, solve

    p = Problem.from_arrays([[1.0, 1.0]], ">=", [1.0])
    assert solve(p, "highs", time_limit=seconds).time_limit == seconds
    shared = solve(p, "highs", time_limit=Deadline.after(5.0))
    assert shared.status is Status.OPTIMAL and 4.0 < shared.time_limit <= 5.0


def test_a_capped_deadline_is_the_earlier_of_the_two():
    assert Deadline.none().capped(5.0).remaining() == pytest.approx(5.0, abs=0.5)
    far, near = Deadline.after(100.0), Deadline.after(1.0)
    assert far.capped(5.0).remaining() == pytest.approx(5.0, abs=0.5)
    assert near.capped(5.0) is near
