"""The encoder's coefficients are float64 products of the network's: bounds proven for the
network must be widened by a rigorous bound on that rounding before they bound the problem.
Checked against exact rational evaluation of the problem and of the network."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
import scipy.sparse as sp
from flat_nets import every_kind, exact_forward, linear
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from smug_opt.bounds.cells import on_cells
from smug_opt.encode.deviation import product_deviation, sum_deviation
from smug_opt.encode.layer_bounds import LayerBounds
from smug_opt.encode.masked import MaskedNetwork
from smug_opt.encode.network_milp import encode_network
from smug_opt.ir import Problem, ProblemBuilder
from smug_opt.network.flat import FlatLayer, FlatNetwork

OLD_MARGIN = 1e-9  # the relative widening the encoder used before (PRODUCT_MARGIN)


def _exact(value: float) -> Fraction:
    return Fraction(float(value))


def _exact_product(M: sp.csr_matrix, C: sp.csr_matrix, c: np.ndarray, b: np.ndarray, x: np.ndarray) -> list:
    Md, Cd = M.toarray(), C.toarray()
    xs = [_exact(v) for v in x]
    out = []
    for r in range(Md.shape[0]):
        total = _exact(b[r]) + sum(_exact(Md[r, i]) * _exact(c[i]) for i in range(Md.shape[1]))
        for i in range(Md.shape[1]):
            if Md[r, i]:
                inner = sum(_exact(Cd[i, j]) * xs[j] for j in range(Cd.shape[1]) if Cd[i, j])
                total += _exact(Md[r, i]) * inner
        out.append(total)
    return out


def _wide_floats(draw: st.DrawFn, shape: tuple[int, int], density: float) -> np.ndarray:
    """Entries of mixed signs over many orders of magnitude, some exactly ±1, some 0."""
    values = np.array(draw(st.lists(st.floats(-1e9, 1e9, allow_nan=False, allow_subnormal=False),
                                    min_size=shape[0] * shape[1], max_size=shape[0] * shape[1])))
    keep = np.array(draw(st.lists(st.floats(0, 1), min_size=values.size, max_size=values.size))) < density
    unit = np.array(draw(st.lists(st.sampled_from([0.0, 1.0, -1.0]), min_size=values.size,
                                  max_size=values.size)))
    values = np.where(unit != 0, unit, values)
    return np.where(keep, values, 0.0).reshape(shape)


@st.composite
def products(draw: st.DrawFn) -> tuple[sp.csr_matrix, sp.csr_matrix, np.ndarray, np.ndarray, np.ndarray]:
    rows, inner, cols = (draw(st.integers(1, 4)) for _ in range(3))
    M = sp.csr_matrix(_wide_floats(draw, (rows, inner), 0.8))
    C = sp.csr_matrix(_wide_floats(draw, (inner, cols), 0.7))
    c = _wide_floats(draw, (1, inner), 0.5)[0]
    b = _wide_floats(draw, (1, rows), 0.5)[0]
    x = np.array(draw(st.lists(st.floats(-3, 3, allow_nan=False), min_size=cols, max_size=cols)))
    return M, C, c, b, x


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=products())
def test_a_products_rounding_stays_within_its_deviation(case) -> None:
    M, C, c, b, x = case
    coef = sp.csr_matrix(M @ C)
    const = M @ c + b
    reach = np.abs(x) + 0.5
    bound = product_deviation(M, C, reach, c, b)
    computed = [sum((_exact(v) * _exact(x[j]) for j, v in zip(coef[r].indices, coef[r].data, strict=True)),
                    _exact(const[r])) for r in range(M.shape[0])]
    for got, want, allowed in zip(computed, _exact_product(M, C, c, b, x), bound, strict=True):
        assert abs(got - want) <= _exact(allowed)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=products())
def test_a_sums_rounding_stays_within_its_deviation(case) -> None:
    M, C, c, _, x = case
    A = sp.csr_matrix(M @ C)
    B = sp.csr_matrix(np.roll(A.toarray(), 1, axis=0) * -0.999)
    a, b = M @ c, np.roll(M @ c, 1) * 3.0
    coef, const = sp.csr_matrix(A + B), a + b
    bound = sum_deviation(A, B, a, b, np.abs(x) + 0.5)
    for r in range(A.shape[0]):
        got = _exact(const[r]) + sum(_exact(coef[r, j]) * _exact(x[j]) for j in range(A.shape[1]))
        want = _exact(a[r]) + _exact(b[r]) + sum((_exact(A[r, j]) + _exact(B[r, j])) * _exact(x[j])
                                                 for j in range(A.shape[1]))
        assert abs(got - want) <= _exact(bound[r])


def _problem_values(problem: Problem, mask: np.ndarray) -> tuple[list[Fraction], list[Fraction]]:
    """Every ReLU's pre-activation and the output rows' slacks of ``problem`` for ``mask``,
    exactly (the binaries decide every ReLU output in order)."""
    x = [Fraction(0)] * problem.num_vars
    for i, v in enumerate(mask):
        x[i] = Fraction(int(v))
    pre = []
    rin = problem.relu_in.tocsr()
    for r, out in enumerate(problem.relu_out):
        row = rin[r]
        value = _exact(problem.relu_const[r]) + sum(_exact(w) * x[j] for j, w in zip(row.indices, row.data,
                                                                                       strict=True))
        pre.append(value)
        x[out] = max(value, Fraction(0))
    A = problem.A.tocsr()
    slacks = [sum((_exact(w) * x[j] for j, w in zip(A[r].indices, A[r].data, strict=True)), Fraction(0))
              - _exact(problem.rhs[r]) for r in range(problem.num_rows)]
    return pre, slacks


def _tight_bounds(network: MaskedNetwork, masks: np.ndarray) -> tuple[dict, dict, list]:
    """The network's exact ranges (on its cells) over ``masks``, rounded outward to floats,
    and each mask's exact output-row slacks."""
    cells = on_cells(network.net, network.inputs)
    values = [exact_forward(cells, mask) for mask in masks]
    lo, hi = {}, {}
    for k in range(1, len(cells.layers)):
        low = [min(v[k][j] for v in values) for j in range(cells.layers[k].size)]
        high = [max(v[k][j] for v in values) for j in range(cells.layers[k].size)]
        lo[k] = np.nextafter(np.array([float(v) for v in low]), -np.inf)
        hi[k] = np.nextafter(np.array([float(v) for v in high]), np.inf)
    slacks = [[sum(_exact(d) * s for d, s in zip(row, v[-1], strict=True)) - _exact(rhs)
               for row, rhs in zip(network.out_rows, network.out_rhs, strict=True)] for v in values]
    return lo, hi, slacks


