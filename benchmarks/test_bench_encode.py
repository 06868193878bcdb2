"""Encoders: the SMUG first layer at paper scale and the whole 784-32-10 network.

Each benchmark is skipped when its encoder cannot be imported. Weights and inputs are
seeded random arrays, so no model has to be trained or loaded.
"""

from __future__ import annotations

import math

import numpy as np
import pytest


@pytest.fixture(scope="module")
def paper_layer():
    base = pytest.importorskip("smug_opt.models.base")
    rng = np.random.default_rng(0)
    weights = rng.normal(0.0, math.sqrt(2.0 / 147), size=(7, 7, 3, 64))
    bias = rng.normal(0.0, 0.05, size=64)
    image = rng.random((224, 224, 3))
    pad = base.resolve_padding("same", 224, 7, 2, 1)
    layer = base.AffineLayer("conv2d", weights, bias, (2, 2), (1, 1), (pad, pad), (224, 224, 3),
                             (112, 112, 64))
    o = layer.preactivation(image).ravel()
    neurons = np.argsort(-o, kind="stable")[:3000]
    return layer, image, neurons


def test_first_layer_encoding_paper_scale(benchmark, paper_layer):
    first_layer = pytest.importorskip("smug_opt.encode.first_layer")
    layer, image, neurons = paper_layer
    problem = benchmark(first_layer.build_problem, layer, image, neurons, gamma=0.0, cell=4)
    assert (problem.num_rows, problem.num_vars) == (3000, 56 * 56)


@pytest.mark.parametrize("bounds", ["interval", "lp"])
def test_full_network_encoding_mnist_mlp(benchmark, bounds):
    full_network = pytest.importorskip("smug_opt.encode.full_network")
    rng = np.random.default_rng(0)
    layers = [(rng.normal(0, math.sqrt(2 / 784), (784, 32)), rng.normal(0, 0.05, 32)),
              (rng.normal(0, math.sqrt(2 / 32), (32, 10)), rng.normal(0, 0.05, 10))]
    image = rng.random((28, 28)) * (rng.random((28, 28)) < 0.2)  # ~20 % inked pixels, like a digit
    problem = benchmark(full_network.full_network, layers, image, cell=1, bounds=bounds)
    assert problem.num_relus > 0 or problem.num_rows > 0
