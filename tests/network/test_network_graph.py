"""The structured network's float64 forward pass against PyTorch's (float64) on the same
operations, and its construction checks."""

from __future__ import annotations

import numpy as np
import pytest
from network_cases import all_ops_network

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
    Pad,
    Relu,
    Reshape,
    Scale,
    Transpose,
    parameter_count,
)

torch = pytest.importorskip("torch")
F = torch.nn.functional


def _torch_forward(x: np.ndarray, net: Network) -> np.ndarray:
    """The same network in torch float64, written independently of the numpy kernels."""
    v: list = [torch.from_numpy(x)]
    for node in net.nodes[1:]:
        op, a = node.op, v[node.inputs[0]]
        if isinstance(op, Scale):
            y = a * torch.from_numpy(np.array(op.scale)) + torch.from_numpy(np.array(op.shift))
        elif isinstance(op, Conv):
            t, left, b, r = op.pads
            y = F.conv2d(F.pad(a, (left, r, t, b)), torch.from_numpy(np.array(op.weight)),
                         torch.from_numpy(np.array(op.bias)), op.strides, 0, op.dilations, op.groups)
        elif isinstance(op, Clip):
            y = torch.clamp(a, op.lo, op.hi)
        elif isinstance(op, LeakyRelu):
            y = F.leaky_relu(a, op.alpha)
        elif isinstance(op, Relu):
            y = F.relu(a)
        elif isinstance(op, Add):
            y = a + v[node.inputs[1]]
        elif isinstance(op, Pad):
            t, left, b, r = op.pads
            y = F.pad(a, (left, r, t, b), value=op.value)
        elif isinstance(op, MaxPool):
            t, left, b, r = op.pads
            y = F.max_pool2d(F.pad(a, (left, r, t, b), value=-np.inf), op.kernel, op.strides)
        elif isinstance(op, AvgPool):
            t, left, b, r = op.pads
            assert (t, left) == (b, r) or op.count_include_pad
            if op.count_include_pad:
                y = F.avg_pool2d(F.pad(a, (left, r, t, b)), op.kernel, op.strides)
            else:
                y = F.avg_pool2d(a, op.kernel, op.strides, (t, left), count_include_pad=False)
        elif isinstance(op, Transpose):
            y = a.permute(0, *(p + 1 for p in op.perm))
        elif isinstance(op, Reshape):
            y = a.reshape(a.shape[0], *node.shape)
        elif isinstance(op, Dense):
            y = a @ torch.from_numpy(np.array(op.weight)).T + torch.from_numpy(np.array(op.bias))
        v.append(y)
    return v[-1].numpy()


def test_forward_matches_torch_on_every_operation():
    rng = np.random.default_rng(0)
    net = all_ops_network(rng)
    x = rng.normal(size=(4, 3, 9, 9))
    ours = net.forward(x)
    assert ours.shape == (4, 10)
    np.testing.assert_allclose(ours, _torch_forward(x, net), rtol=1e-12, atol=1e-12)
    every = net.node_outputs(x)
    assert [v.shape[1:] for v in every] == [node.shape for node in net.nodes]


def test_digest_identifies_the_weights():
    a, b = all_ops_network(np.random.default_rng(0)), all_ops_network(np.random.default_rng(0))
    assert a.digest == b.digest and len(a.digest) == 64
    assert all_ops_network(np.random.default_rng(1)).digest != a.digest
    assert parameter_count(a.nodes[2].op) == 6 * 3 * 3 * 3 + 6


def test_construction_names_the_node_whose_shape_is_wrong():
    nodes = (Node("x", Input(), (), (4,)), Node("fc", Dense(np.ones((3, 4)), np.zeros(3)), (0,), (2,)))
    with pytest.raises(ValueError, match=r"node 1 'fc' \(Dense\): the operation gives shape \(3,\)"):
        Network(nodes)
    nodes = (Node("x", Input(), (), (4,)), Node("fc", Dense(np.ones((3, 5)), np.zeros(3)), (0,), (3,)))
    with pytest.raises(ValueError, match="needs a vector of 5, got shape"):
        Network(nodes)
    with pytest.raises(ValueError, match="class scores must be a vector"):
        Network((Node("x", Input(), (), (1, 2, 2)), Node("r", Relu(), (0,), (1, 2, 2))))
    with pytest.raises(ValueError, match="takes inputs of shape"):
        Network((Node("x", Input(), (), (4,)), Node("r", Relu(), (0,), (4,)))).forward(np.ones(6))


def test_non_finite_weights_are_refused_naming_the_node():
    bad_weight = np.ones((3, 4))
    bad_weight[1, 2] = np.nan
    nodes = (Node("x", Input(), (), (4,)), Node("fc", Dense(bad_weight, np.zeros(3)), (0,), (3,)))
    with pytest.raises(ValueError, match=r"node 1 'fc' \(Dense\): NaN or infinite values in its weight$"):
        Network(nodes)
    nodes = (Node("x", Input(), (), (4,)), Node("div", Scale(np.array(np.inf), np.array(0.0)), (0,), (4,)),
             Node("fc", Dense(np.ones((3, 4)), np.zeros(3)), (1,), (3,)))
    with pytest.raises(ValueError, match=r"node 1 'div' \(Scale\): NaN or infinite values in its scale$"):
        Network(nodes)
