"""The evaluation runner end to end on toy predictors (fast), plus one pass with a Keras CNN."""

import json
import math
import os
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest

from smug_opt.evaluate import METHODS, Box, evaluate, table_markdown
from smug_opt.evaluate.results import EvaluationResult

HIT, MISS = 0.9, 0.01


def fill_detector(batch: np.ndarray) -> np.ndarray:
    """Confidence grows with the share of the crop that the bright square fills."""
    fill = (batch.reshape(len(batch), -1) > 0.5).mean(axis=1)
    p = MISS + (HIT - MISS) * fill
    return np.stack([1 - p, p], axis=1)


def squares(n: int = 3) -> tuple[np.ndarray, list[Box]]:
    images = np.zeros((n, 30, 30, 1))
    boxes = []
    for i in range(n):
        box = Box(3 * i, 6 + 3 * i, 3 * i + 6, 12 + 3 * i)  # 2x2 cells of the 10x10 grid
        images[i, box.top : box.bottom, box.left : box.right] = 1.0
        boxes.append(box)
    return images, boxes


def test_box_methods_on_images_give_the_paper_table(tmp_path):
    images, boxes = squares()
    methods = ["centerbox", "maxbox", "optbox", "groundtruth"]
    result = evaluate(
        fill_detector, images, [1, 1, 1], methods, boxes=boxes, out_dir=tmp_path, progress=False
    )
    assert isinstance(result, EvaluationResult) and result.modality == "image"
    by = {s.method: s for s in result.summaries}
    best = math.log(0.05) - math.log(HIT)
    for i, box in enumerate(boxes):
        assert result.outcomes[i]["optbox"].lsc.box == box
        assert result.outcomes[i]["groundtruth"].lsc.lsc == pytest.approx(best)
    assert by["maxbox"].sparsity.value == 1.0
    assert by["optbox"].sparsity.value == pytest.approx(0.04)
    assert by["groundtruth"].lsc.median == pytest.approx(best)
    # OptBox is left out of Win%; the exact ground-truth box wins every input.
    assert by["optbox"].win is None and by["groundtruth"].win.value == 1.0
    assert by["maxbox"].win.value == 0.0
    assert by["groundtruth"].deletion.value < by["maxbox"].deletion.value
    table = (tmp_path / "table.md").read_text()
    assert table == table_markdown(result.summaries)
    win_row = next(line for line in table.splitlines() if line.startswith("| Win%"))
    assert [c.strip(" |") for c in win_row.split(" | ")[3:5]] == ["–", "100.0 [43.9, 100.0]"]
    payload = json.loads((tmp_path / "table.json").read_text())
    assert payload["methods"] == methods and payload["n"] == 3
    assert payload["metrics"]["optbox"]["win"] is None
    records = [json.loads(line) for line in (tmp_path / "records.jsonl").read_text().splitlines()]
    assert len(records) == 12 and records[2]["box"] == list(boxes[0])
    png = (tmp_path / "examples.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"


def test_groundtruth_defaults_to_the_tightest_box_of_non_zero_pixels():
    images, boxes = squares(2)
    result = evaluate(fill_detector, images, [1, 1], ["groundtruth", "maxbox"], progress=False)
    assert [o["groundtruth"].lsc.box for o in result.outcomes] == boxes


def test_parallel_workers_give_the_same_results():
    from smug_opt.executors import LocalPoolExecutor

    images, _ = squares(4)
    a = evaluate(fill_detector, images, [1] * 4, ["centerbox", "optbox"], progress=False)
    with LocalPoolExecutor(2) as pool:
        b = evaluate(fill_detector, images, [1] * 4, ["centerbox", "optbox"], executor=pool,
                     chunk_size=1, progress=False)
    untimed = [[replace(s, median_seconds=0.0) for s in r.summaries] for r in (a, b)]
    assert untimed[0] == untimed[1]


class _Interrupt:
    """fill_detector that is interrupted (as by Ctrl-C) on its ``after``-th call."""

    def __init__(self, after: int) -> None:
        self.calls, self.after = 0, after

    def __call__(self, batch: np.ndarray) -> np.ndarray:
        self.calls += 1
        if self.calls == self.after:
            raise KeyboardInterrupt
        return fill_detector(batch)


def test_interrupted_evaluation_resumes_without_redoing_finished_inputs(tmp_path):
    images, boxes = squares(5)
    methods = ["centerbox", "optbox", "groundtruth"]
    full = _Interrupt(after=10**9)
    clean = evaluate(full, images, [1] * 5, methods, boxes=boxes, progress=False,
                     out_dir=tmp_path / "clean")
    interrupted = _Interrupt(after=40)  # 16 predict calls per input: stops in the third
    with pytest.raises(KeyboardInterrupt):
        evaluate(interrupted, images, [1] * 5, methods, boxes=boxes, progress=False, chunk_size=1,
                 out_dir=tmp_path / "run")
    stored = (tmp_path / "run" / "inputs.jsonl").read_text().splitlines()
    assert 1 <= len(stored) < 5
    with pytest.raises(ValueError, match="--resume"):
        evaluate(fill_detector, images, [1] * 5, methods, boxes=boxes, progress=False,
                 out_dir=tmp_path / "run")
    counting = _Interrupt(after=10**9)
    resumed = evaluate(counting, images, [1] * 5, methods, boxes=boxes, progress=False,
                       out_dir=tmp_path / "run", resume=True)
    assert counting.calls < full.calls  # finished inputs were not redone
    untimed = [[replace(s, median_seconds=0.0) for s in r.summaries] for r in (clean, resumed)]
    assert untimed[0] == untimed[1]
    records = [json.loads(line) for line in (tmp_path / "run" / "records.jsonl").read_text().splitlines()]
    assert sorted((r["input"], r["method"]) for r in records) == sorted(
        (i, m) for i in range(5) for m in methods)


def test_text_methods_score_against_rationales():
    def needs_five_and_seven(batch: np.ndarray) -> np.ndarray:
        hits = (batch == 5).any(axis=1).astype(int) + (batch == 7).any(axis=1)
        return np.array([0.2, 0.6, 0.95])[hits]

    tokens = np.array([[3, 5, 1, 7, 0, 0], [7, 2, 5, 4, 9, 0], [2, 3, 4, 1, 1, 0]])
    rationales = np.isin(tokens, [5, 7])
    result = evaluate(
        needs_five_and_seven,
        tokens,
        [1, 1, 1],
        ["sis", "groundtruth"],
        rationales=rationales,
        sis_threshold=0.8,
        progress=False,
    )
    assert result.modality == "text"
    sis = result.outcomes[0]["sis"]
    np.testing.assert_array_equal(sis.mask, rationales[0])
    assert sis.sparsity == pytest.approx(2 / 4) and sis.precision == 1.0 and sis.recall == 1.0
    assert sis.lsc is None
    # Input 2 has neither word: its confidence is below the threshold, so SIS fails there.
    assert result.outcomes[2]["sis"].error.startswith("map: confidence 0.2")
    by = {s.method: s for s in result.summaries}
    assert by["sis"].failures == 1 and by["sis"].precision.value == 1.0
    assert by["sis"].lsc is None and by["sis"].win is None


@pytest.mark.parametrize(
    ("methods", "message"),
    [
        (["nope"], r"unknown method\(s\) \['nope'\]; choose from"),
        (["sis"], "do not apply to image inputs"),
        (["ig"], "need the model.s gradients: a Keras model"),
        ([], "no method given"),
        (["maxbox", "maxbox"], "listed twice"),
    ],
)
def test_bad_method_lists_are_rejected_up_front(methods, message):
    images, _ = squares(1)
    with pytest.raises(ValueError, match=message):
        evaluate(fill_detector, images, [1], methods, progress=False)


def test_bad_inputs_labels_and_boxes_are_rejected():
    images, boxes = squares(2)
    with pytest.raises(ValueError, match="labels must be 2 integers"):
        evaluate(fill_detector, images, [1], ["maxbox"], progress=False)
    with pytest.raises(ValueError, match="boxes must have one entry per input"):
        evaluate(fill_detector, images, [1, 1], ["maxbox"], boxes=boxes[:1], progress=False)
    with pytest.raises(ValueError, match=r"images \(N, H, W, C\) or integer token ids"):
        evaluate(fill_detector, images[:, :, :, 0], [1, 1], ["maxbox"], progress=False)
    with pytest.raises(ValueError, match="outside an input of shape"):
        evaluate(
            fill_detector, images, [1, 1], ["groundtruth"], boxes=[None, Box(0, 0, 31, 5)], progress=False
        )
    tokens = np.array([[3, 5, 0], [7, 1, 0]])
    with pytest.raises(ValueError, match=r"rationale must be a \(T,\)=\(3,\) token mask; input 1"):
        evaluate(fill_detector, tokens, [1, 1], ["sis"], rationales=[np.ones(3), np.ones(4)], progress=False)
    with pytest.raises(TypeError, match="got int"):
        evaluate(3, images, [1, 1], ["maxbox"], progress=False)


def test_every_registered_method_is_described():
    assert set(METHODS) == {
        "smug",
        "smug_base",
        "ig",
        "gradcam",
        "centerbox",
        "maxbox",
        "optbox",
        "groundtruth",
        "sis",
        "robust",
    }
    assert all(m.description and m.modalities for m in METHODS.values())


def test_importing_the_package_loads_neither_tensorflow_nor_matplotlib():
    code = (
        "import sys, smug_opt.evaluate; "
        "print([m for m in ('tensorflow', 'keras', 'matplotlib') if m in sys.modules])"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_gradient_methods_run_with_a_keras_cnn():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    keras = pytest.importorskip("keras")
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((30, 30, 1)),
            keras.layers.Conv2D(4, 3, activation="relu"),
            keras.layers.GlobalAveragePooling2D(),
            keras.layers.Dense(2, activation="softmax"),
        ]
    )
    images, _ = squares(2)
    result = evaluate(
        model, images.astype(np.float32), [1, 1], ["ig", "gradcam", "centerbox"], ig_steps=8, progress=False
    )
    for per_input in result.outcomes:
        assert per_input["ig"].saliency.shape == (30, 30) and per_input["ig"].mask is None
        assert per_input["ig"].error is None and np.isfinite(per_input["ig"].deletion_auc)
    by = {s.method: s for s in result.summaries}
    assert by["ig"].sparsity is None and by["centerbox"].sparsity is not None


