"""The ONNX reader against onnxruntime: the external networks in ../shared/nets on real
MNIST digits, and small ONNX files built here (onnx.helper) that use every operator the
reader covers, so a machine without ../shared still tests them all."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from smug_opt.network.graph import AvgPool, Clip, Conv, Dense, LeakyRelu, MaxPool, Pad, Scale  # noqa: E402
from smug_opt.network.onnx_reader import read_onnx  # noqa: E402

NETS = Path(__file__).resolve().parents[3] / "shared" / "nets"
EXTERNAL = {
    "mnist-net_256x2": "vnncomp2021/benchmarks/mnistfc/mnist-net_256x2.onnx",
    "mnist-net_256x4": "vnncomp2021/benchmarks/mnistfc/mnist-net_256x4.onnx",
    "mnist-net_256x6": "vnncomp2021/benchmarks/mnistfc/mnist-net_256x6.onnx",
    "Convnet_maxpool": "vnncomp2021/benchmarks/verivital/Convnet_maxpool.onnx",
    "Convnet_avgpool": "vnncomp2021/benchmarks/verivital/Convnet_avgpool.onnx",
    "mnist-10x2": "verix/mnist-10x2.onnx",
    "cifar10_small": "vnncomp2021/benchmarks/marabou-cifar10/nets/cifar10_small.onnx",
    "resnet_2b": "vnncomp2021/benchmarks/cifar10_resnet/onnx/resnet_2b.onnx",
}


def runtime(model_bytes: bytes, x: np.ndarray) -> np.ndarray:
    """onnxruntime's outputs, one example at a time (some files fix the batch to 1)."""
    session = ort.InferenceSession(model_bytes, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    return np.concatenate([session.run(None, {name: row[None].astype(np.float32)})[0].reshape(1, -1)
                           for row in x])


def assert_matches(ours: np.ndarray, reference: np.ndarray) -> None:
    """Equal within float32 rounding (onnxruntime runs float32, we float64), same classes."""
    scale = max(1.0, float(np.abs(reference).max()))
    np.testing.assert_allclose(ours, reference, rtol=0, atol=2e-5 * scale)
    assert (ours.argmax(1) == reference.argmax(1)).mean() >= 0.95


CIFAR_SPECS = {
    "cifar10_small": ("vnncomp2021/benchmarks/marabou-cifar10/specs", "*_eps0.012_*.vnnlib.gz"),
    "resnet_2b": ("vnncomp2021/benchmarks/cifar10_resnet/vnnlib_properties_pgd_filtered/"
                  "resnet2b_pgd_filtered", "*.vnnlib.gz"),
}


def spec_images(name: str, count: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """Real CIFAR-10 images (the centres of the VNN-LIB input boxes, within ε of the image)
    and their labels (from the file name's ``orig`` or the header's ``label``)."""
    folder, pattern = CIFAR_SPECS[name]
    images, labels = [], []
    for path in sorted((NETS / folder).glob(pattern))[:count]:
        with gzip.open(path, "rt") as file:
            text = file.read()
        bounds = re.findall(r"\(assert \((<=|>=) X_(\d+) ([-\d.e]+)\)\)", text)
        size = 1 + max(int(i) for _, i, _ in bounds)
        lo, hi = np.zeros(size), np.zeros(size)
        for side, i, value in bounds:
            (hi if side == "<=" else lo)[int(i)] = float(value)
        images.append((lo + hi) / 2)
        label = re.search(r"orig(\d+)", path.name) or re.search(r"label: (\d+)", text)
        labels.append(int(label.group(1)))
    return np.array(images), np.array(labels)


@pytest.fixture(scope="module")
def digits() -> tuple[np.ndarray, np.ndarray]:
    from smug_opt.data import load_digits

    data = load_digits()
    return data.x_test[:20].astype(np.float64), data.y_test[:20]  # (20, 28, 28, 1) in [0, 1]


@pytest.mark.parametrize("name", list(EXTERNAL))
def test_external_network_matches_onnxruntime(name, digits):
    path = NETS / EXTERNAL[name]
    if not path.exists():
        pytest.skip(f"{path} absent (the external networks live in ../shared/nets beside the repo)")
    net = read_onnx(path, input_range=(0.0, 1.0))
    assert net.name == path.stem and net.input_range == (0.0, 1.0) and net.num_outputs == 10
    if name in CIFAR_SPECS:  # images recovered from the VNN-LIB specs (in the network's input space)
        images, labels = spec_images(name)
        x = images.reshape(len(images), *net.input_shape)
    else:  # the same digits in each network's own input layout
        images, labels = digits
        x = images.transpose(0, 3, 1, 2) if net.input_shape == (1, 28, 28) else \
            images.reshape(len(images), *net.input_shape)
    ours = net.forward(x)
    assert_matches(ours, runtime(path.read_bytes(), x))
    assert (ours.argmax(1) == labels).mean() >= 0.75  # read right, they classify real images


def _model(nodes, inputs, output_shape, initializers, opset):
    graph = helper.make_graph(
        nodes, "test-graph", inputs,
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, output_shape)],
        [numpy_helper.from_array(np.asarray(v, dtype=np.float32 if np.asarray(v).dtype.kind == "f"
                                            else np.int64), k) for k, v in initializers.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model.SerializeToString()


def _cnn_all_ops(rng: np.random.Generator) -> bytes:
    """NCHW, dynamic batch, opset 13: every operator of the list with its attribute forms."""
    r = rng.normal
    init = {
        "mean": r(size=(1, 3, 1, 1)), "std": rng.uniform(0.5, 2, size=(1, 3, 1, 1)),
        "w1": r(size=(6, 3, 3, 3)) * 0.4, "b1": r(size=6),
        "g": rng.uniform(0.5, 1.5, 6), "beta": r(size=6), "mu": r(size=6), "var": rng.uniform(0.5, 2, 6),
        "wd": r(size=(6, 1, 3, 3)) * 0.4, "lo": np.float32(0.0), "hi": np.float32(6.0),
        "pads": np.array([0, 0, 1, 0, 0, 0, 0, 1]), "pv": np.float32(0.25),
        "w2": r(size=(12, 6, 1, 1)) * 0.4,
        "minus1": np.array([-1]), "zero": np.array(0),
        "wg": r(size=(16, 12)) * 0.3, "bg": r(size=16), "wm": r(size=(16, 10)) * 0.3, "bm": r(size=10),
        "k": rng.uniform(0.5, 2, size=10),
    }
    nodes = [
        helper.make_node("Sub", ["x", "mean"], ["centred"], name="normalise_sub"),
        helper.make_node("Div", ["centred", "std"], ["normed"], name="normalise_div"),
        helper.make_node("Conv", ["normed", "w1", "b1"], ["c1"], name="conv1", strides=[2, 1],
                         pads=[1, 0, 2, 1], dilations=[1, 2]),
        helper.make_node("BatchNormalization", ["c1", "g", "beta", "mu", "var"], ["bn"], name="bn",
                         epsilon=1e-3),
        helper.make_node("Relu", ["bn"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "wd"], ["dw"], name="depthwise", group=6, auto_pad="SAME_UPPER"),
        helper.make_node("Clip", ["dw", "lo", "hi"], ["r6"], name="relu6"),
        helper.make_node("LeakyRelu", ["r6"], ["lk"], name="leaky", alpha=0.2),
        helper.make_node("Add", ["r1", "lk"], ["res"], name="residual"),
        helper.make_node("Pad", ["res", "pads", "pv"], ["padded"], name="pad", mode="constant"),
        helper.make_node("MaxPool", ["padded"], ["mp"], name="maxpool", kernel_shape=[2, 2], strides=[2, 2],
                         pads=[1, 1, 1, 1]),
        helper.make_node("AveragePool", ["mp"], ["ap"], name="avgpool", kernel_shape=[3, 3],
                         pads=[1, 1, 1, 1], count_include_pad=1),
        helper.make_node("AveragePool", ["ap"], ["ap2"], name="avgpool_exclusive", kernel_shape=[2, 2],
                         pads=[1, 1, 0, 0]),
        helper.make_node("Conv", ["ap2", "w2"], ["c2"], name="pointwise"),
        helper.make_node("GlobalAveragePool", ["c2"], ["gap"], name="gap"),
        helper.make_node("Shape", ["gap"], ["shape"], name="shape"),
        helper.make_node("Gather", ["shape", "zero"], ["batch"], name="gather", axis=0),
        helper.make_node("Constant", [], ["zero_axes"], name="axes_const", value_ints=[0]),
        helper.make_node("Unsqueeze", ["batch", "zero_axes"], ["batch1"], name="unsqueeze"),
        helper.make_node("Concat", ["batch1", "minus1"], ["target"], name="concat", axis=0),
        helper.make_node("Reshape", ["gap", "target"], ["flat"], name="view"),
        helper.make_node("Gemm", ["flat", "wg", "bg"], ["fc1"], name="fc1", transB=1, alpha=0.5, beta=2.0),
        helper.make_node("Identity", ["fc1"], ["id"], name="identity"),
        helper.make_node("Dropout", ["id"], ["dr"], name="dropout"),
        helper.make_node("MatMul", ["dr", "wm"], ["mm"], name="fc2_matmul"),
        helper.make_node("Add", ["mm", "bm"], ["fc2"], name="fc2_bias"),
        helper.make_node("Mul", ["fc2", "k"], ["logits"], name="scale"),
        helper.make_node("Softmax", ["logits"], ["out"], name="softmax", axis=1),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 11, 10])
    return _model(nodes, [x], ["N", 10], init, 13)


def _nhwc_opset9(rng: np.random.Generator) -> bytes:
    """NHWC with Transpose nodes, opset 9 attribute forms (Clip min/max, Pad pads)."""
    init = {"w": rng.normal(size=(4, 2, 3, 3)) * 0.5, "b": rng.normal(size=4),
            "wg": rng.normal(size=(4 * 6 * 6, 5)) * 0.2, "bg": rng.normal(size=5),
            "shape": np.array([-1, 144])}
    nodes = [
        helper.make_node("Transpose", ["x"], ["nchw"], perm=[0, 3, 1, 2]),
        helper.make_node("Pad", ["nchw"], ["p"], mode="constant", pads=[0, 0, 1, 1, 0, 0, 1, 1]),
        helper.make_node("Conv", ["p", "w", "b"], ["c"], kernel_shape=[3, 3], strides=[1, 1]),
        helper.make_node("Clip", ["c"], ["r"], min=-1.0, max=2.0),
        helper.make_node("Transpose", ["r"], ["nhwc"], perm=[0, 2, 3, 1]),
        helper.make_node("Reshape", ["nhwc", "shape"], ["flat"]),
        helper.make_node("Gemm", ["flat", "wg", "bg"], ["out"]),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 6, 6, 2])
    return _model(nodes, [x], ["batch", 5], init, 9)


