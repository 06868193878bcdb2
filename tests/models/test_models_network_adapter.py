"""The Network adapter against PyTorch's and onnxruntime's own forward passes on real MNIST
digits: stem folding, layouts, the torch head, its gradients (IG completeness), refusals."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch_networks import mnist_cnn, network_of, train  # noqa: E402

from smug_opt.data.mnist import load_digits  # noqa: E402
from smug_opt.models.integrated_gradients import integrated_gradients  # noqa: E402
from smug_opt.models.network_adapter import NetworkAdapter  # noqa: E402
from smug_opt.network.graph import (  # noqa: E402
    Add,
    Clip,
    Conv,
    Dense,
    Input,
    MaxPool,
    Network,
    Node,
    Pad,
    Relu,
    Reshape,
)


@pytest.fixture(scope="module")
def digits():
    d = load_digits()
    return d.x_train[:512].transpose(0, 3, 1, 2), d.y_train[:512], d.x_test[:16]


@pytest.fixture(scope="module")
def cnn(digits):
    x, y, _ = digits
    return train(mnist_cnn(), x, y)


def torch_outputs(model: nn.Module, x_nchw: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return model.double()(torch.as_tensor(x_nchw, dtype=torch.float64)).numpy()


def test_cnn_matches_torch_on_real_digits(cnn, digits):
    """predict, head(first layer) and predict_from_affine_input all equal torch's forward."""
    x_test = digits[2]  # (n, 28, 28, 1): the adapter's channels-last view of an NCHW net
    adapter = NetworkAdapter(network_of(cnn, (1, 28, 28)))
    assert adapter.input_shape == (28, 28, 1) and adapter.affine.kernel.shape == (3, 3, 1, 8)
    expected = torch_outputs(cnn, x_test.transpose(0, 3, 1, 2))
    np.testing.assert_allclose(adapter.predict(x_test), expected, rtol=1e-10, atol=1e-10)
    h = np.stack([adapter.first_layer(x)[1] for x in x_test])
    np.testing.assert_allclose(adapter.head(h), expected, rtol=1e-10, atol=1e-10)
    xa = np.stack([adapter.affine_input(x) for x in x_test])
    np.testing.assert_allclose(adapter.predict_from_affine_input(xa), expected, rtol=1e-10, atol=1e-10)
    assert (expected.argmax(1) == load_digits().y_test[:16]).mean() >= 0.6  # it learned something


def test_first_layer_is_conv_and_batchnorm_folded(cnn, digits):
    """The folded float64 AffineLayer equals torch's Conv → BatchNorm, channels last."""
    adapter = NetworkAdapter(network_of(cnn, (1, 28, 28)))
    x = digits[2][0]
    with torch.no_grad():
        o = cnn.double()[:2](torch.as_tensor(x.transpose(2, 0, 1)[None], dtype=torch.float64))[0].numpy()
    np.testing.assert_allclose(adapter.first_layer(x)[0], o.transpose(1, 2, 0), rtol=1e-10, atol=1e-12)


def test_integrated_gradients_complete_on_torch_head(cnn, digits):
    """Σ IG = F(h) − F(0) on the torch head, in float64 and float32, any batch size."""
    for dtype, tol in (("float64", 5e-3), ("float32", 5e-3)):
        adapter = NetworkAdapter(network_of(cnn, (1, 28, 28), output="softmax"), dtype=dtype)
        ig = integrated_gradients(adapter, digits[2][3], steps=256, batch_size=100)
        assert ig.completeness_error < tol
        assert abs(ig.score_h - adapter.predict(digits[2][3:4])[0, ig.target]) < 1e-5


def test_head_gradient_equals_the_torch_models_own(cnn, digits):
    """d score / d h through the adapter's head equals autograd through the original torch
    layers after the first ReLU (channels last vs first), for every class."""
    adapter = NetworkAdapter(network_of(cnn, (1, 28, 28)))
    h = np.stack([adapter.first_layer(x)[1] for x in digits[2][:4]])
    h_torch = torch.tensor(h.transpose(0, 3, 1, 2), requires_grad=True)
    outputs = cnn.double()[3:](h_torch)
    for target in (0, 3, 9):
        scores, grads = adapter.head_gradient(h, target, batch_size=3)
        (expected,) = torch.autograd.grad(outputs[:, target].sum(), h_torch, retain_graph=True)
        np.testing.assert_allclose(scores, outputs[:, target].detach().numpy(), rtol=1e-12)
        np.testing.assert_allclose(grads, expected.numpy().transpose(0, 2, 3, 1), rtol=1e-10, atol=1e-13)


