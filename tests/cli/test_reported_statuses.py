"""Statuses say what happened, through the real command: a worker killed at its memory
limit is ``killed``; a race's proof names the backend that proved it; ``explain --backend
auto`` records its race; a batch with inputs left without a mask exits 3 and says how many;
usage errors keep argparse's exit code 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from smug_opt import Problem, save_problem
from smug_opt.testing.instances import FIRST_LAYER

ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}


def _smug(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "smug_opt", *args], capture_output=True, text=True,
                          env=ENV, cwd=cwd, timeout=900)


def test_worker_killed_at_its_memory_limit_is_reported_killed(tmp_path):
    rng = np.random.default_rng(1)  # z3's paper encoding of this reaches ~1 GB in 10 s
    A = rng.normal(size=(60, 200))
    save_problem(Problem.from_arrays(A, ">", A @ rng.integers(0, 2, 200) - 0.3), tmp_path / "p.smug")
    done = _smug("solve", str(tmp_path / "p.smug"), "--backend", "z3", "--option", "encoding=paper",
                 "--memory-limit", "400", "--time-limit", "60", "--json")
    result = json.loads(done.stdout)
    assert done.returncode == 3 and result["status"] == "ERROR", done.stderr
    assert "memory limit of 400 MB exceeded" in result["message"]
    assert result["killed"] is True


def test_a_races_proof_names_only_the_backend_that_proved_it(tmp_path):
    save_problem(next(iter(FIRST_LAYER.values()))[0], tmp_path / "p.smug")
    done = _smug("solve", str(tmp_path / "p.smug"), "--backend", "highs,cpsat", "--time-limit", "30",
                 "--no-certify")  # the race's own word: the default may certify it
    assert done.returncode == 0, done.stderr
    proof = next(line for line in done.stdout.splitlines() if line.startswith("proof"))
    provers = [line.split()[1].rstrip(":") for line in done.stdout.splitlines()
               if line.startswith("race") and "proved it" in line]
    assert len(provers) == 1 and f"rests on {provers[0]}'s floating-point" in proof, done.stdout
    other = {"highs", "cpsat"} - set(provers)
    assert not any(name in proof for name in other), proof


def test_usage_errors_keep_argparse_exit_code_2():
    done = _smug("solve", "--no-such-flag")
    assert done.returncode == 2 and "usage:" in done.stderr


@pytest.mark.slow
def test_explain_auto_records_its_race(tmp_path):
    done = _smug("explain", "--backend", "auto", "--out", str(tmp_path), "--quiet")
    assert done.returncode == 0, done.stderr
    record = json.loads((tmp_path / "record.json").read_text())
    assert record["backend"] == "auto" and len(record["race"]) >= 2
    assert sum(e["proved"] for e in record["race"]) == 1
    assert {"backend", "status", "objective", "bound", "seconds"} <= set(record["race"][0])


@pytest.mark.slow
def test_batch_with_inputs_left_without_a_mask_exits_3_and_says_how_many(tmp_path):
    from PIL import Image

    from smug_opt.data.mnist import load_digits

    inputs = tmp_path / "in"
    inputs.mkdir()
    for i, image in enumerate(load_digits().x_test[:2]):
        Image.fromarray((image[..., 0] * 255).round().astype(np.uint8)).save(inputs / f"d{i}.png")
    np.save(inputs / "wrong.npy", np.zeros((5, 5)))  # not the model's shape: an ERROR record
    done = _smug("explain", "--input", str(inputs), "--out", str(tmp_path / "run"), "--quiet")
    assert done.returncode == 3, done.stderr
    assert "**1 of 3 inputs ended without a mask**" in done.stdout
    assert "1 of 3 inputs ended without a mask" in done.stderr.splitlines()[-1]
    assert "1 of 3 inputs ended without a mask" in (tmp_path / "run" / "summary.md").read_text()
