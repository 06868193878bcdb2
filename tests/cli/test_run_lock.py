"""One writer per run folder: a second is refused naming the holder, a dead holder's lock
is taken over, and ``--resume`` knows a model file by resolved path and content digest."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

from smug_opt.filelock import FOLDER_LOCK_FILE, FolderInUseError, FolderLock
from smug_opt.runstore import RECORDS_FILE, RUN_FILE, RunFolder

ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
N = 4


def _smug(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "smug_opt", *args], capture_output=True, text=True,
                          env=ENV, cwd=cwd, timeout=600)


def _hold(folder: Path) -> subprocess.Popen:
    """Another process holding ``folder``'s lock (it prints 'held' once it does)."""
    script = ("import sys, time\nfrom smug_opt.filelock import FolderLock\n"
              f"FolderLock.acquire({str(folder)!r})\nprint('held', flush=True)\ntime.sleep(600)\n")
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=ENV)
    assert proc.stdout.readline().strip() == "held"
    return proc


@pytest.fixture(scope="module")
def digits(tmp_path_factory) -> Path:
    from PIL import Image

    from smug_opt.data.mnist import load_digits

    folder = tmp_path_factory.mktemp("digits")
    for i, image in enumerate(load_digits().x_test[:N]):
        Image.fromarray((image[..., 0] * 255).round().astype(np.uint8)).save(folder / f"d{i}.png")
    return folder


def test_second_writer_is_refused_naming_the_holder(tmp_path):
    holder = _hold(tmp_path / "run")
    try:
        with pytest.raises(FolderInUseError) as refused:
            RunFolder.open(tmp_path / "run", {"a": 1}, kind="explain", resume=True, overwrite=False)
        message = str(refused.value)
        assert f"pid {holder.pid}" in message and f"host {socket.gethostname()}" in message
        assert "started 20" in message and "another --out" in message
    finally:
        holder.kill()
        holder.wait()


def test_dead_holders_lock_is_taken_over(tmp_path):
    holder = _hold(tmp_path / "run")
    holder.send_signal(signal.SIGKILL)  # dies holding it: the lock file still names it
    holder.wait()
    folder, note = RunFolder.open(tmp_path / "run", {"a": 1}, kind="explain", resume=True,
                                  overwrite=False)
    assert "took over the lock of a run that ended without releasing it (host " in note
    assert f"pid {holder.pid}" in note
    folder.close()
    again, note = RunFolder.open(tmp_path / "run", {"a": 1}, kind="explain", resume=True,
                                 overwrite=False)  # released properly: nothing to take over
    assert note == ""
    again.close()


def test_lock_is_reentrant_in_one_process_and_released_at_the_end(tmp_path):
    with FolderLock.acquire(tmp_path), FolderLock.acquire(tmp_path):
        assert json.loads((tmp_path / FOLDER_LOCK_FILE).read_text())["pid"] == os.getpid()
    assert (tmp_path / FOLDER_LOCK_FILE).read_text() == ""
    holder = _hold(tmp_path)  # another process can take it now
    holder.kill()
    holder.wait()


def test_bench_run_into_a_held_folder_is_refused(tmp_path):
    from smug_opt import save_problem
    from smug_opt.testing.instances import FIRST_LAYER

    (tmp_path / "inst").mkdir()
    save_problem(next(iter(FIRST_LAYER.values()))[0], tmp_path / "inst" / "p.smug")
    holder = _hold(tmp_path / "bench")
    try:
        done = _smug("bench", "run", "--instances", str(tmp_path / "inst"), "--backend", "highs",
                     "--out", str(tmp_path / "bench"), "--quiet")
    finally:
        holder.kill()
        holder.wait()
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"in use by another smug-opt run (host {socket.gethostname()}, pid {holder.pid}" in done.stderr
    assert not (tmp_path / "bench" / "results.jsonl").exists()


def _fake_model(path: Path, content: str) -> None:
    """A zip archive named like a Keras model: runs are refused before any model loads."""
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("config.json", content)


def _first_run(folder: Path, model: Path, digits: Path) -> None:
    """A run folder of ``model`` (opened, as a run's first seconds leave it)."""
    from smug_opt.batch import explain_many

    explain_many(str(model), digits, out=folder, backend="highs").close()


