"""The whole-network encoder takes any model the readers take, as `smug-opt stress` does:
a PyTorch module and a Keras CNN give the problem of their Network."""

from __future__ import annotations

import numpy as np
import pytest

from smug_opt.encode import full_network
from smug_opt.ir import Problem

pytest.importorskip("torch")


def _same(a: Problem, b: Problem) -> None:
    assert (a.num_vars, a.num_rows, a.num_relus) == (b.num_vars, b.num_rows, b.num_relus)
    assert a.metadata["label"] == b.metadata["label"]
    assert np.array_equal(a.objective, b.objective) and np.array_equal(a.rhs, b.rhs)
    assert (a.A != b.A).nnz == 0


def test_a_torch_module_is_encoded_as_its_network() -> None:
    from network_cases import rgb_torch_cnn

    from smug_opt.models.resolve import network_of

    module = rgb_torch_cnn().eval()
    x = np.random.default_rng(2).uniform(size=(3, 8, 8))
    _same(full_network(module, x, bounds="interval"), full_network(network_of(module), x, bounds="interval"))


def test_a_keras_cnn_is_encoded_as_its_network() -> None:
    keras = pytest.importorskip("keras")
    from smug_opt.network.keras_reader import read_keras

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((6, 6, 1)), keras.layers.Conv2D(2, 3, activation="relu"),
                              keras.layers.Flatten(), keras.layers.Dense(3)])
    x = np.random.default_rng(3).uniform(size=(6, 6, 1))
    problem = full_network(model, x, bounds="interval")
    _same(problem, full_network(read_keras(model), x, bounds="interval"))
    with pytest.raises(ValueError, match="layer 0 must be"):
        full_network([(np.ones((2, 2)),)], np.ones(2))  # malformed (W, b) layers keep their error
