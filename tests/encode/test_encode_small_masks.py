"""The one pass over small masks (:func:`smug_opt.encode.flat_enumeration.smaller_masks`):
the smallest mask it finds and the minimum size it proves, against brute force over every
small mask of a network with every flat layer kind, its error bound against exact rational
arithmetic, and the encoder running it once."""

from __future__ import annotations

import functools
import itertools
from fractions import Fraction

import numpy as np
import pytest
from flat_nets import every_kind, exact_forward

from smug_opt.encode import full_network
from smug_opt.encode.flat_enumeration import smaller_masks
from smug_opt.encode.masked import MaskedNetwork

CELLS = 25  # every_kind reads (2, 5, 5): channels share a pixel cell
SIZES = 4  # masks of 0..3 cells: 2,626


@functools.cache
def _case(seed: int) -> tuple[MaskedNetwork, np.ndarray, np.ndarray]:
    """The masked network, every mask of fewer than SIZES cells, and each one's float64
    worst-row slack from the network's own forward pass."""
    rng = np.random.default_rng(seed)
    net = every_kind(rng)
    xa = rng.uniform(0.1, 1.0, size=net.num_inputs)
    xa[[0, 25]] = 0.0  # pixel 0 holds nothing: no binary
    cell_of = np.tile(np.arange(CELLS), 2)
    label = int(np.argmax(net.forward(xa[None])[-1][0]))
    network = MaskedNetwork.build(net, xa, cell_of, label, 0.0)
    n = network.num_cells
    subsets = [c for k in range(SIZES) for c in itertools.combinations(range(n), k)]
    masks = np.zeros((len(subsets), n))
    for row, subset in enumerate(subsets):
        masks[row, list(subset)] = 1.0
    affine = xa[None, :] * masks[:, np.searchsorted(network.cells, cell_of)]
    scores = net.forward(affine)[-1]
    slack = (scores @ network.out_rows.T - network.out_rhs).min(axis=1)
    return network, masks, slack


def _instances() -> list[int]:
    """Seeds whose smallest accepted mask has 1-3 cells, with no near-tie among the masks."""
    seeds: list[int] = []
    for seed in range(60):
        *_, slack = _case(seed)
        if not (slack > 0).any() or slack[0] > 0 or np.abs(slack).min() < 1e-6:
            continue
        seeds.append(seed)
        if len(seeds) == 6:
            break
    return seeds


INSTANCES = _instances()


def test_instances_have_optima_of_several_sizes() -> None:
    optima = {int(m[s > 0].sum(axis=1).min()) for m, s in (_case(seed)[1:] for seed in INSTANCES)}
    assert len(INSTANCES) == 6 and len(optima) >= 2 and max(optima) >= 2


@pytest.mark.parametrize("seed", INSTANCES)
def test_the_pass_finds_and_proves_the_brute_force_optimum(seed: int) -> None:
    """Its mask is accepted and of the fewest cells; the sizes below are ruled out; the proof
    stops at that size however large the allowed size; a large row deviation rules out
    nothing."""
    network, masks, slack = _case(seed)
    optimum = int(masks[slack > 0].sum(axis=1).min())
    search = smaller_masks(network, SIZES)
    assert search.found is not None and search.found.sum() == optimum
    assert network.slack(search.found[None, :])[0] > 0
    assert len(search.closest) == optimum  # the sizes below the optimum, each in full
    for k, value in enumerate(search.closest):
        assert value == pytest.approx(slack[masks.sum(axis=1) == k].max(), abs=1e-12)
    assert search.proven_minimum(SIZES, np.zeros(network.out_rhs.size)) == optimum
    assert search.proven_minimum(optimum - 1, np.zeros(network.out_rhs.size)) == optimum - 1
    assert search.proven_minimum(SIZES, np.full(network.out_rhs.size, 1e3)) == 0


@pytest.mark.parametrize("seed", INSTANCES[:2])
def test_budgets_prove_only_the_sizes_evaluated_in_full(seed: int) -> None:
    network, masks, slack = _case(seed)
    optimum = int(masks[slack > 0].sum(axis=1).min())
    capped = smaller_masks(network, SIZES, max_masks=1)  # only the empty mask fits
    assert capped.found is None and optimum >= 1
    assert capped.proven_minimum(SIZES, np.zeros(network.out_rhs.size)) == 1
    assert smaller_masks(network, SIZES, max_masks=0).proven_minimum(SIZES, np.zeros(1)) == 0


