"""The SMUG first-layer encoding agrees with the layer it encodes."""

import numpy as np
import pytest

from smug_opt import verify
from smug_opt.encode.first_layer import encode_first_layer
from smug_opt.models.base import AffineLayer, conv_output_size, resolve_padding
from smug_opt.models.grid import cell_grid


def _conv2d(rng, h, w, c, f, k, stride, padding, dilation=(1, 1)):
    pads = tuple(resolve_padding(padding, n, kk, s, d)
                 for n, kk, s, d in zip((h, w), k, stride, dilation, strict=True))
    out = tuple(conv_output_size(n, kk, s, d, sum(p))
                for n, kk, s, d, p in zip((h, w), k, stride, dilation, pads, strict=True))
    return AffineLayer("conv2d", rng.normal(size=(*k, c, f)), rng.normal(size=f), stride,
                       dilation, pads, (h, w, c), (*out, f))


def _masked_input(layer, x, grid, cell_mask):
    per_point = cell_mask[grid.cell_of]
    return (x.reshape(per_point.size, -1) * per_point[:, None]).reshape(x.shape)


@pytest.mark.parametrize("cell", [1, 2, 3, 4])
@pytest.mark.parametrize(("k", "stride", "padding"), [((3, 3), (1, 1), "same"),
                                                      ((5, 3), (2, 1), "valid"),
                                                      ((7, 7), (2, 2), "same")])