def _check_encoding(network: MaskedNetwork, masks: np.ndarray) -> float:
    """Encode ``network`` with bounds exactly tight over ``masks``; every ReLU input of the
    problem lies within its declared bounds and every output row within its deviation of the
    network's, for each mask. Returns the largest distance of a problem ReLU input outside the
    network's own bound, relative to what the old margin allowed (> 1: it would have failed)."""
    lo, hi, net_slacks = _tight_bounds(network, masks)
    bounds = LayerBounds("crown", lo, hi, dict(lo), dict(hi))
    builder = ProblemBuilder()
    builder.set_objective(builder.add_binaries(network.num_cells), 1.0)
    encoding = encode_network(builder, network, bounds, strengthen=False)
    problem = builder.build()
    assert encoding.row_deviation is not None
    worst = 0.0
    for mask, net_slack in zip(masks, net_slacks, strict=True):
        pre, slacks = _problem_values(problem, mask)
        for r, value in enumerate(pre):
            assert _exact(problem.relu_lo[r]) <= value <= _exact(problem.relu_hi[r]), (r, float(value))
        for row, (got, want) in enumerate(zip(slacks[-len(net_slack):], net_slack, strict=True)):
            assert abs(got - want) <= _exact(encoding.row_deviation[row])
        worst = max(worst, _outside(network, lo, hi, encoding.neurons[-1]["kept"], pre))
    return worst