def test_dense_reading_a_flattened_colour_image():
    """A Linear layer reading a flattened (3, 8, 8) image: weight columns permuted to
    H, W, C order, so a pixel's channels share its cell; outputs equal torch's."""
    torch.manual_seed(1)
    model = nn.Sequential(nn.Flatten(), nn.Linear(192, 16), nn.LeakyReLU(0.1), nn.Linear(16, 4)).eval()
    adapter = NetworkAdapter(network_of(model, (3, 8, 8)))
    x = np.random.default_rng(0).uniform(size=(5, 8, 8, 3))
    np.testing.assert_allclose(adapter.predict(x), torch_outputs(model, x.transpose(0, 3, 1, 2)), atol=1e-10)
    with torch.no_grad():
        o = model.double()[:2](torch.as_tensor(x[:1].transpose(0, 3, 1, 2)))[0].numpy()
    np.testing.assert_allclose(adapter.first_layer(x[0])[0], o, atol=1e-12)
    assert adapter.activation.label == "leaky_relu(0.1)"
    grid = adapter.mask_grid(2, None)
    assert grid.shape == (4, 4) and grid.spatial_shape == (8, 8, 3)


def test_grouped_conv_pad_and_relu6_are_folded():
    """A depthwise conv behind a zero Pad with a ReLU6: padding folded, groups spread."""
    rng = np.random.default_rng(2)
    weight, bias = rng.normal(size=(6, 1, 3, 3)), rng.normal(size=6)
    nodes = (
        Node("x", Input(), (), (3, 10, 10)),
        Node("pad", Pad((1, 2, 1, 0)), (0,), (3, 12, 12)),
        Node("dw", Conv(weight, bias, (2, 2), (0, 0, 1, 1), (1, 1), 3), (1,), (6, 6, 6)),
        Node("relu6", Clip(0.0, 6.0), (2,), (6, 6, 6)),
        Node("pool", MaxPool((2, 2), (2, 2)), (3,), (6, 3, 3)),
        Node("flat", Reshape(), (4,), (54,)),
        Node("fc", Dense(rng.normal(size=(3, 54)), rng.normal(size=3)), (5,), (3,)),
    )
    network = Network(nodes)
    adapter = NetworkAdapter(network)
    assert adapter.activation.label == "relu6" and adapter.affine.padding == ((1, 2), (2, 1))
    x = rng.uniform(size=(4, 10, 10, 3))
    np.testing.assert_allclose(adapter.predict(x), network.forward(x.transpose(0, 3, 1, 2)), atol=1e-12)
    conv = network.node_outputs(x[:1].transpose(0, 3, 1, 2))[2][0]
    np.testing.assert_allclose(adapter.first_layer(x[0])[0], conv.transpose(1, 2, 0), atol=1e-12)