def test_every_operator_matches_onnxruntime():
    rng = np.random.default_rng(1)
    model = _cnn_all_ops(rng)
    net = read_onnx(model, input_range=(0.0, 1.0))
    assert net.output == "softmax" and net.input_shape == (3, 11, 10) and net.num_outputs == 10
    ops = [type(node.op) for node in net.nodes]
    # normalisation stays in front (masks act after it), BN folds into conv1, the bias Add
    # into the MatMul's Dense and the final Mul into it too
    assert ops[1] is Scale and ops[2] is Conv and Scale not in ops[3:]
    for kind in (Clip, LeakyRelu, Pad, MaxPool, AvgPool, Dense):
        assert kind in ops
    assert [node.op.groups for node in net.nodes if isinstance(node.op, Conv)] == [1, 6, 1]
    x = rng.uniform(0, 1, size=(16, 3, 11, 10))
    ours = net.forward(x)
    logits = runtime(model, x)  # softmax probabilities: compare the softmax of ours
    probabilities = np.exp(ours - ours.max(1, keepdims=True))
    probabilities /= probabilities.sum(1, keepdims=True)
    assert_matches(probabilities, logits)


def test_nhwc_network_with_opset9_attributes():
    rng = np.random.default_rng(2)
    model = _nhwc_opset9(rng)
    net = read_onnx(model)
    assert net.source_layout == "channels_last" and net.input_shape == (6, 6, 2) and net.output == "logits"
    x = rng.uniform(-1, 1, size=(10, 6, 6, 2))
    assert_matches(net.forward(x), runtime(model, x))
    assert read_onnx(model, layout="channels_first").source_layout == "channels_first"


