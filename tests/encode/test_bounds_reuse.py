"""Bounds reused over another box (propagate(..., reuse=...), smug_opt.bounds.cone): the
neurons that changed inputs do not reach keep their values when those inputs move, and the
intervals found from earlier bounds, over a chain of boxes that each move a few inputs,
equal those found from scratch and hold on samples, on a net with every layer kind and on
a max-pool CNN's ReLU rewrite (sparse rows, settled layers, prior intervals)."""

from __future__ import annotations

import numpy as np
import pytest
from flat_nets import every_kind, pool_cnn

from smug_opt.bounds import Box, propagate
from smug_opt.bounds.cone import reached
from smug_opt.bounds.pool_relus import pools_as_relus


def _boxes(rng: np.random.Generator, x: np.ndarray, count: int) -> list[Box]:
    """Boxes around ``x``: each frees or fixes 1-3 inputs more than the one before."""
    free = rng.random(x.size) < 0.5
    boxes = []
    for _ in range(count):
        flip = rng.choice(x.size, size=int(rng.integers(1, 4)), replace=False)
        free[flip] = ~free[flip]
        boxes.append(Box(np.where(free, x - 0.4, x), np.where(free, x + 0.4, x)))
    return boxes


@pytest.mark.parametrize("seed", range(3))
def test_inputs_reach_exactly_the_neurons_that_move_with_them(seed):
    rng = np.random.default_rng(seed)
    net = every_kind(rng)
    changed = np.zeros(50, dtype=bool)
    changed[rng.choice(50, size=2, replace=False)] = True
    masks = reached(net, changed)
    x = rng.uniform(-1, 1, (400, 50))
    moved = x.copy()
    moved[:, changed] = rng.uniform(-1, 1, (400, int(changed.sum())))
    before, after = net.forward(x), net.forward(moved)
    for k, mask in enumerate(masks):
        assert np.array_equal(before[k][:, ~mask], after[k][:, ~mask])  # unreached: untouched
        assert np.all(np.any(before[k][:, mask] != after[k][:, mask], axis=0)), k  # reached: each moves
    assert 0 < masks[1].sum() < masks[1].size


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("kind", ["every kind", "pool rewrite"])
def test_bounds_from_earlier_ones_equal_bounds_from_scratch(seed, kind):
    rng = np.random.default_rng(seed)
    if kind == "every kind":
        net, options, x = every_kind(rng), {}, rng.uniform(-1, 1, 50)
    else:
        rewrite = pools_as_relus(pool_cnn(rng, dense=4))
        assert rewrite is not None
        net, x = rewrite.net, rng.uniform(0, 1, 25)
        options = {"sparse_rows": True, "settled": frozenset(rewrite.same)}
    earlier, kept = None, 0
    for box in _boxes(rng, x, 12):
        fresh = propagate(net, box, method="crown", **options)
        found = propagate(net, box, method="crown", reuse=earlier, **options)
        for k in range(len(net.layers)):
            np.testing.assert_allclose(found.lo[k], fresh.lo[k], rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(found.hi[k], fresh.hi[k], rtol=1e-12, atol=1e-12)
        if earlier is not None:
            changed = (earlier.domain.lo != box.lo) | (earlier.domain.hi != box.hi)
            kept += int((~reached(net, changed)[1]).sum())
        points = box.lo + (box.hi - box.lo) * rng.random((2000, box.size))
        for k, values in enumerate(net.forward(points)):
            assert np.all(found.lo[k] <= values) and np.all(values <= found.hi[k]), k
        earlier = found
    assert kept  # some neurons were taken over


def test_bounds_are_reused_only_from_the_same_network_over_a_box():
    rng = np.random.default_rng(0)
    net, other = every_kind(rng), every_kind(rng)
    box = Box(np.zeros(50), np.ones(50))
    with pytest.raises(ValueError, match="same network"):
        propagate(net, box, reuse=propagate(other, box))
    with pytest.raises(ValueError, match="inputs marked"):
        reached(net, np.zeros(3, dtype=bool))
