"""The traversal's reuse of a chunk's counterexample (the batched attack restarted from it,
the chunk asked again without the values it shows necessary) and its order by bound cost
keep the explanation sound and subset-minimal: checked against the full decision chain on
every fixed value."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from flat_nets import mlp

from smug_opt.network.flat import FlatLayer, FlatNetwork, Preprocess
from smug_opt.robustness import RobustnessQuery, decide
from smug_opt.robustness.bound_freeing import by_bound_cost
from smug_opt.robustness.explanation import label_changes, robust_explanation


@pytest.mark.parametrize("order_by_bounds", [True, False])
@pytest.mark.parametrize("seed", [5, 6, 11])
def test_reused_counterexamples_keep_the_set_robust_and_subset_minimal(seed, order_by_bounds):
    rng = np.random.default_rng(seed)
    net = mlp(rng, [10, 12, 12, 3])
    pre = Preprocess(np.arange(10), np.ones(10), np.zeros(10))
    x = rng.uniform(0, 1, 10)
    eps = 0.3
    result = robust_explanation(net, pre, x, eps=eps, query_time=20, batch=5, order_by_bounds=order_by_bounds)
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


def test_bound_cost_order_puts_inputs_the_net_ignores_first():
    """Inputs with no weight cost the bound nothing; the order is a permutation of the pool."""
    rng = np.random.default_rng(1)
    net = mlp(rng, [8, 10, 3])
    first = net.layers[1]
    dense = first.matrix.toarray()
    dense[:, [2, 5]] = 0.0
    layers = list(net.layers)
    layers[1] = FlatLayer("linear", first.inputs, first.size, matrix=sp.csr_matrix(dense), bias=first.bias)
    net = FlatNetwork(tuple(layers), net.input_shape)
    pre = Preprocess(np.arange(8), np.ones(8), np.zeros(8))
    x = rng.uniform(0.2, 0.8, 8)
    region = label_changes(3, int(net.forward(x[None])[-1][0].argmax()))
    low, high = x - 0.5, x + 0.5

    def query_for(values):
        free = np.zeros(8, dtype=bool)
        free[values] = True
        return RobustnessQuery(net, pre, np.where(free, low, x), np.where(free, high, x), region)

    assert not query_for(np.arange(8)).refuted().all()  # some disjunct open: the costs rank
    order = by_bound_cost(query_for, x, np.arange(8))
    assert sorted(order.tolist()) == list(range(8))
    assert set(order[:2].tolist()) == {2, 5}
