"""The whole-network encoder on small CNN graphs (conv, max/avg pooling, residual sums,
clip, leaky ReLU, a ReLU on the logits), lowered by :func:`smug_opt.network.lower.lower`,
against brute force over every mask."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import FIRST_PARTY

import smug_opt
from smug_opt.encode import full_network, solution_mask
from smug_opt.network.graph import (
    Add,
    AvgPool,
    Clip,
    Conv,
    Dense,
    Input,
    LeakyRelu,
    MaxPool,
    Network,
    Node,
    Relu,
    Reshape,
    Scale,
)
from smug_opt.network.lower import lower

SHAPE = (2, 3, 3)  # channels share a cell: 9 cells, 512 masks
USABLE = [i.name for i in smug_opt.backend_infos() if i.usable and i.name in FIRST_PARTY]


def _conv(rng: np.random.Generator, c_in: int, c_out: int, k: int, **kw) -> Conv:
    groups = kw.get("groups", 1)
    return Conv(rng.normal(size=(c_out, c_in // groups, k, k)), 0.3 * rng.normal(size=c_out), **kw)


def _dense(rng: np.random.Generator, n_in: int, n_out: int) -> Dense:
    return Dense(rng.normal(size=(n_out, n_in)), 0.3 * rng.normal(size=n_out))


def _network(arch: str, seed: int) -> Network:
    rng = np.random.default_rng(seed)
    nodes = [Node("x", Input(), (), SHAPE)]

    def add(op, inputs, shape) -> int:
        nodes.append(Node(f"n{len(nodes)}", op, tuple(inputs), shape))
        return len(nodes) - 1

    if arch == "maxpool":  # conv with padding and stride, max pool, dense, ReLU on the logits
        v = add(_conv(rng, 2, 3, 2, pads=(1, 1, 0, 0)), [0], (3, 3, 3))
        v = add(Relu(), [v], (3, 3, 3))
        v = add(MaxPool((2, 2), (1, 1)), [v], (3, 2, 2))
        v = add(Reshape(), [v], (12,))
        v = add(_dense(rng, 12, 3), [v], (3,))
        add(Relu(), [v], (3,))
    elif arch == "avgpool-groups-leaky":  # normalisation in front, grouped conv, avg pool
        v = add(Scale(np.full((2, 1, 1), 2.0), np.full((2, 1, 1), -0.5)), [0], SHAPE)
        v = add(_conv(rng, 2, 4, 2, groups=2, dilations=(1, 1)), [v], (4, 2, 2))
        v = add(LeakyRelu(0.1), [v], (4, 2, 2))
        v = add(AvgPool((2, 2), (1, 1)), [v], (4, 1, 1))
        v = add(Reshape(), [v], (4,))
        add(_dense(rng, 4, 3), [v], (3,))
    elif arch == "residual-clip":  # two convs and a skip connection, ReLU6
        a = add(_conv(rng, 2, 2, 3, pads=(1, 1, 1, 1)), [0], SHAPE)
        a = add(Relu(), [a], SHAPE)
        b = add(_conv(rng, 2, 2, 3, pads=(1, 1, 1, 1), dilations=(1, 1)), [a], SHAPE)
        v = add(Add(), [a, b], SHAPE)
        v = add(Clip(0.0, 1.5), [v], SHAPE)
        v = add(Reshape(), [v], (18,))
        v = add(_dense(rng, 18, 4), [v], (4,))
        v = add(Clip(-1.0, np.inf), [v], (4,))
        add(_dense(rng, 4, 3), [v], (3,))
    elif arch == "strided-maxpool-clip-low":  # stride-2 conv, overlapping pools, min(v, hi)
        v = add(_conv(rng, 2, 3, 2, strides=(1, 1)), [0], (3, 2, 2))
        v = add(Clip(-np.inf, 0.8), [v], (3, 2, 2))
        v = add(MaxPool((2, 2), (2, 2), pads=(0, 0, 1, 1)), [v], (3, 1, 1))
        v = add(Reshape(), [v], (3,))
        add(_dense(rng, 3, 3), [v], (3,))
    else:
        raise ValueError(arch)
    return Network(tuple(nodes), name=arch)


ARCHS = ("maxpool", "avgpool-groups-leaky", "residual-clip", "strided-maxpool-clip-low")


def _input(seed: int) -> np.ndarray:
    rng = np.random.default_rng(1000 + seed)
    x = rng.uniform(0.1, 1.0, size=SHAPE)
    x[:, 0, 0] = 0.0  # a cell with nothing in it: no binary
    return x


def _brute_force(arch: str, seed: int):
    """``(pre, flat, x, label, masks, slack)`` with masks over the 9 pixel cells."""
    pre, flat = lower(_network(arch, seed))
    x = _input(seed)
    xa = pre(x[None])[0]
    scores = flat.forward(xa[None])[-1][0]
    label = int(np.argmax(scores))
    masks = ((np.arange(512)[:, None] >> np.arange(9)) & 1).astype(np.float64)
    values = flat.forward(xa[None, :] * np.tile(masks, (1, 2)))[-1]
    slack = values[:, label] - np.delete(values, label, axis=1).max(axis=1)
    return pre, flat, x, label, masks, slack


def _instances() -> list[tuple[str, int]]:
    """Per architecture the first seeds with a nontrivial optimum and no near-tie."""
    out = []
    for arch in ARCHS:
        found = 0
        for seed in range(200):
            *_, masks, slack = _brute_force(arch, seed)
            if np.abs(slack).min() < 1e-6 or not (slack > 0).any():
                continue
            if masks[slack > 0].sum(axis=1).min() >= 2:
                out.append((arch, seed))
                found += 1
                if found == 2:
                    break
    return out


INSTANCES = _instances()


def _optimum(masks: np.ndarray, slack: np.ndarray) -> int:
    return int(masks[slack > 0].sum(axis=1).min())


def _mask_index(mask: np.ndarray) -> int:
    return int((mask.reshape(-1).astype(int) << np.arange(9)).sum())


def test_every_architecture_has_instances() -> None:
    assert {arch for arch, _ in INSTANCES} == set(ARCHS)


@pytest.mark.parametrize(("arch", "seed"), INSTANCES)
@pytest.mark.parametrize("backend", USABLE)
def test_every_backend_finds_the_brute_force_optimum(arch: str, seed: int, backend: str) -> None:
    """Every backend proves the brute-force optimum (z3 may run out of time; whatever it
    claims must agree), and its mask keeps the label in the network's forward pass."""
    pre, flat, x, label, masks, slack = _brute_force(arch, seed)
    problem = full_network(flat, x, label, preprocess=pre)
    result = smug_opt.solve(problem, backend, time_limit=15 if backend == "z3" else 60)
    if backend == "z3" and result.status is not smug_opt.Status.OPTIMAL:
        assert result.bound is None or result.bound <= _optimum(masks, slack)
        return
    assert result.status is smug_opt.Status.OPTIMAL, (backend, result)
    assert result.objective == _optimum(masks, slack)
    assert slack[_mask_index(solution_mask(problem, result.x))] > 0


