"""The stress case on models it reads from files: an ONNX CNN built here with onnx.helper,
through the CLI, each mask checked by onnxruntime; images recovered from VNN-LIB specs."""

from __future__ import annotations

import argparse
import gzip

import numpy as np
import pytest

from smug_opt.bench.records import RESULTS_FILE, read_records
from smug_opt.cli import stress as cli_stress
from smug_opt.data.vnnlib import read_spec_image, spec_images

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")


def _onnx_cnn(path, rng: np.random.Generator) -> None:
    """(1, 1, 5, 5) → Conv 2×2 (3 filters, pad 1) → Relu → MaxPool 2×2 → Flatten → Gemm → 3."""
    from onnx import TensorProto, helper, numpy_helper

    conv_w = rng.normal(size=(3, 1, 2, 2)).astype(np.float32)
    conv_b = (0.2 * rng.normal(size=3)).astype(np.float32)
    dense_w = rng.normal(size=(3, 48)).astype(np.float32)  # pooled 3x4x4
    dense_b = (0.2 * rng.normal(size=3)).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "cw", "cb"], ["c"], kernel_shape=[2, 2], pads=[1, 1, 0, 0]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[1, 1]),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("Gemm", ["f", "dw", "db"], ["y"], transB=1),
    ]
    graph = helper.make_graph(
        nodes, "tiny-cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 1, 5, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])],
        [numpy_helper.from_array(conv_w, "cw"), numpy_helper.from_array(conv_b, "cb"),
         numpy_helper.from_array(dense_w, "dw"), numpy_helper.from_array(dense_b, "db")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))


def _write_spec(path, x: np.ndarray, label: int, eps: float) -> None:
    lo, hi = np.clip(x - eps, 0.0, 1.0), np.clip(x + eps, 0.0, 1.0)
    lines = [f"; Mnist property with label: {label}."]
    lines += [f"(declare-const X_{i} Real)" for i in range(x.size)]
    lines += [f"(declare-const Y_{j} Real)" for j in range(10)]
    for i in range(x.size):
        lines += [f"(assert (<= X_{i} {float(hi[i])!r}))", f"(assert (>= X_{i} {float(lo[i])!r}))"]
    others = " ".join(f"(and (>= Y_{j} Y_{label}))" for j in range(10) if j != label)
    lines += [f"(assert (or {others}))"]
    with gzip.open(path, "wt") as handle:
        handle.write("\n".join(lines) + "\n")


def test_spec_images_recover_the_centre_and_the_clipped_sides(tmp_path) -> None:
    x = np.array([0.0, 0.01, 0.5, 0.99, 1.0, 0.25], dtype=np.float32).astype(np.float64)
    _write_spec(tmp_path / "prop_0_0.03.vnnlib.gz", x, 7, 0.03)
    _write_spec(tmp_path / "prop_0_0.05.vnnlib.gz", x, 7, 0.05)  # the same image: returned once
    image = read_spec_image(tmp_path / "prop_0_0.03.vnnlib.gz")
    assert image.label == 7 and image.name == "prop_0_0.03"
    np.testing.assert_allclose(image.x, x, atol=1e-7)
    assert image.x[0] == 0.0  # a black pixel stays exactly 0 (no mask cell)
    assert len(spec_images(tmp_path)) == 1
    with pytest.raises(ValueError, match="no .vnnlib"):
        spec_images(tmp_path / "nothing-here")


def test_stress_an_onnx_cnn_through_the_cli(tmp_path, monkeypatch, capsys) -> None:
    """``smug-opt stress mnist --model net.onnx --specs DIR``: every mask proven, verified
    exactly and kept by onnxruntime's own forward pass of the file."""
    import onnxruntime

    rng = np.random.default_rng(3)
    model = tmp_path / "tiny.onnx"
    _onnx_cnn(model, rng)
    session = onnxruntime.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    specs = tmp_path / "specs"
    specs.mkdir()
    for k in range(2):
        x = (rng.uniform(size=25) * (rng.uniform(size=25) > 0.3)).astype(np.float32)
        label = int(np.argmax(session.run(None, {"x": x.reshape(1, 1, 5, 5)})[0]))
        _write_spec(specs / f"prop_{k}_0.02.vnnlib.gz", x.astype(np.float64), label, 0.02)
    monkeypatch.setenv("SMUG_OPT_CACHE", str(tmp_path / "cache"))
    parser = argparse.ArgumentParser()
    cli_stress.add_parser(parser.add_subparsers(dest="command"))
    out = tmp_path / "run"
    args = parser.parse_args(["stress", "mnist", "--model", str(model), "--specs", str(specs), "--n", "2",
                              "--backend", "highs", "--time-limit", "60", "--out", str(out), "--quiet"])
    assert cli_stress.run(args) == 0
    assert "| highs | 2/2 |" in capsys.readouterr().out
    records = read_records(out / RESULTS_FILE)
    assert len(records) == 2
    for r in records:
        assert r.status.name == "OPTIMAL" and r.verified is True
        assert r.checks["verified_in_model"] is True and r.checks["runtime"] == "float32"
        assert r.checks["runtime_margin"] > 0 and r.checks["mask_pixels"] <= r.objective


def test_cifar10_needs_specs(tmp_path) -> None:
    parser = argparse.ArgumentParser()
    cli_stress.add_parser(parser.add_subparsers(dest="command"))
    model = tmp_path / "tiny.onnx"
    _onnx_cnn(model, np.random.default_rng(0))
    args = parser.parse_args(["stress", "cifar10", "--model", str(model), "--out", str(tmp_path / "o")])
    with pytest.raises(ValueError, match="--specs"):
        cli_stress.run(args)


def test_digits_a_model_cannot_read_are_one_error_naming_both_shapes(tmp_path) -> None:
    parser = argparse.ArgumentParser()
    cli_stress.add_parser(parser.add_subparsers(dest="command"))
    model = tmp_path / "tiny.onnx"
    _onnx_cnn(model, np.random.default_rng(0))  # reads 1×5×5 images
    out = str(tmp_path / "o")
    args = parser.parse_args(["stress", "mnist", "--model", str(model), "--n", "1", "--out", out])
    with pytest.raises(ValueError, match=r"shape \(1, 5, 5\); MNIST digits have shape \(28, 28, 1\)"):
        cli_stress.run(args)
