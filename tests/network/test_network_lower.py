"""Lowering to the flat form: ``FlatNetwork.forward(Preprocess(x))[-1]`` equals
``Network.forward(x)`` in float64, on every operation and on the external networks with
real digits; the preprocessing is exactly the elementwise chain in front."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from network_cases import all_ops_network

from smug_opt.network.graph import Dense, Input, Network, Node, Relu, Reshape, Scale, Transpose
from smug_opt.network.lower import lower

NETS = Path(__file__).resolve().parents[3] / "shared" / "nets"


def _check(net: Network, x: np.ndarray) -> None:
    pre, flat = lower(net)
    ours = flat.forward(pre(x))
    expected = net.forward(x)
    np.testing.assert_allclose(ours[-1], expected, rtol=1e-9, atol=1e-9 * max(1.0, np.abs(expected).max()))
    assert flat.num_outputs == net.num_outputs and flat.output == net.output
    assert [layer.size for layer in flat.layers] == [v.shape[1] for v in ours]


def test_every_operation_lowers_exactly():
    rng = np.random.default_rng(0)
    net = all_ops_network(rng)
    _check(net, rng.normal(size=(6, 3, 9, 9)))
    pre, flat = lower(net)
    kinds = [layer.kind for layer in flat.layers]
    # the normalising Scale is preprocessing; pad+maxpool stays a pad (linear) then maxpool;
    # the two avg pools, the transpose, the reshape and the dense merge into one linear layer
    assert kinds == ["input", "linear", "clip", "linear", "leaky_relu", "add", "linear", "maxpool",
                     "linear", "relu"]
    assert flat.input_shape == (3, 9, 9) and np.all(pre.scale == np.broadcast_to(
        net.nodes[1].op.scale, (3, 9, 9)).ravel())


def test_preprocessing_is_the_elementwise_chain_and_masks_act_after_it():
    rng = np.random.default_rng(1)
    nodes = (Node("x", Input(), (), (4, 4, 2)),
             Node("to_chw", Transpose((2, 0, 1)), (0,), (2, 4, 4)),
             Node("norm", Scale(rng.uniform(1, 2, (2, 1, 1)), rng.normal(size=(2, 1, 1))), (1,), (2, 4, 4)),
             Node("flat", Reshape(), (2,), (32,)),
             Node("fc", Dense(rng.normal(size=(3, 32)), rng.normal(size=3)), (3,), (3,)),
             Node("relu", Relu(), (4,), (3,)))
    net = Network(nodes)
    x = rng.uniform(0, 1, size=(5, 4, 4, 2))
    _check(net, x)
    pre, flat = lower(net)
    assert flat.input_shape == (32,) and [layer.kind for layer in flat.layers] == ["input", "linear", "relu"]
    affine = pre(x)  # what the Dense reads, in the network's channels-first order
    np.testing.assert_allclose(affine, net.node_outputs(x)[3])
    masked = affine.copy()
    masked[:, :7] = 0.0  # a masked value is 0 after the normalisation
    np.testing.assert_allclose(flat.forward(masked)[-1],
                               np.maximum(masked @ nodes[4].op.weight.T + nodes[4].op.bias, 0))


@pytest.mark.parametrize("relative", [
    "vnncomp2021/benchmarks/mnistfc/mnist-net_256x2.onnx",
    "vnncomp2021/benchmarks/verivital/Convnet_maxpool.onnx",
    "vnncomp2021/benchmarks/verivital/Convnet_avgpool.onnx",
    "verix/mnist-10x2.onnx",
    "vnncomp2021/benchmarks/marabou-cifar10/nets/cifar10_small.onnx",
    "vnncomp2021/benchmarks/cifar10_resnet/onnx/resnet_2b.onnx",
])
def test_external_networks_lower_exactly(relative):
    pytest.importorskip("onnx")
    from smug_opt.data import load_digits
    from smug_opt.network.onnx_reader import read_onnx

    path = NETS / relative
    if not path.exists():
        pytest.skip(f"{path} absent (the external networks live in ../shared/nets beside the repo)")
    net = read_onnx(path)
    if net.input_shape[-1] == 32 or net.input_shape[0] == 32:
        x = np.random.default_rng(0).uniform(0, 1, size=(4, *net.input_shape))
    else:
        x = load_digits().x_test[:10].reshape(10, -1).astype(np.float64)
    _check(net, x.reshape(len(x), *net.input_shape))
