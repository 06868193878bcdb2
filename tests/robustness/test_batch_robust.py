"""Batch explain with method robust, from Python and the command line: every record says the
size, whether it is proven subset-minimal, the minimum's bound and gap and the proof, and
every stored fixed set is robust by an exact query on another backend (SCIP) and
subset-minimal by brute force (freeing any one fixed value breaks the label there)."""

from __future__ import annotations

import json

import numpy as np
from network_cases import tiny_onnx

from smug_opt.batch import explain_many
from smug_opt.cli import main
from smug_opt.explain_settings import ExplainSettings
from smug_opt.models.resolve import network_of
from smug_opt.network.lower import lower
from smug_opt.parameters import SmugParameters
from smug_opt.robustness import RobustnessQuery, decide
from smug_opt.robustness.check import explanation_box
from smug_opt.robustness.explanation import label_changes

OTHER_BACKEND = "scip"


def _answer(model: str, x: np.ndarray, fixed: np.ndarray, eps: float, label: int) -> str:
    pre, flat = lower(network_of(model, input_range=(0.0, 1.0)))
    lo, hi = explanation_box(x, fixed, eps, (0.0, 1.0))
    query = RobustnessQuery(flat, pre, lo, hi, label_changes(flat.num_outputs, label))
    return decide(query, time_limit=60, backend=OTHER_BACKEND, solve_options={"isolate": False}).answer


def _check_rows(model: str, inputs: np.ndarray, records: list[dict], masks: dict[int, np.ndarray],
                eps: float) -> None:
    assert len(records) == len(inputs)
    assert any(r["subset_minimal"]["subset_minimal"] for r in records)  # the brute force below runs
    for r in records:
        assert r["status"] == "ROBUST" and r["method"] == "robust" and r["eps"] == eps
        assert r["proof"] in ("exact", "solver") and r["check"]["passed"]
        assert r["mask_size"] == r["size"] == int(masks[r["index"]].sum())
        m = r["minimum"]
        assert m["lower_bound"] <= m["size"] <= r["subset_minimal"]["size"]
        assert m["gap"] == m["size"] - m["lower_bound"]
        x, fixed = inputs[r["index"]], masks[r["index"]].reshape(-1)
        assert _answer(model, x, fixed, eps, r["target"]) == "unsat"
        if r["subset_minimal"]["subset_minimal"] and r["size"] == r["subset_minimal"]["size"]:
            for v in np.flatnonzero(fixed):
                fewer = fixed.copy()
                fewer[v] = False
                assert _answer(model, x, fewer, eps, r["target"]) == "sat"


def test_batch_run_folder_holds_robust_records_and_fixed_sets(tmp_path):
    model = tmp_path / "tiny.onnx"
    model.write_bytes(tiny_onnx(2))
    inputs = np.random.default_rng(12).uniform(0, 1, (3, 5))
    settings = ExplainSettings(params=SmugParameters(method="robust", eps=0.3, minimum=True),
                               time_limit=60, input_range=(0.0, 1.0))
    run = explain_many(str(model), inputs, settings=settings, out=tmp_path / "run")
    items = list(run)
    assert run.failed == 0 and run.without_mask == 0
    records = [json.loads(line) for line in (tmp_path / "run" / "records.jsonl").read_text().splitlines()]
    masks = {e.index: e.mask for e in items}
    _check_rows(str(model), inputs, records, masks, 0.3)
    config = json.loads((tmp_path / "run" / "run.json").read_text())
    assert config["config"]["method"] == "robust" and config["config"]["eps"] == 0.3


def test_cli_batch_with_method_robust_resumes(tmp_path):
    model = tmp_path / "tiny.onnx"
    model.write_bytes(tiny_onnx(5))
    inputs = np.random.default_rng(15).uniform(0, 1, (2, 5))
    np.save(tmp_path / "rows.npy", inputs)
    args = ["explain", "--model", str(model), "--input", str(tmp_path / "rows.npy"), "--input-range", "0,1",
            "--method", "robust", "--eps", "0.3", "--time-limit", "60", "--out", str(tmp_path / "run"),
            "--quiet"]
    assert main(args) == 0
    records = [json.loads(line) for line in (tmp_path / "run" / "records.jsonl").read_text().splitlines()]
    arrays = np.load(next((tmp_path / "run" / "arrays").glob("*.npz")))
    masks = dict(zip(arrays["index"].tolist(), arrays["mask"], strict=True))
    assert all("minimum" not in r for r in records)  # no --minimum: no minimum search
    for r in records:
        r["minimum"] = {"lower_bound": 0, "size": r["size"], "gap": r["size"]}
    _check_rows(str(model), inputs, records, masks, 0.3)
    assert main([*args, "--resume"]) == 0  # all done: nothing explained again
    assert len((tmp_path / "run" / "records.jsonl").read_text().splitlines()) == 2
