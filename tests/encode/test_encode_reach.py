"""Inputs that reach no output (:func:`smug_opt.encode.masked.output_reach`): found by the
network's stored weights, pooling windows and elementwise layers; whatever they hold, no
score changes; the whole-network encoder gives their cells no binary, and its
optimum is still the brute-force minimum over every cell."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from flat_nets import every_kind, linear

import smug_opt
from smug_opt.encode import full_network
from smug_opt.encode.full_network import solution_mask
from smug_opt.encode.masked import output_reach
from smug_opt.network.flat import FlatLayer, FlatNetwork


def _forward_dependence(net: FlatNetwork) -> np.ndarray:
    """Which inputs each output depends on structurally, propagated forward (dense boolean
    products): the independent reading :func:`output_reach` is checked against."""
    dep = [np.eye(net.num_inputs, dtype=bool)]
    for layer in net.layers[1:]:
        src = dep[layer.inputs[0]].astype(np.int64)
        if layer.kind == "linear":
            d = (np.abs(layer.affine[0].toarray()) > 0).astype(np.int64) @ src > 0
        elif layer.kind == "maxpool":
            padded = np.vstack([src, np.zeros((1, src.shape[1]), dtype=np.int64)])  # -1: padding
            d = padded[layer.pool_windows].any(axis=1)
        elif layer.kind == "add":
            d = (src > 0) | dep[layer.inputs[1]]
        else:
            d = src > 0
        dep.append(d)
    return dep[-1].any(axis=0)


def _cut(seed: int) -> FlatNetwork:
    """:func:`every_kind` with some weights removed: its convolution reads neither the last
    input row of channel 1 nor column 0 of channel 0, and the layer after the pooling reads
    only each channel's last window (so no path leaves the convolution's top-left corner)."""
    net = every_kind(np.random.default_rng(seed))
    layers = list(net.layers)
    conv = layers[1].affine[0].toarray()
    conv[:, 25 + 20:50] = 0.0
    conv[:, 0:25:5] = 0.0
    layers[1] = linear(0, conv, layers[1].affine[1])
    after = layers[4].affine[0].toarray()
    after[:, [0, 1, 2, 4, 5, 6, 8, 9, 10]] = 0.0
    layers[4] = linear(3, after, layers[4].affine[1])
    return FlatNetwork(tuple(layers), net.input_shape)


@pytest.mark.parametrize("seed", range(4))
def test_reach_is_the_forward_dependence_and_unreached_inputs_change_nothing(seed: int) -> None:
    net = _cut(seed)
    reach = output_reach(net)
    assert np.array_equal(reach, _forward_dependence(net))
    assert 0 < reach.sum() < net.num_inputs - 10  # the cut removed more than the row and column
    rng = np.random.default_rng(seed)
    x = rng.normal(size=net.num_inputs)
    y = x.copy()
    y[~reach] = rng.normal(size=int((~reach).sum())) * 100
    assert np.array_equal(net.forward(x[None])[-1], net.forward(y[None])[-1])  # exactly


def _strided(rng: np.random.Generator) -> FlatNetwork:
    """(1, 5, 5) → a 2×2 convolution of stride 2 (3 maps of 2×2: it reads no input of the
    last row or column) → relu → linear 3 logits."""
    W = np.zeros((12, 25))
    for c, i, j in itertools.product(range(3), range(2), range(2)):
        kernel = rng.normal(size=(2, 2))
        for di, dj in itertools.product(range(2), range(2)):
            W[(c * 2 + i) * 2 + j, (2 * i + di) * 5 + 2 * j + dj] = kernel[di, dj]
    layers = [FlatLayer("input", (), 25), linear(0, W, rng.normal(size=12) * 0.3 - 0.2),
              FlatLayer("relu", (1,), 12), linear(2, rng.normal(size=(3, 12)), rng.normal(size=3))]
    return FlatNetwork(tuple(layers), (1, 5, 5))


def _minimum(net: FlatNetwork, x: np.ndarray, label: int) -> int | None:
    """The fewest of all 25 pixels a mask keeping the label has, up to 4 (float64, a clear
    margin asked of every mask: None on a near tie or past 4)."""
    for k in range(5):
        combos = list(itertools.combinations(range(25), k))
        cells = np.array(combos, dtype=np.int64).reshape(math.comb(25, k), k)
        masks = np.zeros((cells.shape[0], 25))
        np.put_along_axis(masks, cells, 1.0, axis=1)
        scores = net.forward(x * masks)[-1]
        margin = scores[:, label] - np.delete(scores, label, axis=1).max(axis=1)
        if np.abs(margin).min() < 1e-6:
            return None
        if (margin > 0).any():
            return k
    return None


@pytest.mark.parametrize("seed", range(6))
def test_cells_no_output_reads_get_no_binary_and_the_optimum_is_the_brute_force_one(seed: int) -> None:
    rng = np.random.default_rng(seed)
    net = _strided(rng)
    x = rng.uniform(0.2, 1.0, size=25)
    label = int(np.argmin(net.forward(x[None])[-1][0]))  # the lowest score: no empty mask
    best = _minimum(net, x, label)
    if best is None:
        pytest.skip("a near tie or an optimum past the brute force's reach")
    problem = full_network(net, x, label)
    assert problem.metadata["cells"] == [r * 5 + c for r in range(4) for c in range(4)]
    result = smug_opt.solve(problem, "highs", time_limit=30)
    assert result.status.name == "OPTIMAL" and result.objective == best
    mask = solution_mask(problem, result.x).reshape(-1)
    scores = net.forward((x * mask)[None])[-1][0]
    assert scores[label] > np.delete(scores, label).max()
