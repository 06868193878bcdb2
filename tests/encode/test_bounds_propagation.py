"""Bound propagation (smug_opt.bounds): sound against sampling, exact enumeration and
rational arithmetic, never looser than interval arithmetic, exact where it should be."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
import scipy.sparse as sp
from flat_nets import every_kind, exact_forward, linear, mlp

from smug_opt.bounds import Box, Masks, cell_domain, on_cells, propagate
from smug_opt.bounds.relaxation import elementwise
from smug_opt.network.flat import FlatLayer, FlatNetwork


def _inside(bounds, values: list[np.ndarray], slack: float = 0.0) -> None:
    for k, v in enumerate(values):
        assert np.all(v >= bounds.lo[k] - slack), f"layer {k} below its lower bound"
        assert np.all(v <= bounds.hi[k] + slack), f"layer {k} above its upper bound"


def _no_looser(tight, loose) -> None:
    for k in range(len(tight.lo)):
        assert np.all(tight.lo[k] >= loose.lo[k]) and np.all(tight.hi[k] <= loose.hi[k]), k


def _random_masks(rng, domain: Masks, n: int) -> np.ndarray:
    masks = rng.random((n, domain.num_cells)) < rng.uniform(0.05, 0.95, size=(n, 1))
    if domain.max_cells is not None:
        for row in masks:
            kept = np.flatnonzero(row)
            if kept.size > domain.max_cells:
                row[rng.choice(kept, kept.size - domain.max_cells, replace=False)] = False
    return masks[:, domain.cell_of] * domain.values


@pytest.mark.parametrize("seed", range(3))
def test_mlp_bounds_hold_on_samples_and_beat_intervals(seed):
    rng = np.random.default_rng(seed)
    net = mlp(rng, [30, 20, 20, 20, 5])
    x = rng.uniform(0, 1, 30)
    cells = rng.integers(0, 12, 30)
    for domain in (Box(np.clip(x - 0.1, 0, 1), np.clip(x + 0.1, 0, 1)), Masks(x, cells),
                   Masks(x, cells, max_cells=4)):
        crown, interval = propagate(net, domain), propagate(net, domain, method="interval")
        _no_looser(crown, interval)
        if isinstance(domain, Box):
            samples = rng.uniform(domain.lo, domain.hi, size=(3000, 30))
        else:
            samples = _random_masks(rng, domain, 3000)
        _inside(crown, net.forward(samples))
        assert sum(crown.unstable().values()) <= sum(interval.unstable().values())
    widths = [np.mean(b.hi[-1] - b.lo[-1]) for b in (crown, interval)]
    assert widths[0] < 0.5 * widths[1]  # back-substitution is much tighter on a deep net


@pytest.mark.parametrize("seed", range(3))
def test_every_layer_kind_is_sound_and_never_looser(seed):
    rng = np.random.default_rng(seed)
    net = every_kind(rng)
    x = rng.normal(size=50)
    box = Box(x - 0.3, x + 0.3)
    crown, interval = propagate(net, box), propagate(net, box, method="interval")
    _no_looser(crown, interval)
    corners = rng.choice([-0.3, 0.3], size=(500, 50)) + x  # extreme points too
    _inside(crown, net.forward(np.vstack([rng.uniform(box.lo, box.hi, (3000, 50)), corners])))
    assert np.sum(crown.hi[-1] - crown.lo[-1]) < np.sum(interval.hi[-1] - interval.lo[-1])
    masks = Masks(x, np.arange(50) % 25, max_cells=6)  # channels share their pixel's cell
    _inside(propagate(net, masks), net.forward(_random_masks(rng, masks, 3000)))


def test_exact_enumeration_on_a_tiny_net():
    """Every mask of 10 cells: the bounds contain every activation; the first layer's are the
    exact extremes (a linear function of the cells is bounded exactly), with any K."""
    rng = np.random.default_rng(5)
    net = mlp(rng, [10, 6, 6, 3])
    x = rng.normal(size=10)
    every = np.array(list(itertools.product([0, 1], repeat=10)), dtype=float)
    values = net.forward(every * x)
    for k in (None, 0, 1, 3, 10):
        domain = Masks(x, np.arange(10), max_cells=k)
        allowed = every.sum(axis=1) <= (10 if k is None else k)
        bounds = propagate(net, domain)
        _inside(bounds, [v[allowed] for v in values])
        exact_lo, exact_hi = values[1][allowed].min(axis=0), values[1][allowed].max(axis=0)
        assert np.allclose(bounds.lo[1], exact_lo, rtol=0, atol=1e-12)
        assert np.allclose(bounds.hi[1], exact_hi, rtol=0, atol=1e-12)


def test_cardinality_concretisation_matches_brute_force_with_shared_cells():
    rng = np.random.default_rng(9)
    x = rng.normal(size=12)
    cell_of = np.array([0, 0, 1, 2, 2, 2, 3, 4, 4, 5, 6, 6])
    rows = rng.normal(size=(8, 12))
    net = FlatNetwork((FlatLayer("input", (), 12), linear(0, rows, np.zeros(8))), (12,))
    every = np.array(list(itertools.product([0, 1], repeat=7)), dtype=float)
    outputs = (every[:, cell_of] * x) @ rows.T
    for k in range(8):
        bounds = propagate(net, Masks(x, cell_of, max_cells=k))
        allowed = every.sum(axis=1) <= k
        assert np.allclose(bounds.lo[1], outputs[allowed].min(axis=0), rtol=0, atol=1e-12)
        assert np.allclose(bounds.hi[1], outputs[allowed].max(axis=0), rtol=0, atol=1e-12)
        assert np.all(bounds.lo[1] <= outputs[allowed].min(axis=0))
        assert np.all(bounds.hi[1] >= outputs[allowed].max(axis=0))


def test_masks_from_a_cell_matrix():
    rng = np.random.default_rng(4)
    x = rng.normal(size=12)
    x[[3, 7]] = 0.0
    cell_of = np.array([0, 0, 1, 2, 2, 2, 3, 4, 4, 5, 6, 6])
    nonzero = np.flatnonzero(x)
    inputs = sp.csr_matrix((x[nonzero], (nonzero, cell_of[nonzero])), shape=(12, 7))
    masks = Masks.from_matrix(inputs, max_cells=3)
    lam = rng.normal(size=(4, masks.support.size))
    assert np.array_equal(masks.minimum(lam)[0], Masks(x, cell_of, max_cells=3).minimum(lam)[0])
    with pytest.raises(ValueError, match="more than one cell"):
        Masks.from_matrix(sp.csr_matrix(np.ones((2, 2))))


def test_bounds_on_cells_hold_for_the_problem_s_own_coefficients():
    """On the cells, the first layer's coefficients are the float products ``W @ inputs``;
    bounds there contain its values in exact arithmetic, and every layer's on sampled masks."""
    rng = np.random.default_rng(6)
    net = every_kind(rng)
    x = rng.normal(size=50)
    cell_of = np.arange(50) % 25
    inputs = sp.csr_matrix((x, (np.arange(50), cell_of)), shape=(50, 25))
    cells = on_cells(net, inputs)
    bounds = propagate(cells, cell_domain(25, max_cells=7))
    masks = (rng.random((2000, 25)) < 0.25).astype(float)
    masks[masks.sum(axis=1) > 7] = 0.0
    values = cells.forward(masks)
    _inside(bounds, values)
    assert np.allclose(values[-1], net.forward(masks @ inputs.T.toarray())[-1], rtol=1e-12, atol=1e-12)
    for mask in masks[:5]:
        exact = exact_forward(cells, mask)
        for j, value in enumerate(exact[1]):
            assert Fraction(bounds.lo[1][j]) <= value <= Fraction(bounds.hi[1][j])
    with pytest.raises(ValueError, match="only linear layers"):
        on_cells(FlatNetwork((FlatLayer("input", (), 50), FlatLayer("relu", (0,), 50)), (50,)), inputs)


