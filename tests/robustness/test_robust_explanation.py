"""Verified explanations on tiny nets: the fixed set is robust (exact query and dense
sampling agree) and subset-minimal (freeing any fixed value gives a confirmed counterexample)."""

from __future__ import annotations

import numpy as np
import pytest
from flat_nets import mlp

from smug_opt.network.flat import Preprocess
from smug_opt.robustness import RobustnessQuery, decide
from smug_opt.robustness.explanation import label_changes, robust_explanation


@pytest.mark.parametrize("seed, eps", [(0, 0.4), (2, 0.4), (9, 0.2), (10, 0.4), (11, 0.8)])
def test_fixed_set_is_robust_and_subset_minimal(seed, eps):
    rng = np.random.default_rng(seed)
    net = mlp(rng, [4, 8, 8, 3])
    pre = Preprocess(np.arange(4), np.ones(4), np.zeros(4))
    x = rng.uniform(0, 1, 4)
    result = robust_explanation(net, pre, x, eps=eps, query_time=20, batch=2)
    assert 0 < result.size < 4  # these seeds need some inputs fixed, not all
    low, high = np.maximum(x - eps, 0.0), np.minimum(x + eps, 1.0)
    region = label_changes(3, result.label)

    def box(fixed):
        return np.where(fixed, x, low), np.where(fixed, x, high)

    lo, hi = box(result.fixed)
    assert decide(RobustnessQuery(net, pre, lo, hi, region), time_limit=30).answer == "unsat"
    points = lo + (hi - lo) * rng.random((20000, 4))
    assert np.all(net.forward(points)[-1].argmax(axis=1) == result.label)
    assert result.subset_minimal and result.necessary == result.size
    for p in np.flatnonzero(result.fixed):
        fewer = result.fixed.copy()
        fewer[p] = False
        verdict = decide(RobustnessQuery(net, pre, *box(fewer), region), time_limit=30)
        assert verdict.answer == "sat"
        assert any(d.holds(net.forward(verdict.x[None])[-1][0]) for d in region)
