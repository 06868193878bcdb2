"""``smug-opt inspect``: the network as read, its flat form, and one-line errors."""

from __future__ import annotations

import numpy as np
import pytest

from smug_opt.cli import main


def test_inspect_an_onnx_file(tmp_path, capsys):
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    weights = {"w": rng.normal(size=(3, 1, 3, 3)).astype(np.float32), "b": np.zeros(3, np.float32),
               "k": np.float32(2.0), "wd": rng.normal(size=(12, 4)).astype(np.float32)}
    nodes = [helper.make_node("Mul", ["x", "k"], ["scaled"], name="scale"),
             helper.make_node("Conv", ["scaled", "w", "b"], ["c"], name="conv"),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2], strides=[1, 1]),
             helper.make_node("Flatten", ["p"], ["f"], name="flatten"),
             helper.make_node("MatMul", ["f", "wd"], ["y"], name="fc")]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, 5, 5])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])
    initializers = [numpy_helper.from_array(v, k) for k, v in weights.items()]
    graph = helper.make_graph(nodes, "g", [x], [y], initializers)
    path = tmp_path / "tiny.onnx"
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    path.write_bytes(model.SerializeToString())
    assert main(["inspect", str(path), "--input-range", "0,1"]) == 0
    out = capsys.readouterr().out
    assert "network tiny" in out and "input  shape (1, 5, 5), layout channels_first, range (0.0, 1.0)" in out
    assert "output 4 class scores (logits)" in out
    rows = [line.split() for line in out.splitlines()]
    assert ["2", "conv", "Conv", "1", "3x3x3", "30"] in rows
    assert ["5", "flatten", "Reshape", "4", "12", "0"] in rows
    assert "84 parameters" in out  # Mul: scale and shift 2, conv 27 + 3, dense 48 + 4
    assert "preprocessing: scales the input" in out and "maxpool" in out


def test_inspect_a_torch_factory_with_declared_shape(capsys):
    pytest.importorskip("torch")
    assert main(["inspect", "network_cases:small_torch_cnn", "--input-shape", "1,12,12"]) == 0
    out = capsys.readouterr().out
    assert "network small_torch_cnn" in out and "input  shape (1, 12, 12)" in out


def test_inspect_bad_model_is_one_line_error(capsys):
    assert main(["inspect", "weights.pth"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("smug-opt inspect: error: weights.pth: a pickled PyTorch file is never loaded")
    assert "\n" not in err
