"""``smug-opt evaluate`` end to end on the embedded suites (real models, real digits)."""

import json
import subprocess
import sys

import numpy as np
import pytest

from smug_opt.data.mnist import pick_test_digits
from smug_opt.evaluate.baselines import grad_cam
from smug_opt.models import zoo


def test_grad_cam_on_the_embedded_sequential_cnn():
    model = zoo.load("mnist-cnn", progress=False)
    _, xs, ys = pick_test_digits(2)
    for x, y in zip(xs, ys, strict=True):
        cam = grad_cam(model, x, int(y))
        assert cam.shape == (28, 28) and np.isfinite(cam).all() and cam.max() > 0


def _run(*args: str) -> subprocess.CompletedProcess:
    """``smug-opt evaluate`` in a fresh process, as a user runs it."""
    return subprocess.run([sys.executable, "-m", "smug_opt", "evaluate", *args, "--quiet"],
                          capture_output=True, text=True, timeout=600)


def _run_here(capfd: pytest.CaptureFixture[str], *args: str) -> subprocess.CompletedProcess:
    """``smug-opt evaluate`` through its entry point in this process (TensorFlow and the
    models already loaded), where a fresh process would check nothing more."""
    from smug_opt.cli import main

    try:
        code = main(["evaluate", *args, "--quiet"])
    except SystemExit as exit_:  # argparse's usage errors
        code = exit_.code if isinstance(exit_.code, int) else 1
    out, err = capfd.readouterr()
    return subprocess.CompletedProcess(args, code, out, err)


def test_evaluate_mnist_suite(tmp_path):
    proc = _run("--n", "2", "--methods", "smug,smug_base,gradcam,centerbox,maxbox,groundtruth",
                "--k", "50", "--cell", "4", "--road-levels", "0.2,0.8", "--sanity-stages", "1",
                "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "LSC" in proc.stdout and "Win%" in proc.stdout
    table = json.loads((tmp_path / "table.json").read_text())
    assert table  # one entry per method
    records = [json.loads(line) for line in (tmp_path / "records.jsonl").read_text().splitlines()]
    assert len(records) == 2 * 6
    assert not [r for r in records if r["method"] in ("smug", "gradcam") and r["error"]]
    assert all(r["road_morf"] is not None and r["sanity_spearman"] is not None for r in records
               if r["method"] in ("gradcam", "centerbox"))
    assert all(len(r["sanity_cascade"]) == 1 for r in records)
    for r in records:  # a solver's mask says its status and proof level; other maps have none
        if r["method"] == "smug":
            assert r["status"] in ("OPTIMAL", "FEASIBLE") and r["proof"] in ("exact", "solver", None)
            assert (r["proof"] is not None) == (r["status"] == "OPTIMAL")
        else:
            assert r["status"] is None and r["proof"] is None
    assert "ROAD MoRF" in proc.stdout and "Randomised-model SSIM" in proc.stdout
    assert (tmp_path / "examples.png").stat().st_size > 0


def test_evaluate_text_suite(tmp_path, capfd):
    proc = _run_here(capfd, "--suite", "text", "--n", "3", "--methods", "smug,smug_base,sis",
                "--k", "20", "--cell", "1", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = [json.loads(line) for line in (tmp_path / "records.jsonl").read_text().splitlines()]
    smug = [r for r in records if r["method"] == "smug"]
    assert smug and all(r["precision"] is not None for r in smug)


def test_unknown_method_is_a_clear_error(tmp_path, capfd):
    proc = _run_here(capfd, "--methods", "smug,lime", "--out", str(tmp_path))
    assert proc.returncode == 1 and "unknown method(s) lime" in proc.stderr


def test_road_levels_must_be_fractions(tmp_path, capfd):
    proc = _run_here(capfd, "--road-levels", "0.5,1.0", "--out", str(tmp_path))
    assert proc.returncode == 2 and "strictly between 0 and 1" in proc.stderr


def test_curve_steps_must_be_positive(tmp_path, capfd):
    proc = _run_here(capfd, "--curve-steps", "0", "--out", str(tmp_path))
    assert proc.returncode == 1 and "--curve-steps must be at least 1, got 0" in proc.stderr
