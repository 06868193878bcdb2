"""Per-domain intervals of branch and bound (smug_opt.bounds.refine): each holds the exact
range of its neuron over its subdomain (every activation pattern's LP on tiny nets; samples
on a larger one), is never looser than the interval it started from, and is tighter
somewhere."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from flat_nets import exact_minimum, mlp

from smug_opt.bounds import Box, propagate
from smug_opt.bounds.alpha_crown import tighten
from smug_opt.bounds.refine import refine
from smug_opt.bounds.relu_chain import ChainBounds, ReluChain
from smug_opt.network.flat import FlatNetwork


def _chain_bounds(net: FlatNetwork, lo: np.ndarray, hi: np.ndarray) -> ChainBounds:
    fb = propagate(net, Box(lo, hi), method="crown")
    chain = ReluChain.from_flat(net)
    assert chain is not None
    relus = range(len(chain.widths))
    return tighten(ChainBounds.of(chain, lo, hi, [fb.lo[2 * i + 1] for i in relus],
                                  [fb.hi[2 * i + 1] for i in relus]), steps=10)


def _random_splits(rng: np.random.Generator, cb: ChainBounds, domains: int,
                   share: float) -> list[torch.Tensor]:
    out = []
    for i in range(len(cb.lo)):
        chosen = (rng.random((domains, cb.lo[i].numel())) < share) & cb.unstable(i).numpy()
        out.append(torch.from_numpy(np.where(chosen, rng.choice([-1, 1], chosen.shape), 0).astype(np.int8)))
    return out


def _never_looser(refined: ChainBounds, cb: ChainBounds) -> None:
    for i in range(len(cb.lo)):
        lo, hi = refined.interval(i)
        assert torch.all(lo >= cb.lo[i]) and torch.all(hi <= cb.hi[i])


@pytest.mark.parametrize("seed", [0, pytest.param(1, marks=pytest.mark.slow)])
def test_refined_intervals_hold_the_exact_range(seed):
    rng = np.random.default_rng(seed)
    net = mlp(rng, [2, 3, 3, 3, 2])
    x0 = rng.uniform(-1, 1, 2)
    lo, hi = x0 - 0.8, x0 + 0.8
    cb = _chain_bounds(net, lo, hi)
    splits = _random_splits(rng, cb, 4, 0.5)
    refined = refine(cb, splits, torch.zeros(4, dtype=torch.long))
    _never_looser(refined, cb)
    for k in range(1, len(cb.lo)):
        below = FlatNetwork(net.layers[: 2 * k + 2], net.input_shape)  # up to ReLU layer k's input
        r_lo, r_hi = refined.interval(k)
        for d in range(4):
            for j in range(cb.lo[k].numel()):
                c = np.zeros(cb.lo[k].numel())
                c[j] = 1.0
                parts = [s[d].numpy() for s in splits[:k]]
                low, high = exact_minimum(below, lo, hi, c, parts), -exact_minimum(below, lo, hi, -c, parts)
                if np.isinf(low):  # an empty subdomain
                    continue
                assert float(r_lo[d, j]) <= low + 1e-7 and high - 1e-7 <= float(r_hi[d, j]), (k, d, j)


def test_refined_intervals_hold_on_samples_and_shrink():
    rng = np.random.default_rng(11)
    net = mlp(rng, [6, 20, 20, 20, 4])
    x0 = rng.uniform(-1, 1, 6)
    lo, hi = x0 - 0.3, x0 + 0.3
    cb = _chain_bounds(net, lo, hi)
    points = rng.uniform(lo, hi, size=(20000, 6))
    pre = [v for v in net.forward(points)[1:-1:2]]  # each ReLU layer's input, float64
    # each domain fixes some unstable neurons to a sampled point's activation (not empty)
    owners = rng.choice(points.shape[0], 8, replace=False)
    splits = []
    for i, z in enumerate(pre):
        chosen = (rng.random((8, z.shape[1])) < 0.3) & cb.unstable(i).numpy()
        splits.append(torch.from_numpy(np.where(chosen, np.where(z[owners] > 0, 1, -1), 0).astype(np.int8)))
    refined = refine(cb, splits, torch.zeros(8, dtype=torch.long))
    _never_looser(refined, cb)
    shrunk = 0.0
    for d in range(8):
        inside = np.ones(points.shape[0], dtype=bool)
        for i, z in enumerate(pre):
            s = splits[i][d].numpy()
            inside &= np.all(np.where(s > 0, z >= 0, True) & np.where(s < 0, z <= 0, True), axis=1)
        assert inside[owners[d]]
        for i, z in enumerate(pre):
            r_lo, r_hi = (t[d].numpy() for t in refined.interval(i))
            assert np.all(z[inside] >= r_lo - 1e-9) and np.all(z[inside] <= r_hi + 1e-9)
            shrunk += float((cb.hi[i] - cb.lo[i]).sum() - (r_hi - r_lo).sum())
    assert shrunk > 0


def test_a_selection_bounds_as_the_intervals_rebuilt():
    """``select``'s indexed fields give the bounds of a batch built from the selected
    intervals afresh."""
    rng = np.random.default_rng(3)
    net = mlp(rng, [4, 8, 8, 8, 3])
    x0 = rng.uniform(-1, 1, 4)
    cb = _chain_bounds(net, x0 - 0.5, x0 + 0.5)
    splits = _random_splits(rng, cb, 5, 0.3)
    refined = refine(cb, splits, torch.zeros(5, dtype=torch.long))
    part = torch.tensor([4, 1, 1])
    fresh = cb.per_domain([refined.interval(i)[0][part] for i in range(3)],
                          [refined.interval(i)[1][part] for i in range(3)])
    C = torch.from_numpy(rng.normal(size=(2, 3)))
    alphas = [torch.from_numpy(rng.random((3, 2, 8))) for _ in range(3)]
    parts = [s[part] for s in splits]
    picked, _ = refined.select(part).lower(3, C, torch.zeros(2), alphas, None, parts)
    built, _ = fresh.lower(3, C, torch.zeros(2), alphas, None, parts)
    assert torch.equal(picked, built)
    single = [a.to(torch.float32) for a in alphas]  # estimate's precision, as the optimiser's
    assert torch.equal(refined.select(part).estimate(3, C, torch.zeros(2), single, None, parts),
                       fresh.estimate(3, C, torch.zeros(2), single, None, parts))
