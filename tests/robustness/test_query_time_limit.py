"""A robustness query ends near its time limit even when its attack alone would take far longer."""

from __future__ import annotations

import time

import numpy as np
from flat_nets import mlp

from smug_opt.network.flat import Preprocess
from smug_opt.robustness import RobustnessQuery, decide
from smug_opt.robustness.explanation import label_changes


def _query_the_bounds_leave_open() -> RobustnessQuery:
    """A 2-16-16-3 MLP whose ±0.3 box the bounds do not settle (branch and bound proves it ``unsat``)."""
    rng = np.random.default_rng(3)
    net = mlp(rng, [2, 16, 16, 3])
    x0 = rng.uniform(-1, 1, 2)
    label = int(net.forward(x0[None])[-1][0].argmax())
    pre = Preprocess(np.arange(2), np.ones(2), np.zeros(2))
    return RobustnessQuery(net, pre, x0 - 0.3, x0 + 0.3, label_changes(3, label))


def test_the_attack_stops_at_the_query_deadline():
    query = _query_the_bounds_leave_open()
    assert not query.refuted().all()
    assert decide(query, time_limit=30).answer == "unsat"
    start = time.monotonic()
    # ten million PGD steps: hours without the deadline
    cut = decide(query, time_limit=0.5, attack_steps=10**7)
    assert time.monotonic() - start < 5.0
    assert cut.answer in ("unsat", "unknown")
