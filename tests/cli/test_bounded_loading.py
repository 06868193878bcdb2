"""Hostile and broken files end in one line naming the file and the problem, and no file
takes more memory than its declared sizes allow: checked through the real command and by
a fuzz over truncated, inflated and mutated files of each kind, in a fresh process whose
peak memory is measured."""

from __future__ import annotations

import gzip
import json
import os
import random
import struct
import subprocess
import sys
import zipfile
import zlib
from pathlib import Path

import numpy as np
import pytest

from smug_opt import load_problem, save_problem
from smug_opt.inputs import load_input
from smug_opt.testing.instances import FIRST_LAYER

ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
GB = 2**30


_MEASURED = """
import resource, subprocess, sys
code = subprocess.run(sys.argv[1:]).returncode
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)
sys.exit(code)
"""


def _smug(*args: str) -> tuple[subprocess.CompletedProcess, float]:
    """The command's result and its peak resident memory in bytes."""
    done = subprocess.run([sys.executable, "-c", _MEASURED, sys.executable, "-m", "smug_opt", *args],
                          env=ENV, text=True, capture_output=True, timeout=600)
    *lines, peak = done.stdout.splitlines()
    return subprocess.CompletedProcess(done.args, done.returncode, "\n".join(lines), done.stderr), \
        float(peak)


def _one_line_error(done: subprocess.CompletedProcess, path: Path, problem: str) -> None:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr and str(path) in lines[0] and problem in lines[0], lines[0]


def _problem_file(path: Path) -> Path:
    save_problem(next(iter(FIRST_LAYER.values()))[0], path)
    return path


