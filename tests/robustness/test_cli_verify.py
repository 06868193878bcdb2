"""``smug-opt verify`` end to end: a tiny ONNX model built here with a VNN-LIB property
written here (unsat, sat with the result file, bad input), an instance csv with resume,
and one real VNN-COMP 2021 mnistfc instance."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from smug_opt.cli import main

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

SHARED = Path(__file__).resolve().parents[3] / "shared" / "nets" / "vnncomp2021" / "benchmarks"


def _tiny_onnx(path: Path, final: str | None = None) -> None:
    """2 inputs → Gemm 4 → Relu → Gemm 2 (float32): y0 - y1 = relu(x0 + x1) - relu(x0 - x1)
    style, with known answers below; ``final``: an op type applied to the scores (LogSoftmax)."""
    from onnx import TensorProto, helper, numpy_helper

    W1 = np.array([[1.0, 1.0], [1.0, -1.0], [-1.0, 1.0], [-1.0, -1.0]], dtype=np.float32)
    b1 = np.zeros(4, dtype=np.float32)
    W2 = np.array([[1.0, 0.0, 0.0, 0.5], [0.0, 1.0, 1.0, 0.0]], dtype=np.float32)
    b2 = np.array([0.0, 0.25], dtype=np.float32)
    nodes = [helper.make_node("Gemm", ["x", "W1", "b1"], ["h"], transB=1),
             helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("Gemm", ["r", "W2", "b2"], ["z" if final else "y"], transB=1)]
    if final:
        nodes.append(helper.make_node(final, ["z"], ["y"], axis=1))
    graph = helper.make_graph(
        nodes, "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])],
        [numpy_helper.from_array(a, n) for a, n in ((W1, "W1"), (b1, "b1"), (W2, "W2"), (b2, "b2"))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.save(model, str(path))


def _spec(path: Path, lo: tuple[float, float], hi: tuple[float, float], unsafe: str) -> None:
    lines = [f"(declare-const {v}_{i} Real)" for v in "XY" for i in range(2)]
    for i in range(2):
        lines += [f"(assert (>= X_{i} {lo[i]}))", f"(assert (<= X_{i} {hi[i]}))"]
    lines.append(f"(assert {unsafe})")
    path.write_text("\n".join(lines) + "\n")


def _forward(x: np.ndarray) -> np.ndarray:
    h = np.maximum(np.array([[1, 1], [1, -1], [-1, 1], [-1, -1]]) @ x, 0)
    return np.array([[1, 0, 0, 0.5], [0, 1, 1, 0]]) @ h + np.array([0, 0.25])


def test_unsat_and_sat_with_result_file(tmp_path, capsys):
    model = tmp_path / "tiny.onnx"
    _tiny_onnx(model)
    # On [1, 2] x [1, 1.1]: y0 = x0 + x1 >= 2, y1 = x0 - x1 + 0.25 <= 1.25: y1 >= y0 never.
    _spec(tmp_path / "holds.vnnlib", (1.0, 1.0), (2.0, 1.1), "(>= Y_1 Y_0)")
    assert main(["verify", str(model), str(tmp_path / "holds.vnnlib"), "--time-limit", "20",
                 "--results", str(tmp_path / "holds.txt")]) == 0
    assert capsys.readouterr().out.strip() == "unsat"
    assert (tmp_path / "holds.txt").read_text() == "unsat\n"
    # On [-1, 1]^2 the region y1 >= y0 + 0.5 is reached (x = (1, -1): y0 = 0, y1 = 2.25).
    _spec(tmp_path / "fails.vnnlib", (-1.0, -1.0), (1.0, 1.0),
          "(or (and (>= Y_1 (+ Y_0 0.5))) (and (<= Y_0 -9)))")
    assert main(["verify", str(model), str(tmp_path / "fails.vnnlib"), "--time-limit", "20",
                 "--results", str(tmp_path / "fails.txt")]) == 0
    assert capsys.readouterr().out.strip() == "sat"
    text = (tmp_path / "fails.txt").read_text()
    assert text.startswith("sat\n((X_0 ")
    values = dict(item.strip("() \n").split() for item in text[4:].split("\n") if item.strip())
    x = np.array([float(values["X_0"]), float(values["X_1"])])
    y = _forward(x)
    assert np.all(np.abs(x) <= 1) and y[1] >= y[0] + 0.5
    assert abs(float(values["Y_1"]) - y[1]) < 1e-5


@pytest.mark.parametrize("spec, message", [
    ("(declare-const X_0 Real)\n(declare-const Y_0 Real)\n(assert (<= X_0 1))\n(assert (>= X_0 0))\n"
     "(assert (>= Y_0 0))\n", "declares 1 inputs X_i but .* takes 2"),
    ("(declare-const X_0 Real)\n(assert (forall))\n", "unsupported formula"),
])
def test_bad_property_is_one_clear_error(tmp_path, capsys, spec, message):
    model = tmp_path / "tiny.onnx"
    _tiny_onnx(model)
    (tmp_path / "bad.vnnlib").write_text(spec)
    assert main(["verify", str(model), str(tmp_path / "bad.vnnlib")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("smug-opt verify: error:") and len(err.strip().splitlines()) == 1
    import re

    assert re.search(message, err)


def _two_instances(folder: Path) -> Path:
    """An instance csv in ``folder`` over the tiny net: one spec that holds, one that fails."""
    _tiny_onnx(folder / "tiny.onnx")
    _spec(folder / "holds.vnnlib", (1.0, 1.0), (2.0, 1.1), "(>= Y_1 Y_0)")
    _spec(folder / "fails.vnnlib", (-1.0, -1.0), (1.0, 1.0), "(>= Y_1 (+ Y_0 0.5))")
    (folder / "instances.csv").write_text("tiny.onnx,holds.vnnlib,20\ntiny.onnx,fails.vnnlib,20\n")
    return folder / "instances.csv"


def test_instance_csv_with_resume(tmp_path, capsys):
    out = tmp_path / "run"
    args = ["verify", "--instances", str(_two_instances(tmp_path)), "--out", str(out)]
    assert main([*args, "--limit", "1"]) == 0
    assert "1/2 instances done: unsat 1" in capsys.readouterr().out
    assert main(args) == 1  # a run is there: resume or overwrite
    assert "--resume" in capsys.readouterr().err
    assert main([*args, "--resume"]) == 0
    assert "2/2 instances done: unsat 1, sat 1" in capsys.readouterr().out
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert [r["answer"] for r in records] == ["unsat", "sat"]
    assert records[1]["outputs"]["onnxruntime"][1] >= records[1]["outputs"]["onnxruntime"][0] + 0.5


def test_retry_unknown_runs_only_the_unknowns_again(tmp_path, capsys):
    """--retry-unknown (with --resume) runs again the instances whose last record says
    unknown, appends the new record, and the summary counts each instance's last one."""
    out = tmp_path / "run"
    args = ["verify", "--instances", str(_two_instances(tmp_path)), "--out", str(out)]
    assert main(args) == 0
    records = out / "records.jsonl"
    first, second = (json.loads(line) for line in records.read_text().splitlines())
    second.update(answer="unknown", message="time limit")  # as if the time limit had come first
    records.write_text(json.dumps(first) + "\n" + json.dumps(second) + "\n")
    capsys.readouterr()
    assert main([*args, "--retry-unknown"]) == 1  # it needs --resume
    assert "--retry-unknown goes with --resume" in capsys.readouterr().err
    assert main([*args, "--resume"]) == 0
    assert "2/2 instances done: unsat 1, sat 0, unknown 1" in capsys.readouterr().out
    assert main([*args, "--resume", "--retry-unknown"]) == 0
    assert "2/2 instances done: unsat 1, sat 1" in capsys.readouterr().out
    lines = [json.loads(line) for line in records.read_text().splitlines()]
    assert [(r["property"], r["answer"]) for r in lines] == [
        ("holds.vnnlib", "unsat"), ("fails.vnnlib", "unknown"), ("fails.vnnlib", "sat")]


