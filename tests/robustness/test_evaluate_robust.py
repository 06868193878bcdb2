"""``evaluate`` with method robust on real held-out digits and the embedded CNN: each
record carries the verified explanation's size, subset-minimality, proof and re-check, its
mask is the fixed pixels, and each fixed set is robust by an exact query on another backend
(SCIP); a run without ``eps`` records the method as failed with the reason."""

from __future__ import annotations

import json

import numpy as np
import pytest

from smug_opt.data.mnist import load_digits
from smug_opt.evaluate import evaluate
from smug_opt.models.resolve import network_of
from smug_opt.network.lower import lower
from smug_opt.robustness import RobustnessQuery, decide
from smug_opt.robustness.check import explanation_box
from smug_opt.robustness.explanation import label_changes

EPS = 0.05


@pytest.mark.slow  # two CNN explanations and two exact SCIP queries: about 2 minutes
def test_evaluate_records_robust_maps_that_hold(tmp_path):
    digits = load_digits()
    network = network_of("mnist-cnn")
    pre, flat = lower(network)
    images = digits.x_test[:2].astype(np.float64)
    labels = [int(flat.forward(pre(x.reshape(1, -1)))[-1][0].argmax()) for x in images]
    result = evaluate("mnist-cnn", images, labels, ["robust", "centerbox"], eps=EPS, time_limit=20,
                      progress=False, out_dir=tmp_path)
    records = [json.loads(line) for line in (tmp_path / "records.jsonl").read_text().splitlines()]
    robust = [r for r in records if r["method"] == "robust"]
    assert len(robust) == 2
    for r, x, outcome in zip(robust, images, [o["robust"] for o in result.outcomes], strict=True):
        assert r["status"] == "ROBUST" and r["proof"] in ("exact", "solver") and not r["error"]
        details = r["details"]
        assert details["eps"] == EPS and details["check"]["passed"]
        assert details["size"] == int(outcome.mask.sum()) and outcome.mask.shape == (28, 28)
        lo, hi = explanation_box(x.reshape(-1), outcome.mask.reshape(-1), EPS, (0.0, 1.0))
        query = RobustnessQuery(flat, pre, lo, hi, label_changes(10, r["details"]["target"]))
        verdict = decide(query, time_limit=120, backend="scip", solve_options={"isolate": False})
        assert verdict.answer == "unsat"
    assert json.loads((tmp_path / "run.json").read_text())["config"]["eps"] == EPS


def test_evaluate_robust_without_eps_records_the_reason():
    images = load_digits().x_test[:1].astype(np.float64)
    result = evaluate("mnist-cnn", images, [0], ["robust"], progress=False)
    assert "eps" in result.outcomes[0]["robust"].error
