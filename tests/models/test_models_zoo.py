"""The model zoo: deterministic training, recorded accuracy, a reused and concurrency-safe cache."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from smug_opt.models import KerasAdapter, zoo

NAMES = ("mnist-mlp", "mnist-mlp-deep", "mnist-cnn", "mnist-resnet", "text-cnn", "efficientnet-lite0")
ROOT = Path(__file__).resolve().parents[2]


def test_available_models_are_described():
    models = zoo.available_models()
    assert tuple(models) == NAMES and all(models.values())


@pytest.mark.parametrize("function", [zoo.load, zoo.test_accuracy, zoo.model_info])
def test_unknown_name_lists_the_models(function):
    with pytest.raises(ValueError, match="unknown model 'mnist'; available: mnist-mlp, mnist-mlp-deep, "):
        function("mnist")


def test_cache_dir_resolution(monkeypatch, tmp_path):
    monkeypatch.delenv("SMUG_OPT_CACHE", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert zoo.cache_dir() == Path.home() / ".cache" / "smug-opt"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert zoo.cache_dir() == tmp_path / "xdg" / "smug-opt"
    monkeypatch.setenv("SMUG_OPT_CACHE", str(tmp_path / "mine"))
    assert zoo.cache_dir() == tmp_path / "mine"


@pytest.mark.parametrize(
    ("name", "floor", "input_shape", "first_layer"),
    [("mnist-mlp", 0.88, (784,), (32,)), ("mnist-mlp-deep", 0.9, (784,), (64,)),
     ("mnist-cnn", 0.95, (28, 28, 1), (14, 14, 16)), ("text-cnn", 0.93, (100,), (98, 64)),
     pytest.param("mnist-resnet", 0.88, (28, 28, 1), (14, 14, 16), marks=pytest.mark.slow)],
)  # fmt: skip
def test_models_are_accurate_and_fit_the_adapter(name, floor, input_shape, first_layer):
    info = zoo.model_info(name)
    assert info["name"] == name and info["n_test"] in (500, 1000) and info["train_seconds"] > 0
    assert zoo.test_accuracy(name) == info["test_accuracy"] >= floor
    adapter = KerasAdapter(zoo.load(name, progress=False))
    assert adapter.input_shape == input_shape and adapter.affine.output_shape == first_layer


def _weights(model):
    return [np.asarray(w) for w in model.get_weights()]


def test_training_is_deterministic_and_the_cache_is_reused(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("SMUG_OPT_CACHE", str(tmp_path / "a"))
    first = zoo.load("mnist-mlp")
    assert "training 'mnist-mlp'" in capsys.readouterr().err
    path = tmp_path / "a" / "models" / "mnist-mlp-v1.keras"
    stamp = path.stat().st_mtime_ns
    record = json.loads(path.with_suffix(".json").read_text())

    monkeypatch.setenv("SMUG_OPT_CACHE", str(tmp_path / "b"))
    second = zoo.load("mnist-mlp", progress=False)
    for a, b in zip(_weights(first), _weights(second), strict=True):
        np.testing.assert_array_equal(a, b)
    assert zoo.test_accuracy("mnist-mlp") == record["test_accuracy"]

    monkeypatch.setenv("SMUG_OPT_CACHE", str(tmp_path / "a"))
    again = zoo.load("mnist-mlp")
    assert capsys.readouterr().err == ""  # nothing trained
    assert path.stat().st_mtime_ns == stamp
    for a, b in zip(_weights(first), _weights(again), strict=True):
        np.testing.assert_array_equal(a, b)
    assert sorted(p.name for p in path.parent.iterdir()) == [
        "mnist-mlp-v1.json", "mnist-mlp-v1.keras", "mnist-mlp-v1.lock"
    ]  # fmt: skip


@pytest.mark.slow
def test_two_processes_training_at_once_share_one_result(tmp_path):
    env = {**os.environ, "SMUG_OPT_CACHE": str(tmp_path), "PYTHONPATH": str(ROOT)}
    code = "from smug_opt.models import zoo; zoo.load('mnist-mlp'); print(zoo.test_accuracy('mnist-mlp'))"
    command = [sys.executable, "-c", code]
    processes = [subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for _ in range(2)]  # fmt: skip
    results = [process.communicate(timeout=600) for process in processes]
    assert all(process.returncode == 0 for process in processes), results
    assert results[0][0] == results[1][0]
    assert sum("training 'mnist-mlp'" in err for _, err in results) == 1  # the other one waited
    assert sorted(p.name for p in (tmp_path / "models").iterdir()) == [
        "mnist-mlp-v1.json", "mnist-mlp-v1.keras", "mnist-mlp-v1.lock"
    ]  # fmt: skip
