"""``unsat`` answers and robust explanations held to a counterexample search that shares
nothing with smug-opt's bounds or encoders (:mod:`independent_milp`: interval big-Ms, SciPy's
HiGHS, the point re-run exactly), on MLPs with 3-12 inputs where dense sampling covers little
of the box, and on a max-pooling CNN. A failure is an exactly confirmed counterexample."""

from __future__ import annotations

import numpy as np
import pytest
from flat_nets import mlp, pool_cnn
from independent_milp import counterexample

from smug_opt.network.flat import Preprocess
from smug_opt.robustness import RobustnessQuery, decide
from smug_opt.robustness.explanation import label_changes, robust_explanation


def _identity(n: int) -> Preprocess:
    return Preprocess(np.arange(n), np.ones(n), np.zeros(n))


@pytest.mark.slow  # 5-10 CPU s each
@pytest.mark.parametrize("sizes", [[3, 10, 10, 3], [4, 8, 8, 8, 3]])
def test_no_unsat_answer_has_a_counterexample_and_every_sat_one_is_found(sizes):
    answers = {"sat": 0, "unsat": 0}
    for seed in range(3):
        rng = np.random.default_rng(seed)
        net = mlp(rng, sizes)
        x0 = rng.uniform(-1, 1, sizes[0])
        region = label_changes(3, int(net.forward(x0[None])[-1][0].argmax()))
        for eps in (0.3, 2.0):
            lo, hi = x0 - eps, x0 + eps
            query = RobustnessQuery(net, _identity(sizes[0]), lo, hi, region)
            verdict = decide(query, time_limit=30, lean=True)
            found = counterexample(net, lo, hi, region)
            if verdict.answer == "unsat":
                assert found is None, (seed, eps, found)
            if verdict.answer == "sat":  # the search is not blind: it finds what decide found
                assert found is not None, (seed, eps)
            answers[verdict.answer] = answers.get(verdict.answer, 0) + 1
    assert answers["sat"] and answers["unsat"], answers


@pytest.mark.parametrize("net_of, inputs, eps", [
    (lambda rng: mlp(rng, [12, 10, 8, 3], scale=1.5), 12, 0.3),
    pytest.param(lambda rng: pool_cnn(rng, dense=4), 25, 0.15, marks=pytest.mark.slow),  # 5 CPU s
])
def test_every_explanation_s_free_values_keep_the_label(net_of, inputs, eps):
    """Each explanation's box (fixed values at ``x``, the rest within ``eps``, clipped to
    [0, 1]) has no counterexample; some explanations fix values, some free values."""
    fixed = free = 0
    for seed in range(3):
        rng = np.random.default_rng(seed)
        net = net_of(rng)
        x = rng.uniform(0, 1, inputs)
        e = robust_explanation(net, _identity(inputs), x, eps=eps, time_limit=60)
        lo = np.where(e.fixed, x, np.maximum(x - eps, 0.0))
        hi = np.where(e.fixed, x, np.minimum(x + eps, 1.0))
        assert counterexample(net, lo, hi, label_changes(3, e.label)) is None, seed
        fixed, free = fixed + int(e.fixed.sum()), free + int((~e.fixed).sum())
    assert fixed and free