def test_unsupported_operator_is_one_error_naming_the_node():
    nodes = [helper.make_node("Relu", ["x"], ["h"], name="ok"),
             helper.make_node("Tanh", ["h"], ["out"], name="squash")]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])], [1, 4], {}, 13)
    with pytest.raises(ValueError, match=r"^ONNX node 'squash' has op type Tanh, which smug-opt does not"):
        read_onnx(model)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize(("axis", "opset", "shape", "read"), [
    (None, 13, [1, 4], True), (1, 11, [1, 4], True), (-1, 13, [1, 4], True), (1, 13, [1, 4, 1], True),
    (0, 13, [1, 4], False), (0, 11, [1, 4], False), (-1, 13, [1, 4, 1], False)])
def test_a_final_softmax_is_read_only_over_the_class_scores(op, axis, opset, shape, read):
    """Over the batch axis (or a unit one) a final (Log)Softmax's outputs are constant: 0 or 1
    at batch size 1, whatever the scores; comparisons of the scores say nothing about them
    (verify answered unsat to ``Y_1 >= Y_0``, which every input meets)."""
    attrs = {} if axis is None else {"axis": axis}
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["scores"], name="scores"),
             helper.make_node(op, ["scores"], ["out"], name="final", **attrs)]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])], shape,
                   {"shape": shape}, opset)
    if read:
        assert read_onnx(model).output == ("softmax" if op == "Softmax" else "log_softmax")
    else:
        with pytest.raises(ValueError, match=rf"ONNX node 'final' \({op}\): {op} over axis .* does not "
                                             "normalise over the class scores alone"):
            read_onnx(model)


