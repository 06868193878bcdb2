"""``smug-opt explain --method robust`` budgets each query in counted work by default
(``--query-work``): the explanation the command writes is the same however the clock runs,
while ``--query-time`` (seconds per query) gives way to a leaping clock; the flags that do
not fit are refused before any model loads."""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path

import numpy as np
import pytest
from flat_nets import mlp

from smug_opt.cli import main
from smug_opt.network.flat import FlatNetwork
from smug_opt.query_work import DEFAULT_QUERY_WORK, Work


def _onnx(net: FlatNetwork) -> bytes:
    """``net`` (linear and ReLU layers in a chain) as an ONNX model of Gemm and Relu nodes."""
    from onnx import TensorProto, helper, numpy_helper

    nodes, weights, last = [], [], "x"
    for i, layer in enumerate(net.layers[1:]):
        out = "out" if i == len(net.layers) - 2 else f"v{i}"
        if layer.kind == "relu":
            nodes.append(helper.make_node("Relu", [last], [out]))
        else:
            W, b = layer.affine
            weights += [numpy_helper.from_array(W.toarray().astype(np.float32), f"w{i}"),
                        numpy_helper.from_array(b.astype(np.float32), f"b{i}")]
            nodes.append(helper.make_node("Gemm", [last, f"w{i}", f"b{i}"], [out], transB=1))
        last = out
    graph = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, net.layers[0].size])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, net.num_outputs])], weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def _explain(folder: Path, name: str, *flags: str) -> tuple[dict, np.ndarray]:
    out = folder / name
    assert main(["explain", "--model", str(folder / "mlp.onnx"), "--input", str(folder / "x.npy"),
                 "--input-range", "0,1", "--method", "robust", "--eps", "0.6", "--time-limit", "1000000",
                 "--out", str(out), "--quiet", *flags]) == 0
    return json.loads((out / "record.json").read_text()), np.load(out / "fixed.npy")


def _leaping(monkeypatch: pytest.MonkeyPatch, leap: float) -> None:
    """Every read of the monotonic clock jumps ``leap`` seconds further."""
    real, reads = time.monotonic, itertools.count(1)
    monkeypatch.setattr(time, "monotonic", lambda: real() + leap * next(reads))


@pytest.mark.slow  # 4-7 s: three explanations through the command line
def test_the_default_work_budget_gives_the_same_explanation_under_a_leaping_clock(tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    (tmp_path / "mlp.onnx").write_bytes(_onnx(mlp(rng, [6, 16, 16, 3])))
    np.save(tmp_path / "x.npy", rng.uniform(0, 1, 6))
    calm, calm_fixed = _explain(tmp_path, "calm")
    assert calm["query_work"] == vars(DEFAULT_QUERY_WORK) and calm["check"]["passed"]
    assert calm["subset_minimal"]["subset_minimal"] and 0 < calm["size"] < 6
    _leaping(monkeypatch, 1.0)
    leaped, leaped_fixed = _explain(tmp_path, "leaped")
    assert np.array_equal(leaped_fixed, calm_fixed)
    counts = ("size", "necessary", "undecided", "queries")
    assert [leaped["subset_minimal"][c] for c in counts] == [calm["subset_minimal"][c] for c in counts]
    timed, timed_fixed = _explain(tmp_path, "timed", "--query-time", "2")  # the leaps reach the queries
    assert timed["query_work"] is None and timed["subset_minimal"]["undecided"] > 0
    assert not np.array_equal(timed_fixed, calm_fixed)


def test_the_default_work_budget_is_the_documented_one_and_caps_wide_networks(capsys):
    """The README's and benchmarks/robust's default, 2048,500,1048576: the VeriVital
    rewrite's 57,888 ReLUs get 18 domains (2048 of them ran out of memory), the MLPs 2048."""
    assert Work(2048, 500, 1_048_576) == DEFAULT_QUERY_WORK
    assert [DEFAULT_QUERY_WORK.domains_for(n) for n in (20, 512, 57_888)] == [2048, 2048, 18]
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert "(default 2048,500,1048576)" in readme
    with pytest.raises(SystemExit):
        main(["explain", "--help"])
    assert "default 2048,500,1048576:" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["--query-work", "64,10"], "--query-work and --query-time are for --method robust"),
    (["--query-time", "2"], "--query-work and --query-time are for --method robust"),
    (["--method", "robust", "--eps", "0.1", "--query-work", "64,10", "--query-time", "2"],
     "give --query-work or --query-time, not both"),
    (["--method", "robust", "--eps", "0.1", "--query-work", "64"], "DOMAINS,NODES"),
    (["--method", "robust", "--eps", "0.1", "--query-work", "0,10"], "domains must be an integer >= 1"),
    (["--method", "robust", "--eps", "0.1", "--backend", "z3"],
     "give a time per query instead (--query-time"),
])
def test_budget_flags_that_do_not_fit_are_refused(tmp_path, capsys, argv, message):
    assert main(["explain", *argv, "--out", str(tmp_path / "o")]) != 0
    assert message in capsys.readouterr().err