def test_rows_equal_masked_preactivations(cell, k, stride, padding):
    rng = np.random.default_rng(0)
    layer = _conv2d(rng, 13, 10, 3, 4, k, stride, padding)
    x = rng.normal(size=layer.input_shape)
    neurons = rng.choice(layer.num_neurons, size=25, replace=False)
    enc = encode_first_layer(layer, x, neurons, gamma=0.3, cell=cell)
    assert enc.grid.shape == (-(-13 // cell), -(-10 // cell))
    for _ in range(5):
        m = (rng.random(enc.grid.num_cells) < 0.5).astype(float)
        o_masked = layer.preactivation(_masked_input(layer, x, enc.grid, m)).reshape(-1)[neurons]
        rows = enc.problem.A @ m + layer.bias[neurons % layer.filters]
        np.testing.assert_allclose(rows, o_masked, rtol=1e-9, atol=1e-9)
    np.testing.assert_array_equal(enc.problem.rhs, 0.3 * enc.preactivations
                                  - layer.bias[neurons % layer.filters])


@pytest.mark.parametrize(("k", "stride", "padding"), [((3, 3), (2, 2), "same"), ((5, 3), (2, 1), "valid")])
def test_masked_values_become_the_baselines(k, stride, padding):
    """With a baseline x̄ every row is the pre-activation of x̄ + M·(x − x̄), padding staying 0."""
    rng = np.random.default_rng(3)
    layer = _conv2d(rng, 13, 10, 3, 4, k, stride, padding)
    x, x_bar = rng.normal(size=layer.input_shape), rng.normal(size=layer.input_shape)
    neurons = rng.choice(layer.num_neurons, size=30, replace=False)
    enc = encode_first_layer(layer, x, neurons, gamma=0.4, cell=2, baseline=x_bar)
    constant = layer.preactivation(x_bar).reshape(-1)[neurons]
    for _ in range(5):
        m = (rng.random(enc.grid.num_cells) < 0.5).astype(float)
        masked = x_bar + _masked_input(layer, x - x_bar, enc.grid, m)
        o_masked = layer.preactivation(masked).reshape(-1)[neurons]
        np.testing.assert_allclose(enc.problem.A @ m + constant, o_masked, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(enc.preactivations, layer.preactivation(x).reshape(-1)[neurons], rtol=1e-12)
    np.testing.assert_allclose(enc.problem.rhs, 0.4 * enc.preactivations - constant, rtol=1e-12, atol=1e-12)
    assert enc.empty_mask_rows == int(np.count_nonzero(constant > 0.4 * enc.preactivations))
    with pytest.raises(ValueError, match="baseline must have the affine input's shape"):
        encode_first_layer(layer, x, neurons, baseline=x_bar[:-1])


def test_empty_mask_rows_counts_the_rows_the_empty_mask_satisfies():
    layer = AffineLayer("dense", np.array([[1.0, -1.0], [1.0, 1.0]]), np.array([2.0, -0.5]), (), (), (),
                        (2,), (2,))
    # o = (x0 + x1 + 2, -x0 + x1 - 0.5) at x = (1, 1): (4, -0.5); at γ = 0.25, rows 0 > 1 - 2 and
    # 0 > -0.125 + 0.5 (false): one row holds at the empty mask
    enc = encode_first_layer(layer, np.ones(2), np.array([0, 1]), gamma=0.25, cell=1)
    assert enc.empty_mask_rows == 1


def test_every_cell_counts_once_edge_cells_too():
    rng = np.random.default_rng(1)
    layer = _conv2d(rng, 10, 10, 1, 2, (3, 3), (1, 1), "same")
    enc = encode_first_layer(layer, rng.normal(size=(10, 10, 1)), np.arange(10), cell=4)
    assert enc.grid.shape == (3, 3)  # 4 + 4 + 2 pixels per axis
    assert enc.problem.objective.tolist() == [1.0] * 9


def test_dense_layer_with_image_grid_and_channels():
    rng = np.random.default_rng(2)
    layer = AffineLayer("dense", rng.normal(size=(4 * 6 * 2, 5)), rng.normal(size=5), (), (), (),
                        (48,), (5,))
    grid = cell_grid(layer, 2, grid_shape=(4, 6, 2))
    assert grid.shape == (2, 3) and grid.spatial_shape == (4, 6, 2)
    # both channels of pixel (0, 0) share cell 0; pixel (3, 5) is in the last cell
    assert grid.cell_of[0] == grid.cell_of[1] == 0 and grid.cell_of[-1] == 5
    x = rng.normal(size=48)
    enc = encode_first_layer(layer, x, np.arange(5), cell=2, grid_shape=(4, 6, 2))
    m = np.array([1, 0, 1, 1, 0, 1], dtype=float)
    np.testing.assert_allclose(enc.problem.A @ m + layer.bias,
                               layer.preactivation(x * m[grid.cell_of]), rtol=1e-12, atol=1e-12)


def test_receptive_field_marks_exactly_the_read_cells():
    rng = np.random.default_rng(3)
    layer = _conv2d(rng, 8, 8, 1, 1, (3, 3), (1, 1), "valid")
    enc = encode_first_layer(layer, rng.normal(size=(8, 8, 1)), np.array([0]), cell=2)
    # output (0, 0) reads pixels rows 0..2, cols 0..2 → cells (0,0), (0,1), (1,0), (1,1)
    assert sorted(enc.receptive.indices.tolist()) == [0, 1, 4, 5]


def test_bad_arguments():
    rng = np.random.default_rng(4)
    layer = _conv2d(rng, 6, 6, 1, 2, (3, 3), (1, 1), "same")
    x = rng.normal(size=(6, 6, 1))
    with pytest.raises(ValueError, match="no neurons"):
        encode_first_layer(layer, x, np.array([], dtype=int))
    with pytest.raises(ValueError, match="distinct"):
        encode_first_layer(layer, x, np.array([1, 1]))
    with pytest.raises(ValueError, match="cell"):
        encode_first_layer(layer, x, np.array([1]), cell=0)
    with pytest.raises(ValueError, match="gamma"):
        encode_first_layer(layer, x, np.array([1]), gamma=float("nan"))
    with pytest.raises(ValueError, match="grid_shape"):
        encode_first_layer(layer, x, np.array([1]), grid_shape=(3, 12))


def test_solution_keeps_neurons_active_exactly():
    import smug_opt

    rng = np.random.default_rng(5)
    layer = _conv2d(rng, 12, 12, 2, 6, (3, 3), (1, 1), "same")
    x = np.abs(rng.normal(size=layer.input_shape))
    o = layer.preactivation(x).reshape(-1)
    neurons = np.flatnonzero(o > 0)[:40]
    enc = encode_first_layer(layer, x, neurons, gamma=0.5, cell=3)
    r = smug_opt.solve(enc.problem, "highs", time_limit=30)
    assert r.status.name == "OPTIMAL" and verify(enc.problem, r.x).ok
    masked = layer.preactivation(_masked_input(layer, x, enc.grid, r.x)).reshape(-1)[neurons]
    assert np.all(masked > 0.5 * o[neurons])


@pytest.mark.parametrize("gamma", [0.0, 0.5, 0.9])
def test_greedy_start_holds_exactly_and_is_not_larger_than_needed(gamma):
    rng = np.random.default_rng(3)
    layer = _conv2d(rng, 12, 12, 2, 4, (3, 3), (1, 1), "same")
    x = rng.normal(size=layer.input_shape)
    o = layer.preactivation(x).reshape(-1)
    neurons = np.argsort(-o)[:30]  # active neurons, so the full mask holds
    enc = encode_first_layer(layer, x, neurons, gamma=gamma, cell=2)
    start = np.asarray(enc.problem.metadata["start"], dtype=float)
    assert verify(enc.problem, start).ok
    assert start.sum() < enc.grid.num_cells
    for c in np.flatnonzero(start):  # one pass: no kept cell can go on its own
        fewer = start.copy()
        fewer[c] = 0.0
        slack = enc.problem.A @ fewer - enc.problem.rhs
        assert slack.min() <= 1e-6 * (1 + np.abs(enc.problem.rhs).max())


def test_no_greedy_start_when_the_full_mask_fails():
    rng = np.random.default_rng(4)
    layer = _conv2d(rng, 6, 6, 1, 2, (3, 3), (1, 1), "same")
    x = rng.normal(size=layer.input_shape)
    o = layer.preactivation(x).reshape(-1)
    active = np.argsort(-o)[:3]
    assert o[active].min() > 0
    enc = encode_first_layer(layer, x, active, gamma=2.0, cell=2)  # o > 2·o: no mask holds
    assert "start" not in enc.problem.metadata
