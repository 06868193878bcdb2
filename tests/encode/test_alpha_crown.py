"""α/β-CROWN bounds on ReLU chains (smug_opt.bounds.relu_chain, alpha_crown): never above the
exact minimum (found by enumerating activation patterns, one LP each) on tiny nets, whatever
the slopes, multipliers and splits; never above sampled values on a larger net; and the
optimised bound at least CROWN's."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from flat_nets import exact_minimum, mlp
from hypothesis import given, settings
from hypothesis import strategies as st

from smug_opt.bounds import Box, propagate
from smug_opt.bounds.alpha_crown import optimise, tighten
from smug_opt.bounds.relu_chain import ChainBounds, ReluChain
from smug_opt.network.flat import FlatNetwork


def chain_bounds(net: FlatNetwork, lo: np.ndarray, hi: np.ndarray) -> ChainBounds:
    fb = propagate(net, Box(lo, hi), method="crown")
    chain = ReluChain.from_flat(net)
    assert chain is not None
    relus = range(len(chain.widths))
    return ChainBounds.of(chain, lo, hi, [fb.lo[2 * i + 1] for i in relus], [fb.hi[2 * i + 1] for i in relus])


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10**6), width=st.floats(0.05, 1.5), split_share=st.floats(0, 0.6))
def test_bound_never_above_the_exact_minimum(seed, width, split_share):
    rng = np.random.default_rng(seed)
    net = mlp(rng, [2, 3, 3, 2])
    x0 = rng.uniform(-1, 1, 2)
    lo, hi = x0 - width, x0 + width
    cb = chain_bounds(net, lo, hi)
    c = rng.normal(size=2)
    splits = [np.where(rng.random(3) < split_share, rng.choice([-1, 1], 3), 0) for _ in range(2)]
    alphas = [torch.from_numpy(rng.random((1, 1, 3))) for _ in range(2)]
    betas = [torch.from_numpy(rng.exponential(size=(1, 1, 3))) for _ in range(2)]
    split_t = [torch.from_numpy(s.astype(np.int8)[None]) for s in splits]
    bound, _ = cb.lower(2, torch.from_numpy(c[None]), torch.zeros(1), alphas, betas, split_t)
    exact = exact_minimum(net, lo, hi, c, splits)
    assert bound.item() <= exact + 1e-7
    found = optimise(cb, 2, torch.from_numpy(c[None]), torch.zeros(1), steps=15, alphas=alphas,
                     betas=betas, splits=split_t)
    assert found.bound.item() <= exact + 1e-7


@pytest.mark.parametrize("seed", range(3))
def test_tightened_intervals_and_optimised_bound_hold_on_samples(seed):
    rng = np.random.default_rng(seed)
    net = mlp(rng, [6, 20, 20, 20, 4])
    x0 = rng.uniform(-1, 1, 6)
    lo, hi = x0 - 0.3, x0 + 0.3
    cb = chain_bounds(net, lo, hi)
    tight = tighten(cb, steps=15)
    points = rng.uniform(lo, hi, size=(5000, 6))
    points[:64] = np.array(list(itertools.product(*zip(lo, hi, strict=True))))  # the corners
    values = net.forward(points)
    for i in range(3):
        z = values[2 * i + 1]
        assert np.all(z >= tight.lo[i].numpy()) and np.all(z <= tight.hi[i].numpy())
        assert np.all(tight.lo[i].numpy() >= cb.lo[i].numpy())
        assert np.all(tight.hi[i].numpy() <= cb.hi[i].numpy())
    C = np.array([[1.0, -1.0, 0.0, 0.0], [0.0, 0.5, 0.0, -2.0]])
    crown, _ = propagate(net, Box(lo, hi), method="crown").linear(C)
    found = optimise(tight, 3, torch.from_numpy(C), torch.zeros(2), steps=30,
                     alphas=[tight.initial_alpha(i, 1, 2) for i in range(3)]).bound[0].numpy()
    assert np.all(found <= (values[-1] @ C.T).min(axis=0))
    assert np.all(found >= crown - 1e-9)


def test_only_dense_relu_chains():
    from dataclasses import replace

    rng = np.random.default_rng(0)
    net = mlp(rng, [2, 3, 2])
    assert ReluChain.from_flat(net) is not None
    leaky = replace(net, layers=tuple(replace(layer, kind="leaky_relu", alpha=0.1)
                                      if layer.kind == "relu" else layer for layer in net.layers))
    assert ReluChain.from_flat(leaky) is None
