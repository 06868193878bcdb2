"""Bound propagation on networks trained by others (../shared/nets, read by the ONNX
reader and lowered): every layer's bounds contain every sampled masked digit's values, and
the output rows' bounds contain their margins."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from smug_opt.bounds import Masks, propagate

NETS = Path(__file__).resolve().parents[3] / "shared" / "nets" / "vnncomp2021" / "benchmarks"
FAST = {"mnistfc-256x2": "mnistfc/mnist-net_256x2.onnx", "mnistfc-256x6": "mnistfc/mnist-net_256x6.onnx",
        "convnet-maxpool": "verivital/Convnet_maxpool.onnx"}
SLOW = {"cifar10-small": "marabou-cifar10/nets/cifar10_small.onnx",
        "resnet-2b": "cifar10_resnet/onnx/resnet_2b.onnx"}


def _check(relative: str, max_cells: int = 12) -> None:
    path = NETS / relative
    if not path.is_file():
        pytest.skip(f"{path} is absent (the shared networks live beside the repository in ../shared/nets)")
    from smug_opt.network.lower import lower
    from smug_opt.network.onnx_reader import read_onnx

    preprocess, flat = lower(read_onnx(path, input_range=(0.0, 1.0)))
    rng = np.random.default_rng(0)
    if flat.num_inputs == 784:
        from smug_opt.data import pick_test_digits

        x = pick_test_digits(1)[1].reshape(1, -1).astype(np.float64)
    else:
        x = rng.uniform(0, 1, size=(1, flat.num_inputs))
    xa = preprocess(x)[0]
    pixels = xa.size // flat.input_shape[0] if len(flat.input_shape) == 3 else xa.size
    cells = np.arange(xa.size) % pixels  # channels (first) share their pixel's cell
    domain = Masks(xa, cells, max_cells=max_cells)
    bounds = propagate(flat, domain)
    masks = np.zeros((400, domain.num_cells))
    for row in masks:
        row[rng.choice(domain.num_cells, rng.integers(0, max_cells + 1), replace=False)] = 1.0
    values = flat.forward(masks[:, cells] * xa)
    for k, v in enumerate(values):
        assert np.all(v >= bounds.lo[k]) and np.all(v <= bounds.hi[k]), k
    label = int(np.argmax(flat.forward(xa[None])[-1]))
    rows = -np.eye(flat.num_outputs)
    rows[:, label] += 1.0
    lo, hi = bounds.linear(rows)
    margins = values[-1] @ rows.T
    assert np.all(margins >= lo) and np.all(margins <= hi)


@pytest.mark.parametrize("name", FAST)
def test_bounds_hold_on_shared_networks(name):
    _check(FAST[name])


@pytest.mark.slow
@pytest.mark.parametrize("name", SLOW)
def test_bounds_hold_on_shared_cifar_networks(name):
    _check(SLOW[name], max_cells=30)