def test_output_specification_rows():
    rng = np.random.default_rng(3)
    net = every_kind(rng)
    x = rng.normal(size=50)
    bounds = propagate(net, Box(x - 0.2, x + 0.2))
    rows = np.array([[1.0, -1.0, 0.0], [1.0, 0.0, -1.0]])
    lo, hi = bounds.linear(rows, np.array([0.5, -0.5]))
    samples = net.forward(rng.uniform(x - 0.2, x + 0.2, (3000, 50)))[-1] @ rows.T + [0.5, -0.5]
    assert np.all(samples >= lo) and np.all(samples <= hi)
    naive_lo = bounds.lo[-1][0] - bounds.hi[-1][1:] + [0.5, -0.5]
    assert np.all(lo >= naive_lo - 1e-12)  # never looser than the logits' intervals
    with pytest.raises(ValueError, match="3 outputs"):
        bounds.linear(np.ones((1, 4)))


@pytest.mark.parametrize("scale", [1e-300, 1e-150, 1.0, 1e150, 1e290])
def test_rigorous_against_exact_arithmetic_with_extreme_weights(scale):
    """A point box (every neuron stable, so float errors are all that separates the bounds
    from the exact value) on weights that cancel: bounds contain the rational activations."""
    rng = np.random.default_rng(11)
    W1 = np.array([[1e16, 1.0, -1e16, 3.0], [0.1, 0.2, 0.3, -0.6], [1.0, -1e-16, 1e-16, -1.0]]) * scale
    W2 = np.array([[1.0, 1.0, 1.0], [1e16, -1e16, 1.0]])
    layers = (FlatLayer("input", (), 4), linear(0, W1, np.zeros(3)), FlatLayer("relu", (1,), 3),
              linear(2, W2, np.array([0.0, 0.1])), FlatLayer("leaky_relu", (3,), 2, alpha=0.1))
    net = FlatNetwork(layers, (4,))
    for x in [np.ones(4), rng.normal(size=4), np.array([1.0, 1.0, 1.0, 0.0])]:
        exact = exact_forward(net, x)
        for method in ("interval", "crown"):
            bounds = propagate(net, Box(x, x), method=method)
            for k, layer_values in enumerate(exact):
                for j, value in enumerate(layer_values):
                    lo, hi = bounds.lo[k][j], bounds.hi[k][j]
                    assert lo == -np.inf or Fraction(lo) <= value, (method, k, j)
                    assert hi == np.inf or value <= Fraction(hi), (method, k, j)


