"""α-CROWN on the last layer of linear/ReLU/max-pool networks (smug_opt.bounds.alpha_flat):
never below CROWN, below every sampled value, the rigorous float64 bound with the optimised
slopes matches the float32 estimate that chose them (so the slopes are used), CROWN's own
slopes reproduce CROWN; a robustness query's disjuncts refuted with α-CROWN are infeasible
by the MILP on scip, and α-CROWN refutes some that CROWN does not; below the exact minimum
(an LP per activation pattern) on small MLPs."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from flat_nets import every_kind, exact_minimum, mlp, pool_cnn

from smug_opt.bounds import Box, propagate
from smug_opt.bounds.alpha_flat import ALPHA_STEPS, _Plan, alpha_lower, default_steps, supports
from smug_opt.network.flat import Preprocess
from smug_opt.robustness import RobustnessQuery
from smug_opt.robustness.explanation import label_changes
from smug_opt.solving import solve

IDENTITY = Preprocess(np.arange(25), np.ones(25), np.zeros(25))
ROWS = np.array([[1.0, -1.0, 0.0], [1.0, 0.0, -1.0], [0.0, 1.0, -1.0], [-1.0, 0.0, 1.0]])


def _box(rng: np.random.Generator, radius: float) -> Box:
    x0 = rng.uniform(-1, 1, 25)
    return Box(x0 - radius, x0 + radius)


def _sampled_minimum(net, box: Box, rng: np.random.Generator) -> np.ndarray:
    points = rng.uniform(box.lo, box.hi, (20_000, 25))
    points[:5_000] = np.where(rng.random((5_000, 25)) < 0.5, box.lo, box.hi)  # corners
    return (net.forward(points)[-1] @ ROWS.T).min(axis=0)


@pytest.mark.parametrize("seed", range(6))
def test_alpha_bounds_hold_and_beat_crown(seed):
    rng = np.random.default_rng(seed)
    net = pool_cnn(rng, dense=4 * (seed % 2))
    box = _box(rng, 0.3)
    bounds = propagate(net, box, method="crown")
    assert supports(bounds)
    crown, _ = bounds.linear(ROWS)
    alpha = alpha_lower(bounds, ROWS, np.zeros(len(ROWS)), steps=30)
    assert np.all(alpha >= crown)
    assert np.all(alpha <= _sampled_minimum(net, box, rng))


def test_the_rigorous_bound_uses_the_optimised_slopes():
    gains = []
    for seed in range(6):
        rng = np.random.default_rng(seed)
        net = pool_cnn(rng, dense=4 * (seed % 2))
        bounds = propagate(net, _box(rng, 0.3), method="crown")
        crown, _ = bounds.linear(ROWS)
        plan = _Plan(bounds)
        relus = plan.relus
        # CROWN's own slopes through the slopes hook give CROWN's bound exactly
        own = {k: np.vstack([a.numpy().astype(np.float64)[None].repeat(len(ROWS), 0)] * 2)
               for k, a in zip(relus, plan.initial, strict=True)}
        assert np.allclose(bounds.linear(ROWS, slopes=own)[0], crown, rtol=0, atol=1e-9)
        estimate = plan.estimate(torch.from_numpy(ROWS.astype(np.float32)),
                                 [a.expand(len(ROWS), -1) for a in plan.initial]).numpy()
        assert np.allclose(estimate, crown, atol=1e-4)
        gains.append(alpha_lower(bounds, ROWS, np.zeros(len(ROWS)), steps=30) - crown)
    assert max(g.max() for g in gains) > 0.05  # the optimised slopes do reach the rigorous bound


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4))
def test_alpha_bounds_are_below_the_exact_minimum_on_small_mlps(seed):
    rng = np.random.default_rng(seed)
    net = mlp(rng, [3, 4, 3, 3])
    x0 = rng.uniform(-1, 1, 3)
    box = Box(x0 - 0.8, x0 + 0.8)
    bounds = propagate(net, box, method="crown")
    alpha = alpha_lower(bounds, ROWS[:2], np.zeros(2), steps=40)
    for row, low in zip(ROWS[:2], alpha, strict=True):
        assert low <= exact_minimum(net, box.lo, box.hi, row)


def test_steps_by_default_only_with_max_pooling():
    rng = np.random.default_rng(0)
    assert default_steps(pool_cnn(rng)) == ALPHA_STEPS
    assert default_steps(mlp(rng, [3, 5, 3])) == 0


def test_networks_with_other_layers_are_not_taken():
    rng = np.random.default_rng(0)
    net = every_kind(rng)
    assert not supports(propagate(net, Box(-np.ones(net.layers[0].size), np.ones(net.layers[0].size))))


@pytest.mark.slow
def test_alpha_refutations_are_infeasible_for_the_milp():
    more = 0
    for seed in range(12):
        rng = np.random.default_rng(seed)
        net = pool_cnn(rng, dense=4 * (seed % 2))
        x0 = rng.uniform(-1, 1, 25)
        label = int(net.forward(x0[None])[-1][0].argmax())
        for radius in (0.05, 0.1, 0.2):
            plain = RobustnessQuery(net, IDENTITY, x0 - radius, x0 + radius, label_changes(3, label))
            tight = RobustnessQuery(net, IDENTITY, x0 - radius, x0 + radius, label_changes(3, label),
                                    alpha_steps=30)
            crown, alpha = plain.refuted(), tight.refuted()
            assert np.all(alpha >= crown)
            for k in np.flatnonzero(alpha & ~crown):
                more += 1
                status = solve(tight.problem(k), "scip", time_limit=60, isolate=False).status.name
                assert status == "INFEASIBLE", (seed, radius, k, status)
    assert more > 0