def test_only_runs_the_instances_named(tmp_path, capsys):
    """--only TEXT runs the instances whose name contains TEXT; a later --resume the rest."""
    out = tmp_path / "run"
    args = ["verify", "--instances", str(_two_instances(tmp_path)), "--out", str(out)]
    assert main([*args, "--only", "fails.vnnlib"]) == 0
    assert "1/2 instances done: unsat 0, sat 1" in capsys.readouterr().out
    assert main([*args, "--resume"]) == 0
    assert "took over the lock" not in capsys.readouterr().err  # the first run released it
    lines = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert [(r["index"], r["property"], r["answer"]) for r in lines] == [
        (1, "fails.vnnlib", "sat"), (0, "holds.vnnlib", "unsat")]
    tiny = str(tmp_path / "tiny.onnx")
    assert main(["verify", tiny, str(tmp_path / "holds.vnnlib"), "--only", "x"]) == 1
    assert "--only go with --instances" in capsys.readouterr().err


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/nets/vnncomp2021 is not present")
def test_real_mnistfc_instance(tmp_path, capsys):
    """mnist-net_256x2 prop_7 at ε 0.03: every published tool that answered said sat; the
    counterexample is confirmed by onnxruntime and written in the competition's format."""
    folder = SHARED / "mnistfc"
    assert main(["verify", str(folder / "mnist-net_256x2.onnx"), str(folder / "prop_7_0.03.vnnlib"),
                 "--time-limit", "120", "--results", str(tmp_path / "r.txt")]) == 0
    assert capsys.readouterr().out.strip() == "sat"
    lines = (tmp_path / "r.txt").read_text().splitlines()
    assert lines[0] == "sat" and len(lines) == 1 + 784 + 10


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/nets/vnncomp2021 is not present")
def test_real_mnistfc_counterexample_that_long_attacks_miss(capsys):
    """mnist-net_256x2 prop_9 at ε 0.05 (sat for every tool that answered): the first
    attack's 16 long runs all end in one corner (loss 0.94) and branch and bound's descents
    found nothing in 120 s; the attack of many short runs finds it."""
    folder = SHARED / "mnistfc"
    assert main(["verify", str(folder / "mnist-net_256x2.onnx"), str(folder / "prop_9_0.05.vnnlib.gz"),
                 "--time-limit", "30"]) == 0
    assert capsys.readouterr().out.strip() == "sat"