@pytest.mark.parametrize("kind, params", [("relu", {}), ("leaky_relu", {"alpha": 0.1}),
                                          ("leaky_relu", {"alpha": 3.0}),
                                          ("clip", {"lo": -0.5, "hi": 2.0})])
def test_relaxations_hold_exactly(kind, params):
    """``a_lo·v + b_lo <= f(v) <= a_hi·v + b_hi`` in rational arithmetic over the interval."""
    rng = np.random.default_rng(2)
    low = rng.normal(size=400) * 3
    high = low + rng.exponential(size=400) * 3
    low[:5], high[:5] = [-1e-300, -2.0, -0.5, 2.0, -1e300], [1e-300, 3.0, 2.0, 2.0, 1e300]
    layer = FlatLayer(kind, (0,), 400, **params)
    rel = elementwise(layer, low, high)
    f = {"relu": lambda v: max(v, Fraction(0)),
         "leaky_relu": lambda v: v if v >= 0 else Fraction(params.get("alpha", 0.0)) * v,
         "clip": lambda v: min(max(v, Fraction(params.get("lo", 0))), Fraction(params.get("hi", 0)))}[kind]
    for j in range(400):
        points = {Fraction(low[j]), Fraction(high[j]), (Fraction(low[j]) + Fraction(high[j])) / 2}
        points |= {Fraction(p) for p in (0.0, params.get("lo", 0.0), params.get("hi", 0.0))
                   if low[j] <= p <= high[j]}
        for v in points:
            assert Fraction(rel.a_lo[j]) * v + Fraction(rel.b_lo[j]) <= f(v) <= \
                Fraction(rel.a_hi[j]) * v + Fraction(rel.b_hi[j]), (j, low[j], high[j], v)


def test_bad_input_gets_one_clear_error():
    net = mlp(np.random.default_rng(0), [4, 3, 2])
    with pytest.raises(ValueError, match="3 inputs but the network takes 4"):
        propagate(net, Box(np.zeros(3), np.ones(3)))
    with pytest.raises(ValueError, match="method must be one of"):
        propagate(net, Box(np.zeros(4), np.ones(4)), method="lp")
    with pytest.raises(ValueError, match="lo > hi"):
        Box(np.ones(4), np.zeros(4))
    with pytest.raises(ValueError, match="max_cells"):
        Masks(np.ones(4), np.arange(4), max_cells=-1)
