"""Batch explain: equal to single explains input for input, on every executor, and
resumable after a real kill with no input lost or duplicated."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from smug_opt.batch import ExplainSettings, explain_many
from smug_opt.executors import DaskExecutor, LocalPoolExecutor
from smug_opt.models.catalog import smug_parameters
from smug_opt.runstore import RECORDS_FILE, RunFolder

N = 8
# the parameters every entry point uses for mnist-cnn (its declared defaults), so a single
# `smug-opt explain` of one input must give what the batch gave for it
SETTINGS = ExplainSettings(smug_parameters("mnist-cnn"), backend="highs", time_limit=30.0)
ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}


@pytest.fixture(scope="module")
def digits(tmp_path_factory) -> Path:
    from PIL import Image

    from smug_opt.data.mnist import load_digits

    folder = tmp_path_factory.mktemp("digits")
    x = load_digits().x_test[:N]
    for i, image in enumerate(x):
        Image.fromarray((image[..., 0] * 255).round().astype(np.uint8)).save(folder / f"d{i}.png")
    return folder


@pytest.fixture(scope="module")
def reference(digits, tmp_path_factory) -> RunFolder:
    """The batch run in this process, sequentially."""
    out = tmp_path_factory.mktemp("ref")
    items = list(explain_many("mnist-cnn", digits, settings=SETTINGS, out=out, chunk_size=3))
    assert sorted(i.name for i in items) == [f"d{i}.png" for i in range(N)]
    return _reopen(out)


def _reopen(out: Path) -> RunFolder:
    return RunFolder.read(out)


def _assert_same_results(run: RunFolder, ref: RunFolder) -> None:
    records = run.records()
    names = [r["name"] for r in records]
    assert sorted(names) == sorted(r["name"] for r in ref.records())
    assert len(names) == len(set(names)), "an input was recorded twice"
    ref_by_name = {r["name"]: r for r in ref.records()}
    for r in records:
        want = ref_by_name[r["name"]]
        for key in ("status", "mask_size", "target"):
            assert r[key] == want[key], (r["name"], key)
    for key in ("mask", "saliency", "cell_mask"):
        got, want = run.arrays(key), ref.arrays(key)
        assert got.keys() == want.keys() and len(got) == N
        for index in got:
            np.testing.assert_array_equal(got[index], want[index], err_msg=f"{key} of input {index}")


def _smug(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "smug_opt", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=600)
    if check:
        assert done.returncode == 0, done.stderr[-3000:]
    return done


def test_batch_equals_single_explain_input_for_input(digits, reference, tmp_path):
    by_name = {r["name"]: r for r in reference.records()}
    masks, saliency = reference.arrays("mask"), reference.arrays("saliency")
    for name in ("d5.png",):
        _smug("explain", "--input", str(digits / name), "--out", str(tmp_path / name), "--quiet")
        single = json.loads((tmp_path / name / "record.json").read_text())
        index = by_name[name]["index"]
        batch = by_name[name]
        assert batch["proof"] in ("exact", "solver")
        for key in ("target", "mask_size", "status", "proof", "objective", "neurons_used", "k", "cell",
                    "model"):
            assert single[key] == batch[key], key
        np.testing.assert_array_equal(np.load(tmp_path / name / "mask.npy"), masks[index])
        np.testing.assert_array_equal(np.load(tmp_path / name / "saliency.npy"), saliency[index])


@pytest.mark.slow
def test_batch_on_an_npy_array_equals_the_folder_run(digits, reference):
    from PIL import Image

    # the same pixels as the PNGs (8-bit), one input per row
    x = np.stack([np.asarray(Image.open(digits / f"d{i}.png"), dtype=np.float64)[..., None] / 255.0
                  for i in range(N)])
    items = {i.index: i for i in explain_many("mnist-cnn", x, settings=SETTINGS, chunk_size=5)}
    masks = reference.arrays("mask")
    assert sorted(items) == list(range(N))
    for index, item in items.items():
        np.testing.assert_array_equal(item.mask, masks[index])


@pytest.mark.slow
def test_local_pool_of_two_workers_matches(digits, reference, tmp_path):
    with LocalPoolExecutor(2) as executor:
        run = explain_many("mnist-cnn", digits, settings=SETTINGS, executor=executor,
                           out=tmp_path / "pool", chunk_size=2)
        items = list(run)
    assert len(items) == N and run.failed == 0
    workers = {r["worker"] for r in _reopen(tmp_path / "pool").records()}
    assert len(workers) == 2 and os.getpid() not in workers  # really two other processes
    _assert_same_results(_reopen(tmp_path / "pool"), reference)


@pytest.mark.slow
def test_dask_local_cluster_matches_and_loads_the_model_once_per_worker(digits, reference, tmp_path):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        with DaskExecutor(client) as executor:
            items = list(explain_many("mnist-cnn", digits, settings=SETTINGS, executor=executor,
                                      out=tmp_path / "dask", chunk_size=1))
        loads = client.run(lambda: __import__("smug_opt.model_ref").model_ref.model_loads())
    assert len(items) == N
    assert sorted(loads.values()) in ([1, 1], [0, 1])  # 8 tasks, at most one model load per worker
    _assert_same_results(_reopen(tmp_path / "dask"), reference)


# a real SIGKILL of the CLI and its resume (100-125 s at load 12); the default run keeps the
# resume's parts: test_run_folder_drops_a_half_written_record_and_an_orphan_part
@pytest.mark.slow
def test_killed_run_resumes_with_no_input_lost_or_duplicated(digits, reference, tmp_path):
    out = tmp_path / "killed"
    cmd = [sys.executable, "-m", "smug_opt", "explain", "--input", str(digits), "--out", str(out),
           "--chunk", "1", "--quiet"]
    proc = subprocess.Popen(cmd, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.monotonic() + 300
    records = out / RECORDS_FILE
    while time.monotonic() < deadline and proc.poll() is None:
        if records.is_file() and records.read_text().count("\n") >= 3:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    done_before = records.read_text().count("\n")
    assert 3 <= done_before < N
    again = _smug("explain", "--input", str(digits), "--out", str(out), "--chunk", "1", "--resume",
                  "--quiet")
    assert f"{N - done_before}" in again.stdout or "already done" in again.stdout
    _assert_same_results(_reopen(out), reference)


def test_rerun_without_resume_is_refused_and_other_settings_are_named(digits, reference, tmp_path):
    out = reference.path
    refused = _smug("explain", "--input", str(digits), "--out", str(out), check=False)
    assert refused.returncode == 1 and "--resume" in refused.stderr and "Traceback" not in refused.stderr
    other = _smug("explain", "--input", str(digits), "--out", str(out), "--resume", "--k", "50",
                  check=False)
    assert other.returncode == 1 and f"k was {SETTINGS.params.k}, now 50" in other.stderr


def test_run_folder_drops_a_half_written_record_and_an_orphan_part(tmp_path):
    folder, _ = RunFolder.open(tmp_path, {"a": 1}, kind="explain", resume=False, overwrite=False)
    folder.add([{"index": 0, "name": "x", "row": 0}], {"index": np.array([0]), "mask": np.ones((1, 2))})
    with open(tmp_path / RECORDS_FILE, "a") as f:
        f.write('{"index": 1, "name": "y", "row"')  # killed mid-line
    np.savez(tmp_path / "arrays" / "part-000007.npz", index=np.array([1]))  # killed before its records
    (tmp_path / "arrays" / "part-000008.npz.tmp").write_bytes(b"half")
    again, _ = RunFolder.open(tmp_path, {"a": 1}, kind="explain", resume=True, overwrite=False)
    assert again.done() == {"x"}
    assert sorted(p.name for p in (tmp_path / "arrays").iterdir()) == ["part-000000.npz"]
    assert (tmp_path / RECORDS_FILE).read_text().endswith("\n")
    np.testing.assert_array_equal(again.arrays("mask")[0], np.ones(2))
