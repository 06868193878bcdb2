"""``smug-opt explain`` on a user's own Keras models: a plain MLP given a PNG is explained
on the picture's grid (overlay.png, 2-D cells), with no flag to guess."""

import json
import subprocess
import sys

import numpy as np
import pytest


@pytest.mark.parametrize("first", ["flatten", pytest.param("flat-input", marks=pytest.mark.slow)])
def test_a_keras_mlp_given_a_png_gets_an_overlay_and_2d_cells(tmp_path, first):
    from PIL import Image

    from smug_opt.data.mnist import load_digits
    from smug_opt.models._keras import import_keras

    keras = import_keras()
    keras.utils.set_random_seed(0)
    stem = [keras.Input((28, 28)), keras.layers.Flatten()] if first == "flatten" else [keras.Input((784,))]
    model = keras.Sequential([*stem, keras.layers.Dense(32, activation="relu"),
                              keras.layers.Dense(10, activation="softmax")])
    model_path = tmp_path / "mlp.keras"
    model.save(model_path)
    digit = load_digits().x_test[0].reshape(28, 28)
    png = tmp_path / "digit.png"
    Image.fromarray(np.round(digit * 255).astype(np.uint8)).save(png)
    out = tmp_path / "res"
    proc = subprocess.run([sys.executable, "-m", "smug_opt", "explain", "--model", str(model_path),
                           "--input", str(png), "--k", "16", "--cell", "4", "--out", str(out), "--quiet"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    record = json.loads((out / "record.json").read_text())
    assert record["status"] == "OPTIMAL" and record["verified"] is True
    assert record["cells"] == 49
    assert np.load(out / "cell_mask.npy").shape == (7, 7)
    assert np.load(out / "mask.npy").shape == (28, 28)
    assert (out / "overlay.png").stat().st_size > 0
    assert not (out / "explanation.html").exists()
