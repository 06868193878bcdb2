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
@pytest.mark.parametrize("lean", [True, pytest.param(False, marks=pytest.mark.slow)])
def test_fixed_set_is_robust_and_subset_minimal(seed, eps, lean):
    rng = np.random.default_rng(seed)
    net = mlp(rng, [4, 8, 8, 3])
    pre = Preprocess(np.arange(4), np.ones(4), np.zeros(4))
    x = rng.uniform(0, 1, 4)
    result = robust_explanation(net, pre, x, eps=eps, query_time=20, batch=2, lean=lean)
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


def test_preprocess_backward_is_the_chain_rule_with_repeated_indices():
    pre = Preprocess(np.array([2, 0, 2, 1]), np.array([0.5, 2.0, -1.0, 3.0]), np.zeros(4))
    g_affine = np.array([[1.0, 2.0, 3.0, 4.0], [0.0, 1.0, 0.0, -1.0]])
    expected = np.zeros((2, 5))
    for j, (i, s) in enumerate(zip(pre.index, pre.scale, strict=True)):
        expected[:, i] += g_affine[:, j] * s
    assert np.allclose(pre.backward(g_affine, 5), expected)


@pytest.mark.parametrize("seed", [1, 2, 5])
def test_batched_attack_shows_only_necessary_values(seed):
    """Each value the batched attack calls necessary has a counterexample in its own box
    (float64 forward pass), and an exact query agrees that freeing it breaks the label."""
    from smug_opt.robustness.necessity import necessary_by_attack

    rng = np.random.default_rng(seed)
    net = mlp(rng, [6, 10, 10, 3])
    pre = Preprocess(np.arange(6), np.ones(6), np.zeros(6))
    x = rng.uniform(0, 1, 6)
    label = int(net.forward(x[None])[-1][0].argmax())
    region = label_changes(3, label)
    low, high = np.maximum(x - 0.5, 0.0), np.minimum(x + 0.5, 1.0)
    free = np.zeros(6, dtype=bool)
    free[:2] = True
    lo, hi = np.where(free, low, x), np.where(free, high, x)
    shown = necessary_by_attack(net, pre, lo, hi, low, high, np.arange(2, 6), region)
    for c, cx in shown.items():
        box_lo, box_hi = lo.copy(), hi.copy()
        box_lo[c], box_hi[c] = low[c], high[c]
        assert np.all(cx >= box_lo) and np.all(cx <= box_hi)
        assert any(d.holds(net.forward(cx[None])[-1][0]) for d in region)
        assert decide(RobustnessQuery(net, pre, box_lo, box_hi, region), time_limit=30).answer == "sat"
    assert shown  # on these seeds freeing some single value breaks the label
