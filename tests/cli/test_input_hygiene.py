"""Inputs: a run's own outputs are never explained, overlays never overwrite each other,
a picture hidden in the alpha channel is warned about, and a cell larger than the input
is refused; through the real command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from smug_opt.inputs import list_input_files
from smug_opt.models.grid import regular_grid

ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
OUTPUT_NAMES = ("mask.npy", "saliency.npy", "cell_mask.npy", "overlay.png")


def _smug(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "smug_opt", *args], capture_output=True, text=True,
                          env=ENV, timeout=900)


def _digit() -> np.ndarray:
    from smug_opt.data.mnist import load_digits

    return (load_digits().x_test[0][..., 0] * 255).round().astype(np.uint8)


def _folder_with_outputs(folder: Path) -> Path:
    from PIL import Image

    digit = _digit()
    Image.fromarray(digit).save(folder / "d.png")
    Image.fromarray(digit).save(folder / "d.jpg", quality=100)
    Image.fromarray(digit).save(folder / "D.PNG")
    np.save(folder / "d.npy", digit[..., None] / 255.0)
    for name in OUTPUT_NAMES:  # a single run's --out once went here
        if name.endswith(".npy"):
            np.save(folder / name, np.zeros((28, 28)))
        else:
            Image.fromarray(digit).save(folder / name)
    (folder / "record.json").write_text("{}")
    return folder


def test_a_runs_outputs_are_not_listed_as_inputs(tmp_path):
    with pytest.warns(UserWarning, match="skipped cell_mask.npy, mask.npy, overlay.png, saliency.npy"):
        files = list_input_files(_folder_with_outputs(tmp_path))
    assert sorted(p.name for p in files) == ["D.PNG", "d.jpg", "d.npy", "d.png"]


def test_a_cell_larger_than_the_grid_is_refused():
    with pytest.raises(ValueError, match=r"cell is larger than the input: 100 on a 28x28 grid .* at most 28"):
        regular_grid((28, 28), 100)
    assert regular_grid((28, 28), 28).num_cells == 1  # the whole input as one cell is asked for


@pytest.mark.slow
def test_batch_skips_outputs_and_writes_one_overlay_per_input(tmp_path):
    (tmp_path / "in").mkdir()
    inputs = _folder_with_outputs(tmp_path / "in")
    done = _smug("explain", "--input", str(inputs), "--out", str(tmp_path / "run"), "--overlays",
                 "--quiet")
    assert done.returncode == 0, done.stderr
    assert "skipped cell_mask.npy, mask.npy, overlay.png, saliency.npy" in done.stderr
    records = [json.loads(line) for line in (tmp_path / "run" / "records.jsonl").read_text().splitlines()]
    assert sorted(r["name"] for r in records) == ["D.PNG", "d.jpg", "d.npy", "d.png"]
    overlays = sorted(p.name for p in (tmp_path / "run" / "overlays").iterdir())
    assert overlays == ["D.PNG.png", "d.jpg.png", "d.npy.png", "d.png.png"]


@pytest.mark.slow
def test_alpha_only_picture_is_warned_and_a_huge_cell_refused(tmp_path):
    from PIL import Image

    rgba = np.zeros((28, 28, 4), np.uint8)
    rgba[..., 3] = _digit()  # black ink whose shape is only in its transparency
    Image.fromarray(rgba, "RGBA").save(tmp_path / "alpha.png")
    done = _smug("explain", "--input", str(tmp_path / "alpha.png"), "--out", str(tmp_path / "o"),
                 "--quiet")
    assert done.returncode in (0, 3), done.stderr
    assert "only in the alpha (transparency) channel" in done.stderr
    done = _smug("explain", "--cell", "100", "--out", str(tmp_path / "o2"), "--quiet")
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "--cell is larger than the input: 100 on a 28x28 grid" in done.stderr
