"""The real evaluation suites' inputs: the ImageNet photos (built, not downloaded) and the
CIFAR-10 test images recovered from the VNN-LIB specs beside the networks trained by others."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from smug_opt.evaluate.loaders import load_spec_images

BENCHMARKS = Path(__file__).resolve().parents[3] / "shared" / "nets" / "vnncomp2021" / "benchmarks"
CIFAR = {  # network, its specs, the distinct images they bound
    "cifar10_small": ("marabou-cifar10/nets/cifar10_small.onnx", "marabou-cifar10/specs", 12),
    "resnet_2b": ("cifar10_resnet/onnx/resnet_2b.onnx", "cifar10_resnet/vnnlib_properties_pgd_filtered", 48),
}


def _cifar(name: str) -> tuple[Path, Path, int]:
    net, specs, count = CIFAR[name]
    if not (BENCHMARKS / net).exists():
        pytest.skip(f"{BENCHMARKS / net} absent (the external networks live in ../shared/nets beside "
                    "the repo)")
    return BENCHMARKS / net, BENCHMARKS / specs, count


def test_imagenet_suite_is_24_photos_built_the_same_every_time():
    pytest.importorskip("skimage")
    pytest.importorskip("sklearn")
    from smug_opt.models.imagenet import PHOTOS, evaluation_photos

    first, second = evaluation_photos(), evaluation_photos()
    assert len(first) == 24 == 4 * len(PHOTOS) and list(first) == list(second)
    for name, image in first.items():
        assert image.shape == (224, 224, 3) and image.min() >= 0 and image.max() <= 255
        np.testing.assert_array_equal(image, second[name])
    np.testing.assert_array_equal(first["coffee_flip"], first["coffee"][:, ::-1])
    np.testing.assert_array_equal(first["coffee_zoom_flip"], first["coffee_zoom"][:, ::-1])
    assert not np.allclose(first["coffee_zoom"], first["coffee"])  # a zoom, not a copy


@pytest.mark.slow  # reading the 72 specs takes 20-60 s
@pytest.mark.parametrize("name", list(CIFAR))
def test_cifar_spec_images_are_classified_as_their_specs_say(name):
    from smug_opt.models.resolve import as_adapter

    net, specs, count = _cifar(name)
    adapter = as_adapter(str(net))
    inputs, labels, names = load_spec_images(specs, adapter.input_view)
    assert inputs.shape == (count, 32, 32, 3) and labels.shape == (count,) and len(set(names)) == count
    np.testing.assert_array_equal(np.argmax(adapter.predict(inputs), axis=1), labels)


@pytest.mark.slow
def test_evaluate_cli_on_the_cifar10_small_specs(tmp_path):
    net, specs, count = _cifar("cifar10_small")
    proc = subprocess.run([sys.executable, "-m", "smug_opt", "evaluate", "--model", str(net),
                           "--specs", str(specs), "--methods", "smug,gradcam", "--k", "100", "--cell", "2",
                           "--curve-steps", "10",
                           "--road-levels", "0.5", "--out", str(tmp_path), "--quiet"],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"{count} image(s) recovered from the specs" in proc.stderr
    records = [json.loads(line) for line in (tmp_path / "records.jsonl").read_text().splitlines()]
    smug = [r for r in records if r["method"] == "smug"]
    assert len(smug) == count and all(r["status"] == "OPTIMAL" and r["sparsity"] > 0 for r in smug)
    assert json.loads((tmp_path / "run.json").read_text())["config"]["labels"] == [
        int(v) for v in load_spec_images(specs, _adapter_view(net))[1]]


def _adapter_view(net: Path):
    from smug_opt.models.resolve import as_adapter

    return as_adapter(str(net)).input_view


def test_images_and_specs_are_exclusive(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "smug_opt", "evaluate", "--model", "m.onnx", "--images",
                           str(tmp_path), "--specs", str(tmp_path), "--out", str(tmp_path / "o"), "--quiet"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "give --images or --specs, not both" in proc.stderr