@pytest.mark.slow  # 5-14 s: a batch run and a single run through the command line
def test_a_batch_run_takes_the_work_budget_and_explains_as_single_runs_do(tmp_path):
    """A batch's robustness queries take the same default work budget as one input's (they
    took 5 s each before): each row's fixed set is the single run's, and the run records it."""
    rng = np.random.default_rng(3)
    (tmp_path / "mlp.onnx").write_bytes(_onnx(mlp(rng, [6, 16, 16, 3])))
    rows = rng.uniform(0, 1, (1, 6))
    (tmp_path / "inputs").mkdir()
    np.save(tmp_path / "inputs" / "a.npy", rows[0])  # a folder: a batch run
    assert main(["explain", "--model", str(tmp_path / "mlp.onnx"), "--input", str(tmp_path / "inputs"),
                 "--input-range", "0,1", "--method", "robust", "--eps", "0.6", "--time-limit", "1000000",
                 "--out", str(tmp_path / "run"), "--quiet"]) == 0
    config = json.loads((tmp_path / "run" / "run.json").read_text())["config"]
    assert config["query_work"] == vars(DEFAULT_QUERY_WORK)
    arrays = np.load(next((tmp_path / "run" / "arrays").glob("*.npz")))
    batch = dict(zip(arrays["index"].tolist(), arrays["mask"], strict=True))
    for i, x in enumerate(rows):
        np.save(tmp_path / "x.npy", x)
        record, fixed = _explain(tmp_path, f"single{i}")
        assert record["query_work"] == vars(DEFAULT_QUERY_WORK)
        assert np.array_equal(batch[i].reshape(-1), fixed.reshape(-1))


@pytest.mark.parametrize("argv, message", [
    (["--query-work", "64,10"], "--query-work and --query-time are for --methods robust"),
    (["--methods", "robust", "--eps", "0.1", "--query-work", "64,10", "--query-time", "2"],
     "give --query-work or --query-time, not both"),
    (["--methods", "robust", "--eps", "0.1", "--query-work", "64"], "DOMAINS,NODES"),
])
def test_evaluate_refuses_budget_flags_that_do_not_fit(tmp_path, capsys, argv, message):
    assert main(["evaluate", *argv, "--out", str(tmp_path / "o")]) != 0
    assert message in capsys.readouterr().err


def test_evaluate_passes_the_work_budget_to_its_robust_queries(tmp_path):
    """``evaluate(..., query_work=...)`` reaches the explanation (its record says the budget)."""
    from smug_opt.batch import ModelRef
    from smug_opt.evaluate import evaluate
    from smug_opt.models.resolve import as_adapter

    rng = np.random.default_rng(4)
    (tmp_path / "mlp.onnx").write_bytes(_onnx(mlp(rng, [16, 12, 3])))
    image = rng.uniform(0, 1, (1, 4, 4, 1))
    budget = Work(64, 10)
    model = ModelRef(str(tmp_path / "mlp.onnx"), None, None, (0.0, 1.0))
    label = int(np.argmax(as_adapter(model.name, input_range=(0.0, 1.0)).predict(image)[0]))
    result = evaluate(model, image, [label], ["robust"], eps=0.2, query_work=budget,
                      time_limit=60, progress=False, out_dir=tmp_path / "eval")
    outcome = result.outcomes[0]["robust"]
    assert outcome.error is None and outcome.status == "ROBUST" and outcome.details["check"]["passed"]
    config = json.loads((tmp_path / "eval" / "run.json").read_text())["config"]
    assert config["query_work"] == vars(budget)