@pytest.mark.slow
@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/nets/vnncomp2021 is not present")
def test_real_mnistfc_instance_closed_by_branch_and_bound(tmp_path, capsys):
    """mnist-net_256x2 prop_1 at ε 0.03: CROWN refutes none of the 9 disjuncts and the MILP
    path ran out of its 120 s; branch and bound proves it (as α,β-CROWN and oval did; RPM
    alone said violated)."""
    folder = SHARED / "mnistfc"
    assert main(["verify", str(folder / "mnist-net_256x2.onnx"), str(folder / "prop_1_0.03.vnnlib"),
                 "--time-limit", "120", "--results", str(tmp_path / "r.txt")]) == 0
    assert capsys.readouterr().out.strip() == "unsat"
    assert (tmp_path / "r.txt").read_text() == "unsat\n"


@pytest.mark.slow
@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/nets/vnncomp2021 is not present")
def test_real_mnistfc_counterexample_in_a_later_disjunct(capsys):
    """mnist-net_256x2 prop_0 at ε 0.05 (sat for all 8 tools that answered): no attack
    reaches it, branch and bound on the attack's nearest disjunct (5, which HiGHS finds
    infeasible) ran out of the 120 s; with a share of the time per disjunct in a first round,
    disjunct 8's search finds the counterexample in seconds."""
    folder = SHARED / "mnistfc"
    assert main(["verify", str(folder / "mnist-net_256x2.onnx"), str(folder / "prop_0_0.05.vnnlib.gz"),
                 "--time-limit", "120"]) == 0
    assert capsys.readouterr().out.strip() == "sat"


