"""Small masks evaluated from the empty mask's values
(:class:`smug_opt.encode.incremental.IncrementalMasks`), on chain networks of local layers
(each neuron reads a 2×2 window, as a CNN's convolutions do): the same scores as the
direct forward pass, the pass over small masks finding and proving the brute-force
optimum with it, and its error bound against exact rational arithmetic."""

from __future__ import annotations

import functools
import itertools
from fractions import Fraction

import numpy as np
import pytest
from flat_nets import exact_forward

from smug_opt.encode.flat_enumeration import smaller_masks
from smug_opt.encode.incremental import IncrementalMasks, incremental_pays, incremental_work
from smug_opt.encode.masked import MaskedNetwork, flat_mlp

SIDE = 10  # a 10×10 grid of one-channel cells
SIZES = 3  # masks of 0..2 cells


def _local(rng: np.random.Generator, side: int, channels: int) -> tuple[np.ndarray, np.ndarray]:
    """A 2×2, stride-1 convolution of a ``side``×``side`` single-channel grid into
    ``channels`` maps, as a dense ``(inputs, outputs)`` matrix and its bias."""
    out = side - 1
    W = np.zeros((side * side, channels * out * out))
    for c, i, j in itertools.product(range(channels), range(out), range(out)):
        kernel = rng.normal(size=(2, 2))
        for di, dj in itertools.product(range(2), range(2)):
            W[(i + di) * side + j + dj, (c * out + i) * out + j] = kernel[di, dj]
    return W, 0.3 * rng.normal(size=channels * out * out)


@functools.cache
def _case(seed: int) -> tuple[MaskedNetwork, np.ndarray, np.ndarray]:
    """A 100-81-64-3 chain network (two local layers, a dense head) on a random input, every
    mask of fewer than SIZES cells, and each one's float64 worst-row slack (direct pass)."""
    rng = np.random.default_rng(seed)
    W1, b1 = _local(rng, SIDE, 1)
    W2 = np.zeros((81, 64))
    for i, j in itertools.product(range(8), range(8)):  # 2×2 windows of the 9×9 map
        for di, dj in itertools.product(range(2), range(2)):
            W2[(i + di) * 9 + j + dj, i * 8 + j] = rng.normal()
    layers = [(W1, b1 - 0.5), (W2, 0.3 * rng.normal(size=64)), (rng.normal(size=(64, 3)), rng.normal(size=3))]
    net = flat_mlp(layers)
    xa = rng.uniform(0.1, 1.0, size=SIDE * SIDE)
    label = int(np.argmin(net.forward(xa[None])[-1][0]))  # the lowest score: the empty mask rarely keeps it
    network = MaskedNetwork.build(net, xa, np.arange(SIDE * SIDE), label, 0.0)
    n = network.num_cells
    subsets = [c for k in range(SIZES) for c in itertools.combinations(range(n), k)]
    masks = np.zeros((len(subsets), n))
    for row, subset in enumerate(subsets):
        masks[row, list(subset)] = 1.0
    return network, masks, network.slack(masks)


def _instances() -> list[int]:
    """Seeds whose smallest accepted mask has 1-2 cells, with no near-tie among the masks."""
    seeds = [s for s in range(40)
             if (slack := _case(s)[2])[0] < 0 and (slack > 0).any() and np.abs(slack).min() > 1e-6]
    return seeds[:3]


INSTANCES = _instances()


def test_the_networks_are_chains_whose_second_layer_is_computed_from_the_change() -> None:
    assert len(INSTANCES) == 3
    network = _case(INSTANCES[0])[0]
    assert incremental_pays(network) and IncrementalMasks(network).incremental == {3}
    assert incremental_work(network, 2) < network.mask_work  # sparse changes: less work a mask


@pytest.mark.parametrize("seed", INSTANCES)
def test_incremental_scores_are_the_direct_ones_and_track_every_magnitude(seed: int) -> None:
    network, masks, _ = _case(seed)
    evaluator = IncrementalMasks(network)
    largest = [np.zeros(layer.size) for layer in network.net.layers]
    for k in range(SIZES):
        rows = masks[masks.sum(axis=1) == k]
        cells = np.sort(np.argsort(-rows, axis=1, kind="stable")[:, :k], axis=1)
        direct = network.values(rows)
        np.testing.assert_allclose(evaluator.scores(cells, largest), direct[-1], rtol=0, atol=1e-12)
        for layer in range(1, len(direct)):
            assert np.all(largest[layer] >= np.abs(direct[layer]).max(axis=0) * (1 - 1e-12)), (k, layer)


@pytest.mark.parametrize("seed", INSTANCES)
def test_the_pass_finds_and_proves_the_brute_force_optimum_incrementally(seed: int) -> None:
    network, masks, slack = _case(seed)
    optimum = int(masks[slack > 0].sum(axis=1).min())
    search = smaller_masks(network, SIZES)
    assert search.found is not None and search.found.sum() == optimum
    assert network.slack(search.found[None, :])[0] > 0
    assert search.proven_minimum(SIZES, np.zeros(network.out_rhs.size)) == optimum