def test_resume_with_another_model_of_the_same_name_is_refused(tmp_path, digits):
    for place in ("a", "b"):
        (tmp_path / place).mkdir()
        _fake_model(tmp_path / place / "my_cnn.keras", f"model {place}")
    out = tmp_path / "a" / "res"
    _first_run(out, tmp_path / "a" / "my_cnn.keras", digits)
    done = _smug("explain", "--model", "my_cnn.keras", "--input", str(digits), "--out", str(out),
                 "--resume", "--quiet", cwd=tmp_path / "b")
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"model was {str(tmp_path / 'a' / 'my_cnn.keras')!r}, now " \
           f"{str(tmp_path / 'b' / 'my_cnn.keras')!r}" in done.stderr
    _fake_model(tmp_path / "a" / "my_cnn.keras", "model a, retrained")  # same path, new file
    done = _smug("explain", "--model", "my_cnn.keras", "--input", str(digits), "--out", "res",
                 "--resume", "--quiet", cwd=tmp_path / "a")
    assert done.returncode == 1 and "model_sha256 was" in done.stderr, done.stderr


def test_resume_of_a_run_without_a_model_digest_says_how_to_go_on(tmp_path, digits):
    _fake_model(tmp_path / "my_cnn.keras", "a model")
    out = tmp_path / "res"
    _first_run(out, tmp_path / "my_cnn.keras", digits)
    info = json.loads((out / RUN_FILE).read_text())
    del info["config"]["model_sha256"]  # as smug-opt wrote it before it recorded digests
    (out / RUN_FILE).write_text(json.dumps(info))
    done = _smug("explain", "--model", "my_cnn.keras", "--input", str(digits), "--out", "res",
                 "--resume", "--quiet", cwd=tmp_path)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "written by an older smug-opt that did not record model_sha256" in done.stderr
    assert "--overwrite" in done.stderr


@pytest.mark.slow
def test_two_resumed_explains_into_one_folder_one_refused_folder_consistent(tmp_path, digits):
    out = tmp_path / "res"
    cmd = [sys.executable, "-m", "smug_opt", "explain", "--input", str(digits), "--out", str(out),
           "--chunk", "1", "--resume", "--quiet"]
    first = subprocess.Popen(cmd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not ((out / FOLDER_LOCK_FILE).is_file() and (out / FOLDER_LOCK_FILE).read_text()):
        assert time.monotonic() < deadline and first.poll() is None, "the first run never locked"
        time.sleep(0.05)
    second = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=600)
    _first_out, first_err = first.communicate(timeout=600)
    assert first.returncode == 0, first_err
    assert second.returncode == 1 and "Traceback" not in second.stderr, second.stderr
    assert f"in use by another smug-opt run (host {socket.gethostname()}, pid {first.pid}" \
           in second.stderr
    records = [json.loads(line) for line in (out / RECORDS_FILE).read_text().splitlines()]
    assert sorted(r["name"] for r in records) == [f"d{i}.png" for i in range(N)]
    parts = sorted(p.name for p in (out / "arrays").iterdir())
    assert parts == sorted({r["part"] for r in records})


def test_read_needs_no_configuration_takes_no_lock_and_writes_nothing(tmp_path):
    folder, _ = RunFolder.open(tmp_path, {"a": 1}, kind="explain", resume=False, overwrite=False)
    folder.add([{"index": 3, "name": "x", "row": 0}], {"index": np.array([3]), "mask": np.ones((1, 2))})
    with open(tmp_path / RECORDS_FILE, "a") as f:
        f.write('{"index": 4, "name": "y"')  # the writer is mid-line
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    run = RunFolder.read(tmp_path)  # while the writer still holds the lock
    assert run.kind == "explain" and run.config == {"a": 1} and run.done() == {"x"}
    np.testing.assert_array_equal(run.arrays("mask")[3], np.ones(2))
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before
    folder.close()
    with pytest.raises(ValueError, match=r"is not a smug-opt run folder \(no run.json\)"):
        RunFolder.read(tmp_path / "elsewhere")
