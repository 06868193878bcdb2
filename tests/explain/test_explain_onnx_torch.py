"""``smug-opt explain`` and ``smug_opt.explain`` on ONNX files and PyTorch modules, end to
end: a digit PNG in, an OPTIMAL mask verified exactly out."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")

TESTS = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def factory_model():
    sys.path.insert(0, str(TESTS))
    from torch_factory import digit_cnn

    return digit_cnn()


@pytest.fixture(scope="module")
def digit_png(tmp_path_factory):
    from PIL import Image

    from smug_opt.data.mnist import load_digits

    folder = tmp_path_factory.mktemp("digits")
    for i in (0, 1):
        pixels = np.round(load_digits().x_test[i].reshape(28, 28) * 255).astype(np.uint8)
        Image.fromarray(pixels).save(folder / f"digit{i}.png")
    return folder


def explain_cli(*args: str, out: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-m", "smug_opt", "explain", *args, "--k", "40", "--cell", "2",
                           "--backend", "highs", "--out", str(out), "--quiet"],
                          capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads((out / "record.json").read_text()) if (out / "record.json").exists() else {}


@pytest.mark.slow
def test_cli_explains_an_onnx_cnn(factory_model, digit_png, tmp_path):
    """An NCHW ONNX CNN (exported from torch) given a PNG: 14×14 cells of 2×2 pixels, OPTIMAL."""
    from smug_opt.network.torch_reader import torch_to_onnx

    path = tmp_path / "cnn.onnx"
    path.write_bytes(torch_to_onnx(factory_model, (1, 28, 28)))
    record = explain_cli("--model", str(path), "--input", str(digit_png / "digit0.png"), out=tmp_path / "r")
    assert record["status"] == "OPTIMAL" and record["verified"] is True and record["cells"] == 196
    assert np.load(tmp_path / "r" / "mask.npy").shape == (28, 28)
    assert (tmp_path / "r" / "overlay.png").stat().st_size > 0


@pytest.mark.slow
def test_cli_explains_a_torch_factory(digit_png, tmp_path):
    """``--model package.module:factory``: the module is built by the factory, read into a
    Network, and explained; the mask equals the Python API's on the same module."""
    import smug_opt
    from smug_opt.inputs import load_input
    from smug_opt.models.resolve import as_adapter

    record = explain_cli("--model", "torch_factory:digit_cnn", "--input", str(digit_png / "digit0.png"),
                         out=tmp_path / "r")
    assert record["status"] == "OPTIMAL" and record["verified"] is True
    sys.path.insert(0, str(TESTS))
    from torch_factory import digit_cnn

    adapter = as_adapter(digit_cnn())
    x, _ = load_input(digit_png / "digit0.png", adapter.input_shape, 255.0)
    e = smug_opt.explain(adapter, x, k=40, cell=2, backend="highs")
    assert e.result.status.name == "OPTIMAL" and e.mask_size == record["mask_size"]
    assert np.array_equal(e.mask, np.load(tmp_path / "r" / "mask.npy"))


@pytest.mark.slow
def test_cli_batch_explains_an_onnx_file(factory_model, digit_png, tmp_path):
    """A folder of PNGs on an ONNX model: a batch run, every input OPTIMAL."""
    from smug_opt.network.torch_reader import torch_to_onnx

    path = tmp_path / "cnn.onnx"
    path.write_bytes(torch_to_onnx(factory_model, (1, 28, 28)))
    explain_cli("--model", str(path), "--input", str(digit_png), out=tmp_path / "run")
    records = [json.loads(line) for line in (tmp_path / "run" / "records.jsonl").read_text().splitlines()]
    assert len(records) == 2 and all(r["status"] == "OPTIMAL" and r["verified"] for r in records)