def test_onnx_export_of_the_cnn_matches_onnxruntime(cnn, digits, tmp_path):
    """The adapter's outputs equal onnxruntime's on the network torch exports."""
    ort = pytest.importorskip("onnxruntime")
    path = tmp_path / "cnn.onnx"
    torch.onnx.export(cnn.float(), torch.zeros(1, 1, 28, 28), str(path), input_names=["x"],
                      dynamic_axes={"x": {0: "batch"}}, dynamo=False)
    x = np.ascontiguousarray(digits[2].transpose(0, 3, 1, 2), dtype=np.float32)
    (expected,) = ort.InferenceSession(str(path)).run(None, {"x": x})
    adapter = NetworkAdapter(network_of(cnn, (1, 28, 28)))
    np.testing.assert_allclose(adapter.predict(digits[2]), expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("case, message", [
    ("pool_first", "unsupported node before the first affine layer: MaxPool node 'pool'"),
    ("clip_activation", "clips to [-1, 1]"),
    ("skip", "Input node 'x' feeds 2 nodes (Conv node 'conv', Add node 'add')"),
])
def test_refusals_name_the_node(case, message):
    conv = Conv(np.random.default_rng(0).normal(size=(2, 2, 3, 3)), np.zeros(2), pads=(1, 1, 1, 1))
    x = Node("x", Input(), (), (2, 4, 4))
    fc = Node("fc", Dense(np.ones((2, 8 if case == "pool_first" else 32)), np.zeros(2)), (4,), (2,))
    if case == "pool_first":
        nodes = (x, Node("pool", MaxPool((2, 2), (2, 2)), (0,), (2, 2, 2)),
                 Node("flat", Reshape(), (1,), (8,)), Node("fc", fc.op, (2,), (2,)))
    else:
        act = Clip(-1.0, 1.0) if case == "clip_activation" else Relu()
        nodes = (x, Node("conv", conv, (0,), (2, 4, 4)), Node("act", act, (1,), (2, 4, 4)),
                 Node("add", Add(), (2, 0) if case == "skip" else (2, 2), (2, 4, 4)),
                 Node("flat", Reshape(), (3,), (32,)), fc)
    with pytest.raises(ValueError, match=re.escape(message)):
        NetworkAdapter(Network(nodes))


def test_explain_a_network_through_the_python_api(cnn, digits):
    """smug_opt.explain takes a Network: IG through the torch head, an OPTIMAL mask verified
    exactly, and the kept cells keep every selected neuron above γ·o in the network itself."""
    import smug_opt

    network = network_of(cnn, (1, 28, 28))
    x = digits[2][1]
    e = smug_opt.explain(network, x, k=40, cell=2, gamma=0.2, backend="highs", time_limit=60)
    assert e.result.status.name == "OPTIMAL" and e.result.verified
    assert e.mask.shape == (28, 28) and 0 < e.mask_size < 196
    masked = x * e.mask[..., None]  # a masked pixel is 0 (no normalisation in front here)
    o_masked = network.node_outputs(masked.transpose(2, 0, 1)[None])[2][0].transpose(1, 2, 0).reshape(-1)
    o = network.node_outputs(x.transpose(2, 0, 1)[None])[2][0].transpose(1, 2, 0).reshape(-1)
    assert (o_masked[e.neurons] > 0.2 * o[e.neurons]).all()


SHARED_NETS = Path(__file__).resolve().parents[3] / "shared" / "nets"
EXTERNAL = {
    "Convnet_maxpool": "vnncomp2021/benchmarks/verivital/Convnet_maxpool.onnx",
    "mnist-net_256x2": "vnncomp2021/benchmarks/mnistfc/mnist-net_256x2.onnx",
    "mnist-10x2": "verix/mnist-10x2.onnx",
}


@pytest.mark.parametrize("name", sorted(EXTERNAL))
def test_networks_trained_by_others_match_onnxruntime(name):
    """The shared nets (VeriVital's NCHW conv + max-pool CNN, VNN-COMP's mnistfc 256x2,
    VeriX's 28×28×1-input MLP), read by the ONNX reader: adapter outputs equal onnxruntime's
    on real digits, IG is complete and the grid is the digit's 28×28."""
    ort = pytest.importorskip("onnxruntime")
    path = SHARED_NETS / EXTERNAL[name]
    if not path.is_file():
        pytest.skip(f"{path} is absent (the shared networks live beside the repository in ../shared/nets)")
    from smug_opt.models.resolve import as_adapter

    adapter = as_adapter(str(path))
    digits = load_digits().x_test[:8].astype(np.float32)
    session = ort.InferenceSession(str(path))
    (feed,) = session.get_inputs()
    shape = [d if isinstance(d, int) else len(digits) for d in feed.shape]
    if shape[0] == 1:
        shape[0] = len(digits)
    ours = adapter.predict(digits.reshape(len(digits), *adapter.input_shape))
    theirs = np.concatenate([session.run(None, {feed.name: d.reshape(1, *shape[1:])})[0] for d in digits])
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-4)
    assert (ours.argmax(1) == load_digits().y_test[:8]).mean() >= 0.75
    assert adapter.mask_grid(1, (28, 28, 1)).shape == (28, 28)
    ig = integrated_gradients(adapter, digits[0].reshape(adapter.input_shape), steps=128)
    assert ig.completeness_error < 0.01