Box = tuple[tuple[float, float], tuple[float, float]]


def _boxes_spec(path: Path, boxes: list[Box], unsafe: str) -> None:
    """A property whose input boxes stand inside an ``or`` (VNN-COMP 2022's ACAS Xu prop 6 style)."""
    lines = [f"(declare-const {v}_{i} Real)" for v in "XY" for i in range(2)]
    cases = [" ".join(f"(>= X_{i} {lo[i]}) (<= X_{i} {hi[i]})" for i in range(2)) for lo, hi in boxes]
    lines.append("(assert (or " + " ".join(f"(and {c})" for c in cases) + "))")
    lines.append(f"(assert {unsafe})")
    path.write_text("\n".join(lines) + "\n")


def test_property_of_several_input_boxes(tmp_path, capsys):
    model = tmp_path / "tiny.onnx"
    _tiny_onnx(model)
    # y1 >= y0 is unreachable on both boxes (y0 = x0 + x1 >= 2 > y1 there): unsat.
    _boxes_spec(tmp_path / "holds.vnnlib", [((1.0, 1.0), (2.0, 1.1)), ((1.0, 1.0), (1.5, 1.05))],
                "(>= Y_1 Y_0)")
    assert main(["verify", str(model), str(tmp_path / "holds.vnnlib"), "--time-limit", "20"]) == 0
    assert capsys.readouterr().out.strip() == "unsat"
    # The second box reaches y1 >= y0 + 0.5 (x = (1, -1)); the first does not.
    _boxes_spec(tmp_path / "fails.vnnlib", [((1.0, 1.0), (2.0, 1.1)), ((-1.0, -1.0), (1.0, 1.0))],
                "(>= Y_1 (+ Y_0 0.5))")
    assert main(["verify", str(model), str(tmp_path / "fails.vnnlib"), "--time-limit", "20",
                 "--results", str(tmp_path / "fails.txt")]) == 0
    captured = capsys.readouterr()
    assert captured.out.strip() == "sat" and "counterexample in box 2 of 2" in captured.err
    text = (tmp_path / "fails.txt").read_text()
    values = dict(item.strip("() \n").split() for item in text[4:].split("\n") if item.strip())
    x = np.array([float(values["X_0"]), float(values["X_1"])])
    assert np.all(np.abs(x) <= 1) and _forward(x)[1] >= _forward(x)[0] + 0.5


def test_log_softmax_output_takes_rows_summing_to_zero(tmp_path, capsys):
    model = tmp_path / "tiny_log_softmax.onnx"
    _tiny_onnx(model, final="LogSoftmax")
    # log_softmax shifts both scores by one amount: y1 >= y0 + 0.5 reads as on the logits (sat).
    _spec(tmp_path / "diff.vnnlib", (-1.0, -1.0), (1.0, 1.0), "(>= Y_1 (+ Y_0 0.5))")
    assert main(["verify", str(model), str(tmp_path / "diff.vnnlib"), "--time-limit", "20"]) == 0
    assert capsys.readouterr().out.strip() == "sat"
    _spec(tmp_path / "level.vnnlib", (-1.0, -1.0), (1.0, 1.0), "(<= Y_0 -9)")
    assert main(["verify", str(model), str(tmp_path / "level.vnnlib"), "--time-limit", "20"]) == 1
    assert "ends in log_softmax: only output rows whose coefficients sum to 0" in capsys.readouterr().err