def _npy_header(shape: tuple[int, ...], dtype: str = "<f8") -> bytes:
    header = repr({"descr": dtype, "fortran_order": False, "shape": shape}).encode()
    header += b" " * (63 - (10 + len(header)) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header


def _inflated_smug(path: Path, source: Path, member: str, nbytes: int) -> Path:
    """``source`` with ``member`` replaced by ``nbytes`` of zeros (a few MB compressed)."""
    with zipfile.ZipFile(source) as original, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as out:
        for info in original.infolist():
            if info.filename != f"{member}.npy":
                out.writestr(info, original.read(info))
                continue
            with out.open(info.filename, "w", force_zip64=True) as handle:
                handle.write(_npy_header((nbytes // 8,)))
                block = bytes(2**24)
                for _ in range(nbytes // len(block)):
                    handle.write(block)
    return path


def _png(path: Path, width: int, height: int) -> Path:
    """A grey PNG of ``width`` x ``height`` black pixels, written row by row (a 20000 x
    20000 one is 400 KB on disk)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    compressor, row, body = zlib.compressobj(9), bytes(width + 1), []
    body = [compressor.compress(row) for _ in range(height)]
    body.append(compressor.flush())
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", b"".join(body))
                     + chunk(b"IEND", b""))
    return path


def test_empty_and_list_metadata_smug_files_are_one_line(tmp_path):
    empty = tmp_path / "empty.smug"
    empty.write_bytes(b"")
    done, _ = _smug("solve", str(empty))
    _one_line_error(done, empty, "is not a smug-opt problem file")
    listed = tmp_path / "listed.smug"
    with zipfile.ZipFile(_problem_file(tmp_path / "ok.smug")) as original, \
            zipfile.ZipFile(listed, "w") as out:
        for info in original.infolist():
            data = original.read(info)
            if info.filename == "header.npy":
                header = json.dumps({"format": "smug-opt-problem", "version": 1, "metadata": [1, 2]})
                raw = np.frombuffer(header.encode(), dtype=np.uint8)
                data = _npy_header(raw.shape, "|u1") + raw.tobytes()
            out.writestr(info.filename, data)
    done, _ = _smug("solve", str(listed))
    _one_line_error(done, listed, "metadata must be a JSON object, got list")


@pytest.fixture(scope="module")
def inflating_smug(tmp_path_factory) -> Path:
    """A ``.smug`` of 1.2 MB whose ``lb`` member inflates to 1.2 GB, over the 1 GB reading
    budget (8 CPU s to deflate: made once for the tests below)."""
    folder = tmp_path_factory.mktemp("inflating")
    return _inflated_smug(folder / "big.smug", _problem_file(folder / "ok.smug"), "lb", int(1.2 * GB))


def test_an_inflating_member_is_refused_before_it_is_read(inflating_smug):
    bomb = inflating_smug
    assert bomb.stat().st_size < 5 * 2**20
    done, peak = _smug("solve", str(bomb))
    _one_line_error(done, bomb, "over the reading budget")
    assert peak < 1 * GB, f"loading took {peak / 2**20:.0f} MB"


def test_a_header_claiming_ten_billion_elements_is_refused(tmp_path):
    source = _problem_file(tmp_path / "ok.smug")
    liar = tmp_path / "liar.smug"
    with zipfile.ZipFile(source) as original, zipfile.ZipFile(liar, "w") as out:
        for info in original.infolist():
            data = original.read(info)
            out.writestr(info.filename, _npy_header((10**10,)) + data[128:] if info.filename == "lb.npy"
                         else data)
    done, peak = _smug("solve", str(liar))
    _one_line_error(done, liar, "(10000000000,) array")
    assert peak < 1 * GB


@pytest.mark.slow
def test_a_huge_png_and_npy_header_through_explain(tmp_path):
    png = _png(tmp_path / "huge.png", 20000, 20000)
    done, peak = _smug("explain", "--input", str(png), "--out", str(tmp_path / "o"), "--quiet")
    _one_line_error(done, png, "huge.png")
    assert peak < 2 * GB  # TensorFlow's own footprint; the image itself never decoded
    npy = tmp_path / "liar.npy"
    npy.write_bytes(_npy_header((10**10,)) + bytes(64))
    done, _ = _smug("explain", "--input", str(npy), "--out", str(tmp_path / "o"), "--quiet")
    _one_line_error(done, npy, "(10000000000,) array")


def test_a_full_disk_is_one_line():
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full on this system")
    problem = _problem_file(Path(os.environ.get("TMPDIR", "/tmp")) / f"full-{os.getpid()}.smug")
    try:
        done, _ = _smug("export", str(problem), "--to", "lp", "-o", "/dev/full")
    finally:
        problem.unlink()
    assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "No space left on device; free some space or write elsewhere" in done.stderr


# ------------------------------------------------------------------ the fuzz
def _variants(good: bytes, rng: random.Random, inflate: list[tuple[str, bytes]]) -> list[tuple[str, bytes]]:
    out = [(f"truncated-{n}", good[:n]) for n in sorted({0, 1, 8, 64, len(good) // 2, len(good) - 1})]
    for i in range(12):
        data = bytearray(good)
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        out.append((f"mutated-{i}", bytes(data)))
    return out + inflate


def _png_with_size(good: bytes, width: int, height: int) -> bytes:
    ihdr = struct.pack(">II", width, height) + good[24:29]
    return good[:16] + ihdr + struct.pack(">I", zlib.crc32(b"IHDR" + ihdr)) + good[33:]


_FUZZ_SCRIPT = """
import json, sys
from pathlib import Path
from smug_opt import load_problem
from smug_opt.data.vnnlib import read_spec_image
from smug_opt.inputs import load_input
outcomes = {}
for path in sorted(Path(sys.argv[1]).iterdir()):
    try:
        if path.suffix == ".smug":
            load_problem(path)
        elif path.suffix == ".gz":
            read_spec_image(path)
        else:
            load_input(path, (28, 28, 1), 255.0)
        outcomes[path.name] = "ok"
    except ValueError as exc:
        outcomes[path.name] = str(exc)
# VmHWM, not getrusage's ru_maxrss: Linux keeps ru_maxrss across execve, so a child forked
# from a pytest process of 1 GB would report that process's size as its own peak
peak_kb = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({"outcomes": outcomes, "peak": peak_kb * 1024}))
"""


def test_fuzzed_files_end_in_one_line_and_never_take_a_gigabyte(tmp_path, inflating_smug):
    from PIL import Image

    rng = random.Random(22)
    files = tmp_path / "files"
    files.mkdir()
    good_smug = _problem_file(tmp_path / "good.smug").read_bytes()
    digit = (np.arange(784).reshape(28, 28, 1) % 255).astype(np.float64)
    np.save(tmp_path / "good.npy", digit)
    good_npy = (tmp_path / "good.npy").read_bytes()
    Image.fromarray(digit[..., 0].astype(np.uint8)).save(tmp_path / "good.png")
    good_png = (tmp_path / "good.png").read_bytes()
    spec = ("; correct label 7\n" + "".join(f"(declare-const X_{i} Real)\n" for i in range(784))
            + "".join(f"(declare-const Y_{j} Real)\n" for j in range(10))
            + "".join(f"(assert (<= X_{i} 0.5))\n(assert (>= X_{i} 0.25))\n" for i in range(784))
            + "(assert (or " + " ".join(f"(and (>= Y_{j} Y_7))" for j in range(10) if j != 7) + "))\n")
    good_gz = gzip.compress(spec.encode())
    bomb = tmp_path / "bomb.gz"
    with gzip.open(bomb, "wb", compresslevel=1) as handle:  # 5 MB, 3 CPU s (level 9: 1 MB, 8 s)
        for _ in range(int(1.2 * GB) // 2**24):
            handle.write(b" " * 2**24)
    kinds = {
        ".vnnlib.gz": _variants(good_gz, rng, [("inflated", bomb.read_bytes())]),
        ".smug": _variants(good_smug, rng, [("inflated", inflating_smug.read_bytes())]),
        ".npy": _variants(good_npy, rng, [("inflated", _npy_header((10**10,)) + good_npy[128:]),
                                          ("padded", good_npy + bytes(1000))]),
        ".png": _variants(good_png, rng, [("inflated", _png_with_size(good_png, 30000, 30000)),
                                          ("inflated-budget", _png_with_size(good_png, 9000, 9000))]),
    }
    for suffix, variants in kinds.items():
        for name, data in variants:
            (files / f"{name}{suffix}").write_bytes(data)
    done = subprocess.run([sys.executable, "-c", _FUZZ_SCRIPT, str(files)], env=ENV, text=True,
                          capture_output=True, timeout=600)
    assert done.returncode == 0, f"a file raised something else than one ValueError:\n{done.stderr[-3000:]}"
    report = json.loads(done.stdout)
    outcomes = report["outcomes"]
    assert len(outcomes) == sum(len(v) for v in kinds.values())
    assert outcomes["truncated-0.vnnlib.gz"] != "ok" and "good" not in outcomes
    for name, outcome in outcomes.items():
        assert outcome == "ok" or ("\n" not in outcome and name in outcome), (name, outcome)
    assert outcomes["mutated-0.vnnlib.gz"] != "ok" or outcomes["truncated-1.vnnlib.gz"] != "ok"
    for name in ("inflated.smug", "inflated.npy", "inflated.png", "inflated-budget.png", "inflated.vnnlib.gz",
                 "truncated-0.smug", "truncated-0.npy", "truncated-0.png", "padded.npy"):
        assert outcomes[name] != "ok", name
    assert report["peak"] < 1 * GB, f"loading took {report['peak'] / 2**20:.0f} MB"


@pytest.mark.parametrize(("offset", "value", "what"), [(6, 0xFF, "version 25.5 to extract"),
                                                        (8, 0x01, "encrypted")])
def test_a_zip_feature_numpy_never_writes_is_one_line(tmp_path, offset, value, what):
    """A ``.smug`` whose zip directory claims an unknown version or encryption (zipfile
    raises NotImplementedError / RuntimeError for those) ends in one ValueError."""
    data = bytearray(_problem_file(tmp_path / "p.smug").read_bytes())
    entry = data.index(b"PK\x01\x02")  # the first central-directory entry
    data[entry + offset] = value
    if what == "encrypted":
        local = data.index(b"PK\x03\x04")
        data[local + 6] |= 0x01
    bad = tmp_path / "bad.smug"
    bad.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="bad.smug") as info:
        load_problem(bad)
    assert "\n" not in str(info.value)


def test_an_npy_header_numpy_cannot_tokenize_is_one_line(tmp_path):
    """numpy parses an ``.npy`` header with tokenize, which raises TokenError on an unclosed
    dict: that is one ValueError naming the file."""
    header = b"{'descr': '<f8', 'fortran_order': False, 'shape': (28, 28, 1), ("
    header += b" " * (63 - (10 + len(header)) % 64) + b"\n"
    bad = tmp_path / "bad.npy"
    bad.write_bytes(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + bytes(784 * 8))
    with pytest.raises(ValueError, match="bad.npy") as info:
        load_input(bad, (28, 28, 1), 255.0)
    assert "\n" not in str(info.value)