def test_an_nhwc_onnx_graph_built_by_hand_matches_onnxruntime(tmp_path):
    """An ONNX graph as tf2onnx writes one (NHWC input, normalisation, Transpose to NCHW),
    then a depthwise Conv with padding, BatchNormalization, Clip(0, 6), MaxPool, Flatten,
    Gemm: the adapter sees 8×8×3 channels last, normalisation in its stem, BatchNorm folded,
    ReLU6 as the activation, and its outputs equal onnxruntime's."""
    ort = pytest.importorskip("onnxruntime")
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    from smug_opt.models.resolve import as_adapter

    rng = np.random.default_rng(3)
    consts = {"mean": np.array([0.4, 0.5, 0.6]), "std": np.array([0.2, 0.25, 0.3]),
              "w": rng.normal(size=(6, 1, 3, 3)), "b": rng.normal(size=6) * 0.1,
              "gamma": rng.uniform(0.5, 1.5, 6), "beta": rng.normal(size=6) * 0.1,
              "rmean": rng.normal(size=6) * 0.1, "rvar": rng.uniform(0.5, 2, 6),
              "fc_w": rng.normal(size=(4, 6 * 4 * 4)), "fc_b": rng.normal(size=4),
              "lo": np.array(0.0), "hi": np.array(6.0)}
    nodes = [
        helper.make_node("Sub", ["x", "mean"], ["centred"]),
        helper.make_node("Div", ["centred", "std"], ["normed"]),
        helper.make_node("Transpose", ["normed"], ["nchw"], perm=[0, 3, 1, 2]),
        helper.make_node("Conv", ["nchw", "w", "b"], ["conv"], group=3, pads=[1, 1, 1, 1],
                         kernel_shape=[3, 3]),
        helper.make_node("BatchNormalization", ["conv", "gamma", "beta", "rmean", "rvar"], ["bn"]),
        helper.make_node("Clip", ["bn", "lo", "hi"], ["relu6"]),
        helper.make_node("MaxPool", ["relu6"], ["pool"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["pool"], ["flat"]),
        helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["y"], transB=1),
    ]
    graph = helper.make_graph(
        nodes, "nhwc", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 8, 8, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4])],
        [numpy_helper.from_array(v.astype(np.float32), k) for k, v in consts.items()])
    path = tmp_path / "nhwc.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    adapter = as_adapter(str(path))
    assert adapter.input_shape == (8, 8, 3) and adapter.activation.label == "relu6"
    assert adapter.affine.kernel.shape == (3, 3, 3, 6) and adapter.affine.padding == ((1, 1), (1, 1))
    x = rng.uniform(size=(5, 8, 8, 3)).astype(np.float32)
    (expected,) = ort.InferenceSession(str(path)).run(None, {"x": x})
    np.testing.assert_allclose(adapter.predict(x), expected, rtol=1e-4, atol=1e-4)
    mean, std = (consts[k].astype(np.float32).astype(np.float64) for k in ("mean", "std"))
    np.testing.assert_allclose(adapter.affine_input(x[0]), (x[0] - mean) / std, rtol=1e-12, atol=1e-12)


def test_a_tied_prediction_is_refused_not_explained_as_class_0():
    """Behind a ReLU on the logits (ERAN's nets) an input can score 0 on every class: no
    class is predicted, so SMUG needs an explicit target and a robust explanation has no
    prediction to explain (the input itself would break any set of fixed pixels)."""
    from smug_opt import explain
    from smug_opt.errors import ParameterError
    from smug_opt.robustness import explain_robust

    rng = np.random.default_rng(0)
    nodes = (Node("x", Input(), (), (6,)),
             Node("fc1", Dense(rng.normal(size=(4, 6)), np.ones(4)), (0,), (4,)),
             Node("relu1", Relu(), (1,), (4,)),
             Node("fc2", Dense(np.zeros((3, 4)), -np.ones(3)), (2,), (3,)),  # every score 0 after the ReLU
             Node("relu2", Relu(), (3,), (3,)))
    network = Network(nodes, input_range=(0.0, 1.0))
    x = np.full(6, 0.5)
    with pytest.raises(ParameterError, match=r"target is needed: .* top class \(classes 0, 1, 2 at 0\)"):
        explain(network, x, k=2)
    with pytest.raises(ValueError, match=r"tie for the top class \(classes 0, 1, 2 at 0\): no prediction"):
        explain_robust(network, x, eps=0.1)


def test_a_tie_of_many_classes_is_named_briefly():
    """A random-weight ImageNet network can tie all 1,000 classes: the message lists 8."""
    from smug_opt.models.base import top_tie

    assert top_tie(np.full(1000, 0.001)) == "classes 0, 1, 2, 3, 4, 5, 6, 7, ... (1000 classes) at 0.001"
    assert top_tie(np.array([0.5, 0.2, 0.5])) == "classes 0, 2 at 0.5"
    assert top_tie(np.array([0.1, 0.7, 0.2])) is None