@pytest.mark.parametrize(("arch", "seed"), INSTANCES)
def test_bound_methods_and_the_cardinality_row_keep_the_optimum(arch: str, seed: int) -> None:
    pre, flat, x, label, masks, slack = _brute_force(arch, seed)
    for bounds in ("none", "interval", "crown", "crown+lp"):
        for max_cells in (None, "greedy"):
            problem = full_network(flat, x, label, preprocess=pre, bounds=bounds, max_cells=max_cells)
            result = smug_opt.solve(problem, "highs", time_limit=60)
            assert result.status is smug_opt.Status.OPTIMAL, (bounds, max_cells)
            assert result.objective == _optimum(masks, slack), (bounds, max_cells)
            if max_cells == "greedy":
                assert problem.metadata["start"] is not None
                assert problem.metadata["greedy_cells"] >= _optimum(masks, slack)


@pytest.mark.parametrize(("arch", "seed"), INSTANCES)
def test_problem_accepts_exactly_the_feasible_masks(arch: str, seed: int) -> None:
    """With the cell binaries fixed, the problem is feasible exactly when the mask keeps
    the label (the max pools' and ReLUs' other variables follow), on a sample of masks
    on both sides. No cardinality row: every mask is allowed."""
    pre, flat, x, label, masks, slack = _brute_force(arch, seed)
    problem = full_network(flat, x, label, preprocess=pre, max_cells=None)
    cells = np.asarray(problem.metadata["cells"])
    rng = np.random.default_rng(seed)
    sample = np.concatenate([rng.choice(np.flatnonzero(slack > 0), 6),
                             rng.choice(np.flatnonzero(slack <= 0), 6)])
    for i in sample:
        fixed = problem.with_constraints(np.eye(problem.num_vars)[: cells.size], "==",
                                          masks[i, cells])
        result = smug_opt.solve(fixed, "highs", time_limit=30)
        feasible = result.status is smug_opt.Status.OPTIMAL
        assert feasible == bool(slack[i] > 0), (i, result.status)


def test_metadata_counts_neurons_and_pools() -> None:
    arch, seed = next(item for item in INSTANCES if item[0] == "maxpool")
    pre, flat, x, label, *_ = _brute_force(arch, seed)
    problem = full_network(flat, x, label, preprocess=pre, name="tiny")
    meta = problem.metadata
    assert meta["grid"] == [3, 3] and meta["channels"] == 2 and meta["model"] == "tiny"
    assert 0 not in meta["cells"]  # the empty pixel has no binary
    neurons = meta["neurons"]
    assert (neurons[0]["n"], neurons[-1]["n"]) == (27, 3)  # conv ReLUs, the ReLU on the logits
    assert all(".max" in v["flat_layer"] for v in neurons[1:-1])  # the max pools' chains
    assert meta["maxpools"][0]["n"] == 12
    assert meta["unstable"] + meta["stable"] == sum(v["n"] for v in neurons)


def test_flat_network_input_must_fit() -> None:
    pre, flat, _, label, *_ = _brute_force(*INSTANCES[0])
    with pytest.raises(ValueError, match="affine inputs"):
        full_network(flat, np.ones(5), label)
    with pytest.raises(ValueError, match="preprocess applies to a FlatNetwork"):
        full_network([(np.ones((2, 2)), np.zeros(2))], np.ones(2), preprocess=pre)


def test_a_network_is_lowered_with_its_preprocessing() -> None:
    """``full_network`` takes the readers' Network as it is (its input in its own layout):
    the same problem as its lowered form with the preprocessing applied."""
    arch, seed = next(i for i in INSTANCES if i[0] == "avgpool-groups-leaky")  # normalisation in front
    pre, flat, x, label, masks, slack = _brute_force(arch, seed)
    network = _network(arch, seed)
    direct = full_network(network, x)
    lowered = full_network(flat, x, preprocess=pre)
    assert (direct.A != lowered.A).nnz == 0 and np.array_equal(direct.rhs, lowered.rhs)
    assert direct.metadata["label"] == label
    result = smug_opt.solve(direct, backend="highs")
    assert result.objective == _optimum(masks, slack)
    with pytest.raises(ValueError, match="a Network carries its own"):
        full_network(network, x, preprocess=pre)
