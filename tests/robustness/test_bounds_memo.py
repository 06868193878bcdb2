"""An explanation whose queries start their CROWN intervals from earlier queries'
(smug_opt.robustness.bounds_memo) builds the same set as one computing them from scratch,
on max-pool CNNs (the rewrite's intervals reused too) and an MLP."""

from __future__ import annotations

import numpy as np
import pytest
from flat_nets import mlp, pool_cnn

from smug_opt.network.flat import Preprocess
from smug_opt.query_work import Work
from smug_opt.robustness.bounds_memo import BoundsMemo
from smug_opt.robustness.explanation import robust_explanation

WORK = Work(domains=64, milp_nodes=200)


@pytest.mark.parametrize("kind, seed", [pytest.param("pool cnn", 3, marks=pytest.mark.slow),
                                        pytest.param("pool cnn", 5, marks=pytest.mark.slow), ("mlp", 0)])
def test_reused_bounds_build_the_same_explanation(kind, seed, monkeypatch):
    rng = np.random.default_rng(seed)
    if kind == "mlp":
        net, pre, eps = mlp(rng, [6, 16, 16, 3]), Preprocess(np.arange(6), np.ones(6), np.zeros(6)), 0.3
        x = rng.uniform(0, 1, 6)
    else:
        net, pre, eps = pool_cnn(rng, dense=4), Preprocess(np.arange(25), np.ones(25), np.zeros(25)), 0.3
        x = rng.uniform(0, 1, 25)
    found = robust_explanation(net, pre, x, eps=eps, batch=4, query_work=WORK, reuse_bounds=False,
                               solve_options={"isolate": False})
    kinds: list[str] = []
    find = BoundsMemo.find

    def watched(self, kind_, *args):
        kinds.append(kind_)
        return find(self, kind_, *args)

    monkeypatch.setattr(BoundsMemo, "find", watched)
    again = robust_explanation(net, pre, x, eps=eps, batch=4, query_work=WORK, reuse_bounds=True,
                               solve_options={"isolate": False})
    assert np.array_equal(again.fixed, found.fixed) and again.size < x.size
    counts = [(r.necessary, r.undecided, r.queries) for r in (found, again)]
    assert counts[0] == counts[1]
    assert kinds.count("crown") > 1 and (kind == "mlp" or "pool rewrite" in kinds)