def test_smug_and_smug_base_flow_through_the_runner():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    keras = pytest.importorskip("keras")
    pytest.importorskip("smug_opt.explanation")
    pytest.importorskip("highspy")
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((30, 30, 1)),
            keras.layers.Conv2D(4, 5, strides=3, activation="relu"),
            keras.layers.Flatten(),
            keras.layers.Dense(2, activation="softmax"),
        ]
    )
    images, _ = squares(2)
    result = evaluate(
        model,
        images.astype(np.float32),
        [1, 1],
        ["smug", "smug_base"],
        k=10,
        cell=3,
        time_limit=20,
        progress=False,
    )
    for per_input in result.outcomes:
        smug, base = per_input["smug"], per_input["smug_base"]
        assert smug.error is None or smug.error.startswith("lsc:"), smug.error
        assert base.error is None, base.error
        assert not np.any(smug.mask & ~base.mask)  # the solver only drops cells of SMUG_base
        assert np.all(smug.saliency[~smug.mask] == 0)
        assert smug.sparsity <= base.sparsity


def test_smug_and_smug_base_share_one_integrated_gradients_per_input(monkeypatch):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    keras = pytest.importorskip("keras")
    pytest.importorskip("highspy")
    import importlib

    from smug_opt.explanation import explain

    # the package re-exports the function under the module's name
    ig_module = importlib.import_module("smug_opt.models.integrated_gradients")

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((30, 30, 1)),
                              keras.layers.Conv2D(4, 5, strides=3, activation="relu"),
                              keras.layers.Flatten(), keras.layers.Dense(2, activation="softmax")])
    images, _ = squares(2)
    images = images.astype(np.float32)
    expected = [explain(model, x, method="smug_base", k=10, cell=3, target=1).mask for x in images]
    real, calls = ig_module.integrated_gradients, []

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(ig_module, "integrated_gradients", counted)
    result = evaluate(model, images, [1, 1], ["smug", "smug_base"], k=10, cell=3, time_limit=20,
                      progress=False)
    assert len(calls) == 2  # one per input, not one per method and input
    for per_input, mask in zip(result.outcomes, expected, strict=True):
        assert np.array_equal(per_input["smug_base"].mask, mask)  # each input's own IG


def test_curve_steps_set_the_deletion_and_insertion_points(tmp_path):
    from smug_opt.evaluate import deletion_curve, insertion_curve

    images, _ = squares(1)
    coarse = evaluate(fill_detector, images, [1], ["groundtruth"], cell=2, curve_steps=4, out_dir=tmp_path,
                      progress=False)
    fine = evaluate(fill_detector, images, [1], ["groundtruth"], cell=2, progress=False)
    saliency = fine.outcomes[0]["groundtruth"].saliency
    for result, steps in ((coarse, 4), (fine, 100)):
        outcome = result.outcomes[0]["groundtruth"]
        for auc, curve in ((outcome.deletion_auc, deletion_curve), (outcome.insertion_auc, insertion_curve)):
            assert auc == curve(fill_detector, images[0], 1, saliency, cell=2, steps=steps).auc
    assert coarse.outcomes[0]["groundtruth"].deletion_auc != fine.outcomes[0]["groundtruth"].deletion_auc
    assert json.loads((tmp_path / "run.json").read_text())["config"]["curve_steps"] == 4
    with pytest.raises(ValueError, match="curve_steps must be >= 1"):
        evaluate(fill_detector, images, [1], ["groundtruth"], curve_steps=0, progress=False)
