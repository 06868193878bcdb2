"""Branch and bound through max pooling: the pooling of ReLU outputs rewritten as ReLUs
(smug_opt.bounds.pool_relus) is the same function in exact rational arithmetic; robustness
queries on tiny max-pool CNNs go to branch and bound and agree with the MILP of the original
network on another backend; the bounds with sparse rows equal the dense ones and hold on
samples; an explanation on a max-pool CNN is robust (MILP on another backend, dense samples)
and subset-minimal."""

from __future__ import annotations

import numpy as np
import pytest
from flat_nets import every_kind, exact_forward, pool_cnn

from smug_opt.bounds import Box, propagate
from smug_opt.bounds.pool_relus import pools_as_relus
from smug_opt.network.flat import Preprocess
from smug_opt.robustness import RobustnessQuery, decide
from smug_opt.robustness.explanation import label_changes, robust_explanation
from smug_opt.solving import solve

OTHER_BACKEND = "scip"


IDENTITY = Preprocess(np.arange(25), np.ones(25), np.zeros(25))


def milp_answer(query: RobustnessQuery) -> str:
    """``sat`` when the MILP of some disjunct (the original network's encoding, max pooling
    included) is feasible on :data:`OTHER_BACKEND`, ``unsat`` when every one is infeasible."""
    statuses = [solve(query.problem(k), OTHER_BACKEND, time_limit=60, isolate=False).status.name
                for k in range(len(query.disjuncts))]
    assert all(s in ("INFEASIBLE", "OPTIMAL", "FEASIBLE") for s in statuses), statuses
    return "unsat" if all(s == "INFEASIBLE" for s in statuses) else "sat"


@pytest.mark.parametrize("seed", range(4))
def test_rewrite_is_the_same_function_exactly(seed):
    rng = np.random.default_rng(seed)
    net = pool_cnn(rng, dense=4 * (seed % 2))
    rewrite = pools_as_relus(net)
    assert rewrite is not None
    assert {layer.kind for layer in rewrite.net.layers[1:]} == {"linear", "relu"}
    for x in rng.uniform(-1, 1, (5, 25)):
        assert exact_forward(rewrite.net, x)[-1] == exact_forward(net, x)[-1]
        assert np.allclose(rewrite.net.forward(x[None])[-1], net.forward(x[None])[-1], rtol=0, atol=1e-12)
    # the passed-through values are sums of ReLU outputs: never below the prior's 0
    values = rewrite.net.forward(rng.uniform(-1, 1, (200, 25)))
    for k, low in rewrite.prior[0].items():
        assert np.all(values[k] >= low)


def test_pooling_not_after_a_relu_is_not_rewritten():
    assert pools_as_relus(every_kind(np.random.default_rng(0))) is None  # leaky_relu → maxpool


@pytest.mark.parametrize("seed", range(3))
def test_sparse_rows_give_the_dense_rows_bounds(seed):
    rng = np.random.default_rng(seed)
    rewrite = pools_as_relus(pool_cnn(rng, dense=4))
    x0 = rng.uniform(-1, 1, 25)
    box = Box(x0 - 0.3, x0 + 0.3)
    dense = propagate(rewrite.net, box, method="crown", prior=rewrite.prior)
    sparse = propagate(rewrite.net, box, method="crown", prior=rewrite.prior, sparse_rows=True)
    points = box.lo + (box.hi - box.lo) * rng.random((3000, 25))
    values = rewrite.net.forward(points)
    for k in range(1, len(rewrite.net.layers)):
        assert np.allclose(sparse.lo[k], dense.lo[k], rtol=1e-9, atol=1e-12)
        assert np.allclose(sparse.hi[k], dense.hi[k], rtol=1e-9, atol=1e-12)
        assert np.all(values[k] >= sparse.lo[k]) and np.all(values[k] <= sparse.hi[k])


@pytest.mark.parametrize("seed", range(8))
def test_queries_through_pooling_agree_with_the_milp(seed):
    """Boxes of growing radius around a random point: decide's answer (branch and bound on
    the rewrite where the bounds leave a disjunct open) is the MILP's on another backend, and
    a ``sat``'s counterexample breaks the label."""
    rng = np.random.default_rng(seed)
    net = pool_cnn(rng, dense=4 * (seed % 2))
    x0 = rng.uniform(-1, 1, 25)
    label = int(net.forward(x0[None])[-1][0].argmax())
    region = label_changes(3, label)
    used_bab = False
    for radius in (0.05, 0.15, 0.3, 0.6):
        query = RobustnessQuery(net, IDENTITY, x0 - radius, x0 + radius, region)
        assert query.chain_bounds() is not None
        verdict = decide(query, time_limit=60, lean=True)
        used_bab |= "bab" in verdict.decided_by
        assert verdict.answer == milp_answer(query), (seed, radius, verdict)
        if verdict.answer == "sat":
            assert any(d.holds(net.forward(verdict.x[None])[-1][0]) for d in region)
        else:
            assert verdict.proof == "exact"
    if seed in (0, 5):  # boxes these seeds' bounds leave open
        assert used_bab


@pytest.mark.parametrize("seed", [pytest.param(0, marks=pytest.mark.slow), 3])  # 0: ~25 s
def test_explanation_on_a_pool_cnn_is_robust_and_subset_minimal(seed):
    rng = np.random.default_rng(seed)
    net = pool_cnn(rng, dense=4)
    x = rng.uniform(0, 1, 25)
    eps = 0.3
    result = robust_explanation(net, IDENTITY, x, eps=eps, query_time=30, batch=4)
    low, high = np.maximum(x - eps, 0.0), np.minimum(x + eps, 1.0)
    region = label_changes(3, result.label)

    def query(fixed: np.ndarray) -> RobustnessQuery:
        return RobustnessQuery(net, IDENTITY, np.where(fixed, x, low), np.where(fixed, x, high), region)

    assert result.size < 25 and result.subset_minimal  # proof: "solver" where the MILP settled a query
    assert milp_answer(query(result.fixed)) == "unsat"
    q = query(result.fixed)
    points = q.lo + (q.hi - q.lo) * rng.random((20000, 25))
    assert np.all(net.forward(points)[-1].argmax(axis=1) == result.label)
    for p in np.flatnonzero(result.fixed):
        fewer = result.fixed.copy()
        fewer[p] = False
        assert milp_answer(query(fewer)) == "sat"