@pytest.mark.parametrize("seed", INSTANCES[:3])
def test_the_error_bound_holds_against_exact_arithmetic(seed: int) -> None:
    """Every mask's float64 slack lies within the pass's row error of the exact slack of the
    network on the masked input (rational arithmetic on the float weights)."""
    network, masks, _ = _case(seed)
    search = smaller_masks(network, SIZES)
    error = search.row_error
    rng = np.random.default_rng(seed)
    sizes = masks.sum(axis=1)
    chosen = [i for k in range(min(len(search.closest), SIZES))
              for i in rng.choice(np.flatnonzero(sizes == k), min(6, int((sizes == k).sum())), replace=False)]
    for i in chosen:
        affine = np.asarray(network.inputs @ masks[i]).reshape(-1)
        exact = exact_forward(network.net, affine)[-1]
        exact_rows = [sum((Fraction(float(d)) * s for d, s in zip(row, exact, strict=True)), Fraction(0))
                      - Fraction(float(rhs))
                      for row, rhs in zip(network.out_rows, network.out_rhs, strict=True)]
        float_rows = network.scores(masks[i][None, :])[0] @ network.out_rows.T - network.out_rhs
        for r, exact_row in enumerate(exact_rows):
            assert abs(Fraction(float(float_rows[r])) - exact_row) <= Fraction(float(error[r]))
    assert error.max() < 1e-9  # and it is a rounding bound, not a loose one


def test_the_encoder_evaluates_the_smaller_masks_once(monkeypatch) -> None:
    """full_network runs the pass once for both the start mask and the minimum size (which
    then takes it from the pass, not from a second enumeration), and proves the optimum."""
    import sys

    from smug_opt.encode import flat_enumeration, layer_bounds

    calls: list[int] = []

    def counted(*args, **kwargs):
        calls.append(args[1])
        return flat_enumeration.smaller_masks(*args, **kwargs)

    monkeypatch.setattr(sys.modules["smug_opt.encode.full_network"], "smaller_masks", counted)
    monkeypatch.setattr(layer_bounds, "smaller_masks", counted)
    for seed in INSTANCES:
        network, masks, slack = _case(seed)
        optimum = int(masks[slack > 0].sum(axis=1).min())
        calls.clear()
        label = int(np.argmax(network.out_rows[0]))
        problem = full_network(network.net, network.xa.reshape(2, 5, 5), label, strengthen=False)
        assert len(calls) == 1, seed
        meta = problem.metadata
        assert meta["greedy_cells"] == optimum, seed  # the pass's mask where greedy's is larger
        assert meta["min_cells"] == optimum and "ruled out" in meta["bounds_source"], seed


class _RushedClock:
    """A wall clock on which every reading is 10,000 s after the last one: a machine so
    loaded that any budget in seconds would run out at once."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1e4
        return self.now


def test_the_searches_decide_by_work_counts_not_by_the_clock(monkeypatch) -> None:
    """The proven minimum size, the start mask and its size are the same whatever the load
    (issue 17: a 45 s budget made min_cells depend on it): encoded once normally and once
    on a clock that leaps 10,000 s per reading, they agree, with the pass over the smaller
    masks deciding the start, and with the beam search deciding it."""
    import sys
    import time

    full_network_module = sys.modules["smug_opt.encode.full_network"]  # the package re-exports the function
    for beam in (False, True):
        with monkeypatch.context() as settings:
            if beam:  # as if the smaller masks were too many: the beam search finds the start
                settings.setattr(full_network_module, "searched_sizes", lambda network: 0)
                settings.setattr(full_network_module, "MIN_BEAM_WIDTH", 1)
            for seed in INSTANCES[:3]:
                network, _, _ = _case(seed)
                label = int(np.argmax(network.out_rows[0]))
                x = network.xa.reshape(2, 5, 5)
                normal = full_network(network.net, x, label, strengthen=False).metadata
                with monkeypatch.context() as rushed:
                    rushed.setattr(time, "monotonic", _RushedClock())
                    rushed.setattr(time, "perf_counter", _RushedClock())
                    loaded = full_network(network.net, x, label, strengthen=False).metadata
                assert normal["min_cells"] >= 1 and "ruled out" in normal["bounds_source"], seed
                for key in ("min_cells", "greedy_cells", "start", "max_cells", "bounds_source"):
                    assert loaded[key] == normal[key], (beam, seed, key)