def test_nonlinear_product_of_tensors_names_the_node():
    nodes = [helper.make_node("Mul", ["x", "x"], ["out"], name="square")]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])], [1, 4], {}, 13)
    with pytest.raises(ValueError, match=r"ONNX node 'square' \(Mul\): Mul of two computed tensors"):
        read_onnx(model)


def test_missing_or_broken_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        read_onnx(tmp_path / "nope.onnx")
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a protobuf at all \x00\xff")
    with pytest.raises(ValueError, match="is not an ONNX model"):
        read_onnx(bad)


def test_non_finite_weights_name_the_node(tmp_path):
    from network_cases import tiny_onnx

    model = onnx.load_from_string(tiny_onnx(0))
    w1 = next(t for t in model.graph.initializer if t.name == "w1")
    values = numpy_helper.to_array(w1).copy()
    values[0, 0] = np.nan
    w1.CopyFrom(numpy_helper.from_array(values, "w1"))
    path = tmp_path / "nan.onnx"
    onnx.save(model, path)
    with pytest.raises(ValueError, match=r"node 2 'h' \(Dense\): NaN or infinite values in its weight"):
        read_onnx(path)


def test_an_input_shape_contradicting_the_file_is_refused(tmp_path):
    from network_cases import tiny_onnx

    from smug_opt.errors import ParameterError
    from smug_opt.network.load import load_model

    path = tmp_path / "tiny.onnx"
    path.write_bytes(tiny_onnx(0))
    assert load_model(str(path), input_shape=(5,)).input_shape == (5,)
    with pytest.raises(ParameterError, match=r"input_shape is \(1, 5\), but .* reads inputs of shape \(5,\)"):
        load_model(str(path), input_shape=(1, 5))
