"""Integrated Gradients and Grad-CAM through the ONNX/PyTorch network adapter, against the
same computations done by hand on the original torch module."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from torch_networks import mnist_cnn, network_of  # noqa: E402

from smug_opt.evaluate import evaluate  # noqa: E402
from smug_opt.evaluate.network_baselines import (  # noqa: E402
    last_feature_map_node,
    network_grad_cam,
    network_integrated_gradients,
)
from smug_opt.models.network_adapter import NetworkAdapter  # noqa: E402


@pytest.fixture(scope="module")
def cnn():
    model = mnist_cnn(seed=1)
    adapter = NetworkAdapter(network_of(model, (1, 28, 28), output="softmax"))
    model.double()
    image = np.random.default_rng(0).random((28, 28, 1))
    return model, adapter, image


def _torch_input(image: np.ndarray) -> "torch.Tensor":
    return torch.as_tensor(image.transpose(2, 0, 1)[None], dtype=torch.float64)


def test_ig_matches_the_midpoint_rule_on_the_torch_module_and_is_complete(cnn):
    model, adapter, image = cnn
    label = 3
    ig = network_integrated_gradients(adapter, image, label, steps=32, batch_size=5)
    x = _torch_input(image)
    alphas = (torch.arange(32, dtype=torch.float64) + 0.5) / 32
    path = (alphas.view(-1, 1, 1, 1) * x).requires_grad_(True)
    probs = torch.softmax(model(path), dim=1)[:, label]
    (grad,) = torch.autograd.grad(probs.sum(), path)
    expected = (x[0] * grad.sum(0) / 32).sum(0).numpy()
    assert ig.shape == (28, 28)
    assert np.allclose(ig, expected, atol=1e-10)
    with torch.no_grad():
        gap = float(torch.softmax(model(x), 1)[0, label] - torch.softmax(model(0 * x), 1)[0, label])
    assert ig.sum() == pytest.approx(gap, abs=0.05 * abs(gap) + 1e-3)


def test_grad_cam_reads_the_last_feature_map_as_by_hand(cnn):
    model, adapter, image = cnn
    node = last_feature_map_node(adapter.network)
    assert adapter.network.nodes[node].shape == (8, 7, 7)  # the max-pooled conv activations
    label = 7
    cam = network_grad_cam(adapter, image, label)
    features = model[:6](_torch_input(image)).detach().requires_grad_(True)
    prob = torch.softmax(model[6:](features), dim=1)[0, label]
    (grad,) = torch.autograd.grad(prob, features)
    by_hand = torch.relu((features[0] * grad[0].mean(dim=(1, 2))[:, None, None]).sum(0)).detach().numpy()
    assert cam.shape == (28, 28)
    assert np.allclose(cam[2::4, 2::4], by_hand, rtol=0.3, atol=0.3 * by_hand.max() + 1e-12)
    assert np.unravel_index(cam.argmax(), cam.shape)[0] // 4 == np.unravel_index(by_hand.argmax(), (7, 7))[0]


def test_evaluate_runs_ig_and_gradcam_on_a_network_adapter(cnn):
    _, adapter, image = cnn
    images = np.stack([image, image[::-1]])
    labels = np.argmax(adapter.predict(images), axis=1)
    result = evaluate(adapter, images, labels, ["ig", "gradcam", "centerbox"], ig_steps=8,
                      sanity_stages=1, progress=False)
    for per_input in result.outcomes:
        for method in ("ig", "gradcam"):
            outcome = per_input[method]
            assert outcome.error is None and outcome.saliency.shape == (28, 28)
            assert np.isfinite(outcome.deletion_auc) and np.isfinite(outcome.road_morf)
            assert outcome.sanity_cascade[0][0] == 3  # all three weighted layers randomised


def test_gradient_methods_still_refuse_a_bare_predict_function():
    with pytest.raises(ValueError, match="gradients"):
        evaluate(lambda b: np.full((len(b), 2), 0.5), np.zeros((1, 8, 8, 1)), [0], ["ig"], progress=False)


def test_a_flat_input_network_is_evaluated_on_pictures(tmp_path):
    """An MLP reading 784 flat values (ERAN's, VNN-COMP's mnistfc) explains 28×28 pictures:
    ``evaluate --images`` loads them at 28×28, predicts on them and takes IG in picture space
    (it raised IndexError; IG then refused the picture)."""
    import json
    import subprocess
    import sys

    from PIL import Image

    from smug_opt.data.mnist import load_digits
    from smug_opt.network.graph import Dense, Input, Network, Node, Relu

    rng = np.random.default_rng(0)
    network = Network((Node("x", Input(), (), (784,)),
                       Node("fc1", Dense(rng.normal(size=(16, 784)) * 0.05, np.zeros(16)), (0,), (16,)),
                       Node("relu", Relu(), (1,), (16,)),
                       Node("fc2", Dense(rng.normal(size=(10, 16)), np.zeros(10)), (2,), (10,))))
    adapter = NetworkAdapter(network)
    digits = load_digits().x_test[:2]
    scores = adapter.predict(digits)  # rows of 28×28×1 for a (784,) input
    np.testing.assert_allclose(scores, network.forward(digits.reshape(2, 784)), rtol=0, atol=1e-12)
    ig = network_integrated_gradients(adapter, digits[0], 3, steps=16)
    assert ig.shape == (28, 28)
    np.testing.assert_allclose(ig.sum(), scores[0, 3] - network.forward(np.zeros((1, 784)))[0, 3], rtol=0.05)

    pytest.importorskip("onnx")
    from network_cases import tiny_onnx

    (tmp_path / "mlp.onnx").write_bytes(tiny_onnx(0, n_in=784, hidden=16, n_out=10))
    images = tmp_path / "images"
    images.mkdir()
    for i, digit in enumerate(digits):
        Image.fromarray((digit[:, :, 0] * 255).round().astype(np.uint8)).save(images / f"d{i}.png")
    model = str(tmp_path / "mlp.onnx")
    proc = subprocess.run([sys.executable, "-m", "smug_opt", "evaluate", "--model", model,
                           "--images", str(images), "--input-range", "0,1", "--n", "2",
                           "--methods", "smug,ig", "--k", "4", "--out", str(tmp_path / "run"), "--quiet"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    records = [json.loads(line) for line in (tmp_path / "run" / "records.jsonl").read_text().splitlines()]
    assert {r["method"] for r in records} == {"smug", "ig"} and len(records) == 4
    assert not any((r.get("error") or "").startswith("map:") for r in records), records
