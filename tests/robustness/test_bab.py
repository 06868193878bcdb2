"""Branch and bound over ReLU splits (smug_opt.robustness.bab) against the exact answer on
tiny nets (every activation pattern's LP), and inside decide on a random MLP where the
plain bounds leave disjuncts open."""

from __future__ import annotations

import numpy as np
import pytest
from flat_nets import exact_minimum, mlp

from smug_opt.bounds import Box, propagate
from smug_opt.bounds.relu_chain import ChainBounds, ReluChain
from smug_opt.deadline import Deadline
from smug_opt.network.flat import Preprocess
from smug_opt.robustness import RobustnessQuery, decide
from smug_opt.robustness.bab import branch_and_bound
from smug_opt.vnnlib import Conjunct


@pytest.mark.parametrize("root_steps", [60, 0])
@pytest.mark.parametrize("seed", range(6))
def test_answers_match_the_exact_minimum(seed, root_steps):
    rng = np.random.default_rng(seed)
    net = mlp(rng, [2, 3, 4, 3])
    x0 = rng.uniform(-1, 1, 2)
    lo, hi = x0 - 0.5, x0 + 0.5
    fb = propagate(net, Box(lo, hi), method="crown")
    cb = ChainBounds.of(ReluChain.from_flat(net), lo, hi, [fb.lo[1], fb.lo[3]], [fb.hi[1], fb.hi[3]])
    label = int(net.forward(x0[None])[-1][0].argmax())
    for j in range(3):
        if j == label:
            continue
        c = np.zeros(3)
        c[label], c[j] = 1.0, -1.0  # unsafe: y_label - y_j <= 0
        exact = exact_minimum(net, lo, hi, c)
        if abs(exact) < 1e-6:
            continue
        result = branch_and_bound(cb, c[None], np.zeros(1), np.zeros(1, dtype=bool), Deadline.after(30),
                                  batch=4, root_steps=root_steps)
        if exact > 0:
            assert result.status == "unsat", (seed, j, exact, result)
        else:
            assert result.status == "candidate", (seed, j, exact, result)
            y = net.forward(result.x[None])[-1][0]
            assert c @ y <= 0 and np.all((lo <= result.x) & (result.x <= hi))


def test_decide_closes_what_the_bounds_leave_open():
    """A deeper random MLP and a box where CROWN leaves a disjunct open and no counterexample
    exists: branch and bound closes it (``"bab"``), with an exact proof."""
    rng = np.random.default_rng(7)
    net = mlp(rng, [5, 24, 24, 24, 4])
    x0 = rng.uniform(-1, 1, 5)
    label = int(net.forward(x0[None])[-1][0].argmax())
    rows = []
    for j in range(4):
        if j != label:
            row = np.zeros((1, 4))
            row[0, label], row[0, j] = 1.0, -1.0
            rows.append(Conjunct(row, np.zeros(1), np.zeros(1, dtype=bool)))
    pre = Preprocess(np.arange(5), np.ones(5), np.zeros(5))
    query = RobustnessQuery(net, pre, x0 - 0.3, x0 + 0.3, tuple(rows))
    assert not query.refuted().all()
    verdict = decide(query, time_limit=60)
    assert verdict.answer == "unsat" and verdict.proof == "exact", verdict
    assert "bab" in verdict.decided_by
