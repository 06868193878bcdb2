"""The traversal's reuse of a chunk's counterexample (the batched attack restarted from it,
the chunk asked again without the values it shows necessary) keeps the explanation sound
and subset-minimal: checked against the full decision chain on every fixed value."""

from __future__ import annotations

import numpy as np
import pytest
from flat_nets import mlp

from smug_opt.network.flat import Preprocess
from smug_opt.robustness import RobustnessQuery, decide
from smug_opt.robustness.explanation import label_changes, robust_explanation


@pytest.mark.parametrize("seed", [5, 6, 11])
def test_reused_counterexamples_keep_the_set_robust_and_subset_minimal(seed):
    rng = np.random.default_rng(seed)
    net = mlp(rng, [10, 12, 12, 3])
    pre = Preprocess(np.arange(10), np.ones(10), np.zeros(10))
    x = rng.uniform(0, 1, 10)
    eps = 0.3
    result = robust_explanation(net, pre, x, eps=eps, query_time=20, batch=5)
    low, high = np.maximum(x - eps, 0.0), np.minimum(x + eps, 1.0)
    region = label_changes(3, result.label)

    def box(fixed):
        return np.where(fixed, x, low), np.where(fixed, x, high)

    assert 0 < result.size < 10 and result.subset_minimal
    lo, hi = box(result.fixed)
    assert decide(RobustnessQuery(net, pre, lo, hi, region), time_limit=30).answer == "unsat"
    points = lo + (hi - lo) * rng.random((20000, 10))
    assert np.all(net.forward(points)[-1].argmax(axis=1) == result.label)
    for p in np.flatnonzero(result.fixed):
        fewer = result.fixed.copy()
        fewer[p] = False
        verdict = decide(RobustnessQuery(net, pre, *box(fewer), region), time_limit=30)
        assert verdict.answer == "sat" and any(d.holds(net.forward(verdict.x[None])[-1][0]) for d in region)