def test_python_api_takes_a_module_an_onnx_path_and_a_network(factory_model, tmp_path):
    """``smug_opt.explain`` with an nn.Module, a .onnx path, a Network or a torch.export .pt2
    path gives one mask."""
    import smug_opt
    from smug_opt.data.mnist import load_digits
    from smug_opt.models.resolve import read_network
    from smug_opt.network.torch_reader import torch_to_onnx

    path = tmp_path / "cnn.onnx"
    path.write_bytes(torch_to_onnx(factory_model, (1, 28, 28)))
    x = load_digits().x_test[1]
    masks = []
    pt2 = tmp_path / "cnn.pt2"
    program = torch.export.export(factory_model.float().eval(), (torch.zeros(1, 1, 28, 28),))
    torch.export.save(program, str(pt2))
    for model in (factory_model, str(path), read_network(str(path)), str(pt2)):
        e = smug_opt.explain(model, x, k=40, cell=2, backend="highs")
        assert e.result.status.name == "OPTIMAL" and e.result.verified
        masks.append(e.mask)
    assert all(np.array_equal(masks[0], m) for m in masks[1:])


@pytest.mark.slow
def test_keras_and_network_adapters_give_one_mask_on_the_embedded_cnn():
    """The embedded mnist-cnn explained through Keras (KerasAdapter) and through its Network
    (read_keras → NetworkAdapter, head in torch): same first layer, same outputs, same
    selected neurons and the same OPTIMAL mask on real held-out digits."""
    import smug_opt
    from smug_opt.data.mnist import load_digits
    from smug_opt.models import zoo
    from smug_opt.models.network_adapter import NetworkAdapter
    from smug_opt.models.resolve import as_adapter
    from smug_opt.network.keras_reader import read_keras

    model = zoo.load("mnist-cnn", progress=False)
    keras_adapter, network_adapter = as_adapter(model), NetworkAdapter(read_keras(model))
    np.testing.assert_array_equal(keras_adapter.affine.kernel, network_adapter.affine.kernel)
    assert keras_adapter.affine.padding == network_adapter.affine.padding
    x = load_digits().x_test[:3]
    np.testing.assert_allclose(keras_adapter.predict(x), network_adapter.predict(x), atol=1e-6)
    for digit in x:
        ek, en = (smug_opt.explain(a, digit, backend="highs", k=100, gamma=0.5, cell=2)
                  for a in (keras_adapter, network_adapter))
        assert ek.result.status.name == en.result.status.name == "OPTIMAL"
        np.testing.assert_array_equal(ek.neurons, en.neurons)
        np.testing.assert_array_equal(ek.mask, en.mask)


def test_evaluate_takes_an_onnx_file_by_reference(factory_model, tmp_path):
    """``smug_opt.evaluate`` on a ModelRef to an ONNX file (with its declared input range),
    SMUG and a box baseline score every digit, and so do IG and Grad-CAM (by autodiff
    through the network adapter's torch module)."""
    from smug_opt.batch import ModelRef
    from smug_opt.data.mnist import load_digits
    from smug_opt.evaluate import evaluate
    from smug_opt.network.torch_reader import torch_to_onnx

    path = tmp_path / "cnn.onnx"
    path.write_bytes(torch_to_onnx(factory_model, (1, 28, 28)))
    ref = ModelRef(str(path), input_range=(0.0, 1.0))
    digits = load_digits()
    result = evaluate(ref, digits.x_test[:2], digits.y_test[:2], ["smug", "centerbox"], k=40, cell=2,
                      softmax=True, progress=False)  # the network outputs logits
    assert [s.method for s in result.summaries] == ["smug", "centerbox"]
    assert all(s.n == 2 and s.failures == 0 for s in result.summaries)
    gradients = evaluate(ref, digits.x_test[:2], digits.y_test[:2], ["ig", "gradcam"], softmax=True,
                         progress=False)
    assert all(s.n == 2 and s.failures == 0 for s in gradients.summaries)
    assert all(np.isfinite(o[m].saliency).all() and o[m].saliency.shape == (28, 28)
               for o in gradients.outcomes for m in ("ig", "gradcam"))
    # (Grad-CAM's ReLU may zero a whole map; IG never does on these digits)
    assert all(np.abs(o["ig"].saliency).max() > 0 for o in gradients.outcomes)