def _outside(network: MaskedNetwork, lo: dict, hi: dict, kept: list[int], pre: list[Fraction]) -> float:
    """How far the inputs of the problem's last ReLUs lie outside the network's bounds on
    them, over what the old relative margin allowed."""
    worst = 0.0
    index = [layer.inputs[0] for layer in network.net.layers if layer.kind == "relu"][-1]
    for position, j in enumerate(kept):
        low, high = _exact(lo[index][j]), _exact(hi[index][j])
        margin = OLD_MARGIN * (1.0 + abs(float(low)) + abs(float(high)))
        value = pre[len(pre) - len(kept) + position]
        outside = max(low - value, value - high, Fraction(0))
        worst = max(worst, float(outside) / margin)
    return worst


def _cancelling(rng: np.random.Generator, n: int, big: float) -> FlatNetwork:
    """input → two affine layers (one of weights ~``big``, rows 0 and 1 equal) → their sum →
    rows 0 − 1 (the big parts cancel exactly in the network, not in float64 coefficients)
    → ReLU → 2 logits."""
    W1 = rng.normal(size=(3, n)) * big
    W1[1] = W1[0]
    layers = [FlatLayer("input", (), n),
              linear(0, W1, rng.normal(size=3)),
              linear(0, rng.normal(size=(3, n)), rng.normal(size=3)),
              FlatLayer("add", (1, 2), 3),
              linear(3, np.array([[1.0, -1.0, 0.0], [0.0, 1.0, -1.0]]), np.zeros(2)),
              FlatLayer("relu", (4,), 2),
              linear(5, np.array([[1.0, 0.5], [-1.0, 0.2]]), np.array([0.1, 0.0]))]
    return FlatNetwork(tuple(layers), (n,))


def _every_mask(n: int) -> np.ndarray:
    return np.array(list(itertools.product([0.0, 1.0], repeat=n)))


def test_cancelling_coefficients_would_break_the_old_margin_and_stay_within_the_bounds() -> None:
    rng = np.random.default_rng(3)
    net = _cancelling(rng, 8, 1e8)
    xa = rng.uniform(0.1, 1.0, size=8)
    network = MaskedNetwork.build(net, xa, np.arange(8), 0, 0.0)
    ratio = _check_encoding(network, _every_mask(8))
    assert ratio > 1.0, "the instance should be adversarial for a 1e-9 relative margin"


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**16), big=st.sampled_from([1.0, 1e4, 1e8, 1e12]), n=st.integers(2, 6))
def test_cancelling_networks_stay_within_their_bounds(seed: int, big: float, n: int) -> None:
    rng = np.random.default_rng(seed)
    net = _cancelling(rng, n, big)
    xa = rng.uniform(-1.0, 1.0, size=n)
    _check_encoding(MaskedNetwork.build(net, xa, np.arange(n), 0, 0.0), _every_mask(n))


@pytest.mark.slow
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**16), scale=st.sampled_from([1.0, 1e3, 1e6]))
def test_every_layer_kind_stays_within_its_bounds(seed: int, scale: float) -> None:
    """Leaky ReLU, max pooling, clip and a residual sum, weights scaled up: the problem's
    values on sampled masks lie within the network's exact ranges over them, widened."""
    rng = np.random.default_rng(seed)
    net = every_kind(rng)
    layers = tuple(FlatLayer(la.kind, la.inputs, la.size, matrix=la.matrix * scale, bias=la.bias * scale)
                   if la.kind == "linear" else la for la in net.layers)
    net = FlatNetwork(layers, net.input_shape)
    xa = rng.uniform(-1.0, 1.0, size=50)
    network = MaskedNetwork.build(net, xa, np.tile(np.arange(25), 2), 0, 0.0)
    masks = (rng.uniform(size=(24, 25)) < 0.5).astype(float)
    _check_encoding(network, masks)
