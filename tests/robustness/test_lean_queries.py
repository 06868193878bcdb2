"""The lean robustness queries of an explanation (decide(lean=True): one short attack, branch
and bound without root α steps) answer as the full chain does and as the exact minimum says,
and the explanation they build is the one the full chain builds."""

from __future__ import annotations

import numpy as np
import pytest
from flat_nets import exact_minimum, mlp

from smug_opt.network.flat import Preprocess
from smug_opt.robustness import RobustnessQuery, decide
from smug_opt.robustness.explanation import label_changes, robust_explanation


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(8))
def test_lean_answers_match_the_exact_minimum(seed):
    """Per disjunct of a 2-input net's label change: lean ``unsat`` exactly when every
    activation pattern's LP keeps the label, and a lean ``sat`` point is in the region."""
    rng = np.random.default_rng(seed)
    net = mlp(rng, [2, 6, 6, 3])
    pre = Preprocess(np.arange(2), np.ones(2), np.zeros(2))
    x0 = rng.uniform(-1, 1, 2)
    lo, hi = x0 - 0.6, x0 + 0.6
    label = int(net.forward(x0[None])[-1][0].argmax())
    answers = []
    for d in label_changes(3, label):
        exact = exact_minimum(net, lo, hi, d.matrix[0])
        if abs(exact) < 1e-6:
            continue
        query = RobustnessQuery(net, pre, lo, hi, (d,))
        lean = decide(query, time_limit=30, lean=True)
        assert lean.answer == ("unsat" if exact > 0 else "sat"), (seed, exact, lean)
        assert lean.answer == decide(query, time_limit=30).answer
        if lean.answer == "sat":
            assert np.all((lo <= lean.x) & (lean.x <= hi)) and d.holds(net.forward(lean.x[None])[-1][0])
        answers.append(lean.answer)
    assert answers  # every seed asks something


@pytest.mark.slow
@pytest.mark.parametrize("seed, eps", [(0, 0.4), (2, 0.4), (10, 0.4), (11, 0.8)])
def test_lean_queries_change_nothing_in_the_explanation(seed, eps):
    rng = np.random.default_rng(seed)
    net = mlp(rng, [4, 8, 8, 3])
    pre = Preprocess(np.arange(4), np.ones(4), np.zeros(4))
    x = rng.uniform(0, 1, 4)
    lean = robust_explanation(net, pre, x, eps=eps, query_time=20, batch=2, lean=True)
    full = robust_explanation(net, pre, x, eps=eps, query_time=20, batch=2, lean=False)
    assert lean.subset_minimal and full.subset_minimal
    assert np.array_equal(lean.fixed, full.fixed) and lean.proof == full.proof