@pytest.mark.parametrize("seed", INSTANCES[:2])
def test_the_incremental_error_bound_holds_against_exact_arithmetic(seed: int) -> None:
    """The pass's row error bounds every evaluated mask's float64 slack (as the incremental
    evaluator computes it) against the exact slack of the network on the masked input."""
    network, masks, _ = _case(seed)
    search = smaller_masks(network, SIZES)
    evaluator = IncrementalMasks(network)
    rng = np.random.default_rng(seed)
    sizes = masks.sum(axis=1)
    for k in range(len(search.closest)):
        for i in rng.choice(np.flatnonzero(sizes == k), min(5, int((sizes == k).sum())), replace=False):
            cells = np.flatnonzero(masks[i])[None, :]
            scores = evaluator.scores(cells, [np.zeros(layer.size) for layer in network.net.layers])[0]
            exact = exact_forward(network.net, np.asarray(network.inputs @ masks[i]).reshape(-1))[-1]
            for r, (row, rhs) in enumerate(zip(network.out_rows, network.out_rhs, strict=True)):
                exact_row = sum((Fraction(float(d)) * s for d, s in zip(row, exact, strict=True)),
                                Fraction(0)) - Fraction(float(rhs))
                float_row = float(scores @ row - rhs)
                assert abs(Fraction(float_row) - exact_row) <= Fraction(float(search.row_error[r]))
    assert search.row_error.max() < 1e-9


def _cells(masks: np.ndarray) -> list[tuple[int, ...]]:
    return [tuple(np.flatnonzero(row).tolist()) for row in masks]


@pytest.mark.parametrize("seed", INSTANCES)
def test_the_pass_keeps_its_largest_size_s_best_masks_as_seeds(seed: int) -> None:
    """``best``: the SEEDS masks of the last size evaluated in full, by worst-row slack (the
    brute force's order, ties in enumeration order)."""
    from smug_opt.encode.flat_enumeration import SEEDS

    network, masks, slack = _case(seed)
    search = smaller_masks(network, 2)  # sizes 0 and 1 in full
    sizes = masks.sum(axis=1)
    last = len(search.closest) - 1
    of_size = np.flatnonzero(sizes == last)
    ranked = of_size[np.argsort(-slack[of_size], kind="stable")[:SEEDS]]
    assert search.best.shape == (min(SEEDS, int((sizes == last).sum())), last)
    assert [tuple(row) for row in search.best.tolist()] == _cells(masks[ranked])


@pytest.mark.parametrize("seed", INSTANCES)
def test_the_seeded_beam_grows_the_pass_s_best_masks_to_the_brute_force_optimum(seed: int) -> None:
    """A beam grown from the best single cells (evaluated incrementally) returns a mask the
    network accepts, never below the brute-force optimum, and here the optimum itself
    (every optimal mask of these networks holds one of the 64 best cells)."""
    from smug_opt.encode.flat_enumeration import mask_slack
    from smug_opt.encode.masks import beam_mask

    network, masks, slack = _case(seed)
    optimum = int(masks[slack > 0].sum(axis=1).min())
    search = smaller_masks(network, 1)  # the empty mask alone: seeds of size 0
    evaluate, work = mask_slack(network, search.evaluator)
    assert work(2) == incremental_work(network, 2)
    full = np.ones(network.num_cells)
    found = beam_mask(network, full, 64, seeds=search.best, slack=evaluate, levels=SIZES)
    assert found.sum() == optimum and network.slack(found[None, :])[0] > 0
    one_level = beam_mask(network, full, 64, seeds=search.best, slack=evaluate, levels=1)
    assert one_level.sum() == (1 if optimum == 1 else network.num_cells)  # nothing beyond its levels


def test_the_encoder_starts_from_the_seeded_beam_where_the_search_stops_short(monkeypatch) -> None:
    """Where the search may evaluate only the empty mask and greedy is poor (here: every
    cell), the encoder grows the beam from the empty mask: its start (exact-checked against
    the problem) is the brute-force optimum, and the empty mask stays ruled out (these
    MLPs' own enumeration may prove more)."""
    import sys

    from smug_opt.encode import flat_enumeration, full_network

    module = sys.modules["smug_opt.encode.full_network"]  # the package re-exports the function
    monkeypatch.setattr(flat_enumeration, "searched_sizes", lambda network: 1)
    monkeypatch.setattr(module, "searched_sizes", lambda network: 1)
    monkeypatch.setattr(module, "greedy_mask", lambda network: np.ones(network.num_cells))
    for seed in INSTANCES:
        network, masks, slack = _case(seed)
        optimum = int(masks[slack > 0].sum(axis=1).min())
        label = int(np.argmax(network.out_rows[0]))
        meta = full_network(network.net, network.xa, label, strengthen=False).metadata
        assert meta["greedy_cells"] == optimum and 1 <= meta["min_cells"] <= optimum, seed
