"""Verified explanations of ONNX models (tiny nets built here with onnx.helper, in-graph
normalisation included): the returned set is robust by an exact query on another backend and
by onnxruntime on dense samples, the attack re-check passes, and ``--minimum``'s set is a
minimum (brute force over every subset, decided on another backend), never larger than the
subset-minimal one, with a lower bound that holds."""

from __future__ import annotations

import itertools

import numpy as np
import onnxruntime as ort
import pytest
from network_cases import tiny_onnx

from smug_opt.network.lower import lower
from smug_opt.robustness import RobustnessQuery, decide, explain_robust
from smug_opt.robustness.check import explanation_box
from smug_opt.robustness.explanation import label_changes
from smug_opt.robustness.minimum import shrink_counterexample

OTHER_BACKEND = "scip"
IN_PROCESS = {"isolate": False}


def _robust(result, fixed: np.ndarray, backend: str = OTHER_BACKEND) -> str:
    pre, flat = lower(result.network)
    lo, hi = explanation_box(result.x, fixed, result.eps, result.valid_range)
    query = RobustnessQuery(flat, pre, lo, hi, label_changes(flat.num_outputs, result.label))
    return decide(query, time_limit=60, backend=backend, solve_options=IN_PROCESS).answer


def _onnxruntime_labels(model: bytes, points: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    return np.array([session.run(None, {"x": p[None].astype(np.float32)})[0][0].argmax() for p in points])


@pytest.mark.parametrize("seed, eps", [(0, 0.3), (2, 0.3), (5, 0.3), (7, 0.25)])
def test_minimum_matches_brute_force_and_every_set_holds(tmp_path, seed, eps):
    model = tiny_onnx(seed)
    path = tmp_path / "tiny.onnx"
    path.write_bytes(model)
    x = np.random.default_rng(100 + seed).uniform(0, 1, 5)
    result = explain_robust(str(path), x, eps=eps, minimum=True, time_limit=60, input_range=(0.0, 1.0))
    m, s = result.minimum, result.subset
    assert result.check.passed
    assert 0 < m.size < 5  # the seeds were chosen so that some, not all, inputs must stay fixed
    assert m.size <= s.size and s.subset_minimal  # seeds 5 and 7: strictly smaller
    assert m.proven and m.lower_bound == m.size
    # the returned set is robust on another backend, and by onnxruntime on dense samples
    assert _robust(result, result.fixed) == "unsat"
    lo, hi = explanation_box(x, result.fixed, eps, (0.0, 1.0))
    rng = np.random.default_rng(seed)
    points = np.concatenate([lo + (hi - lo) * rng.random((3000, 5)),
                             np.array([np.where(c, hi, lo) for c in itertools.product([0, 1], repeat=5)])])
    assert np.all(_onnxruntime_labels(model, points) == result.label)
    # brute force: no smaller set is robust (decided on another backend)
    for size in range(m.size):
        for subset in itertools.combinations(range(5), size):
            fixed = np.zeros(5, dtype=bool)
            fixed[list(subset)] = True
            assert _robust(result, fixed) == "sat", subset


def test_shrunk_counterexample_still_breaks_the_label(tmp_path):
    path = tmp_path / "tiny.onnx"
    path.write_bytes(tiny_onnx(4))
    from smug_opt.network.onnx_reader import read_onnx

    pre, flat = lower(read_onnx(str(path), input_range=(0.0, 1.0)))
    x = np.random.default_rng(104).uniform(0, 1, 5)
    label = int(flat.forward(pre(x[None]))[-1][0].argmax())
    lo, hi = np.clip(x - 0.3, 0, 1), np.clip(x + 0.3, 0, 1)
    verdict = decide(RobustnessQuery(flat, pre, lo, hi, label_changes(3, label)), time_limit=30,
                     solve_options=IN_PROCESS)
    assert verdict.answer == "sat"
    core = shrink_counterexample(flat, pre, x, verdict.x, label, lo, hi)
    assert core is not None and 0 < core.size <= np.count_nonzero(verdict.x != x)
    # freeing the core alone (everything else fixed) is not robust
    fixed = np.ones(5, dtype=bool)
    fixed[core] = False
    box = np.where(fixed, x, lo), np.where(fixed, x, hi)
    query = RobustnessQuery(flat, pre, *box, label_changes(3, label))
    assert decide(query, time_limit=30, backend=OTHER_BACKEND, solve_options=IN_PROCESS).answer == "sat"


def test_bad_arguments_are_refused(tmp_path):
    path = tmp_path / "tiny.onnx"
    path.write_bytes(tiny_onnx(1))
    x = np.full(5, 0.5)
    with pytest.raises(ValueError, match="input range"):
        explain_robust(str(path), x, eps=0.1)
    with pytest.raises(ValueError, match="eps must be a positive"):
        explain_robust(str(path), x, eps=0.0, input_range=(0.0, 1.0))
    with pytest.raises(ValueError, match="takes 5"):
        explain_robust(str(path), np.zeros(4), eps=0.1, input_range=(0.0, 1.0))
    with pytest.raises(ValueError, match="explain_robust"):
        from smug_opt import explain

        explain(str(path), x, method="robust")
