"""The PyTorch reader (through ONNX) against PyTorch's own forward pass, in float64, on
real digits: a module, a torch.export .pt2 file, and ``load_model`` specs."""

from __future__ import annotations

import numpy as np
import pytest
from network_cases import small_torch_cnn

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")

from smug_opt.network.graph import AvgPool, Clip, Conv, LeakyRelu, MaxPool, Scale  # noqa: E402
from smug_opt.network.load import load_model, model_spec_kind  # noqa: E402
from smug_opt.network.lower import lower  # noqa: E402
from smug_opt.network.torch_reader import read_exported_program, read_torch  # noqa: E402


@pytest.fixture(scope="module")
def digits() -> np.ndarray:
    from smug_opt.data import load_digits

    images = load_digits().x_test[:16, 8:20, 8:20, 0].astype(np.float64)  # 12x12 crops of real digits
    return images[:, None]  # NCHW


def _torch64(module, x: np.ndarray) -> np.ndarray:
    import copy

    double = copy.deepcopy(module).double().eval()
    with torch.no_grad():
        return double(torch.from_numpy(x)).numpy()


def test_module_matches_torch_in_float64(digits):
    module = small_torch_cnn()
    net = read_torch(module, (1, 12, 12), input_range=(0.0, 1.0))
    assert module.training  # the reader restores the module's mode
    assert net.name == "SmallCNN" and net.input_shape == (1, 12, 12) and net.input_range == (0.0, 1.0)
    ops = [type(node.op) for node in net.nodes]
    assert ops[1] is Scale and Scale not in ops[2:]  # normalisation in front, BatchNorm folded
    for kind in (Conv, Clip, LeakyRelu, MaxPool, AvgPool):
        assert kind in ops
    expected = _torch64(module, digits)
    np.testing.assert_allclose(net.forward(digits), expected, rtol=0, atol=1e-9)
    pre, flat = lower(net)
    np.testing.assert_allclose(flat.forward(pre(digits))[-1], expected, rtol=0, atol=1e-9)


def test_exported_program_file(tmp_path, digits):
    module = small_torch_cnn().eval()
    program = torch.export.export(module, (torch.zeros(1, 1, 12, 12),))
    path = tmp_path / "small.pt2"
    torch.export.save(program, str(path))
    net = read_exported_program(path)
    assert net.name == "small" and net.input_shape == (1, 12, 12)
    np.testing.assert_allclose(net.forward(digits), _torch64(module, digits), rtol=0, atol=1e-9)
    assert load_model(str(path)).digest == net.digest


def test_factory_spec_reads_the_input_shape_attribute(digits):
    assert model_spec_kind("network_cases:small_torch_cnn") == "factory"
    net = load_model("network_cases:small_torch_cnn")
    np.testing.assert_allclose(net.forward(digits), _torch64(small_torch_cnn(), digits), rtol=0, atol=1e-9)


def test_bad_specs_say_what_is_wrong(tmp_path):
    with pytest.raises(ValueError, match="never loaded"):
        model_spec_kind("weights.pt")
    with pytest.raises(ValueError, match="cannot import 'no_such_package'"):
        load_model("no_such_package.nets:build")
    with pytest.raises(ValueError, match="has no 'missing'"):
        load_model("network_cases:missing")
    bad = tmp_path / "bad.pt2"
    bad.write_bytes(b"junk")
    with pytest.raises(ValueError, match="is not a torch.export program"):
        read_exported_program(bad)
    with pytest.raises(ValueError, match="expected a torch.nn.Module"):
        read_torch(object(), (1, 2))


def test_common_pytorch_idioms(digits):
    """F.pad, padding='same', bias-free Conv+BatchNorm, hardtanh, AdaptiveAvgPool2d(1),
    torch.flatten, BatchNorm1d, x.mean((2, 3)), a final sigmoid: as torch computes them."""
    from torch import nn
    from torch.nn import functional as F

    class Idioms(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(1)
            self.conv = nn.Conv2d(1, 8, 3, padding="same")
            self.down = nn.Conv2d(8, 8, 3, stride=2, padding=1, bias=False)
            self.bn = nn.BatchNorm2d(8)
            self.gap = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(8, 16)
            self.bn1 = nn.BatchNorm1d(16)
            self.out = nn.Linear(16, 1)
            with torch.no_grad():
                for norm in (self.bn, self.bn1):
                    norm.running_mean.uniform_(-1, 1)
                    norm.running_var.uniform_(0.5, 2)

        def forward(self, x):
            x = F.hardtanh(self.conv(F.pad(x, (1, 2, 0, 1))), -1.0, 1.0)
            x = torch.relu(self.bn(self.down(x)))
            x = torch.flatten(self.gap(x), 1) + x.mean((2, 3))
            x = F.leaky_relu(self.bn1(self.fc(x)))
            return torch.sigmoid(self.out(x))

    module = Idioms().eval()
    net = read_torch(module, (1, 12, 12))
    assert net.output == "sigmoid" and net.num_outputs == 1
    expected = _torch64(module, digits)
    np.testing.assert_allclose(1 / (1 + np.exp(-net.forward(digits))), expected, rtol=0, atol=1e-9)


def test_ceil_mode_max_pooling_and_a_final_log_softmax(digits):
    """MaxPool2d(ceil_mode=True) whose last windows overhang the input (read as more end
    padding that never wins; a window starting in the padding dropped, as torch does) and
    F.log_softmax on the output (PyTorch's MNIST example): as torch computes them."""
    from torch import nn
    from torch.nn import functional as F

    class Tutorial(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(2)
            self.conv = nn.Conv2d(1, 4, 3)
            self.pool = nn.MaxPool2d(3, stride=2, ceil_mode=True)   # 10 -> 5 (floor mode: 4)
            self.pool2 = nn.MaxPool2d(2, stride=2, padding=1, ceil_mode=True)  # 5 -> 3: a 4th in padding
            self.fc = nn.Linear(4 * 3 * 3, 10)

        def forward(self, x):
            x = self.pool2(self.pool(torch.relu(self.conv(x))))
            return F.log_softmax(self.fc(torch.flatten(x, 1)), dim=1)

    module = Tutorial().eval()
    net = read_torch(module, (1, 12, 12))
    assert net.output == "log_softmax" and [n.shape for n in net.nodes if isinstance(n.op, MaxPool)] == \
        [(4, 5, 5), (4, 3, 3)]
    scores = net.forward(digits)
    log_probs = scores - np.log(np.exp(scores).sum(axis=1, keepdims=True))
    np.testing.assert_allclose(log_probs, _torch64(module, digits), rtol=0, atol=1e-9)


@pytest.mark.parametrize("padding, count_include_pad", [(0, True), (0, False), (1, True), (1, False)])
def test_ceil_mode_average_pooling_past_the_edge(digits, padding, count_include_pad):
    """AvgPool2d(ceil_mode=True) whose last windows overhang the input: the overhang never
    counts in the mean, the padding does where count_include_pad says (torch and
    onnxruntime agree; was refused before the generated-nets campaign)."""
    from torch import nn

    torch.manual_seed(3)
    module = nn.Sequential(nn.Conv2d(1, 2, 3), nn.AvgPool2d(3, stride=2, padding=padding, ceil_mode=True,
                                                          count_include_pad=count_include_pad),
                           nn.Flatten(), nn.LazyLinear(4)).eval()
    module(torch.zeros(1, 1, 12, 12))
    net = read_torch(module, (1, 12, 12))
    assert [n.shape for n in net.nodes if isinstance(n.op, AvgPool)] == [(2, 5 + padding, 5 + padding)]
    np.testing.assert_allclose(net.forward(digits), _torch64(module, digits), rtol=0, atol=1e-9)


def test_broken_files_and_factories_are_one_error_each(tmp_path, monkeypatch, capfd):
    (tmp_path / "user_factories.py").write_text(
        "def number():\n    return 42\n\n"
        "def failing():\n    raise RuntimeError('no weights here')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ValueError, match=r"'user_factories:number': the factory returned int, not"):
        load_model("user_factories:number")
    with pytest.raises(ValueError, match=r"the factory raised RuntimeError: no weights here"):
        load_model("user_factories:failing")
    bad = tmp_path / "broken.pt2"
    bad.write_bytes(b"PK\x03\x04 not a zip archive")
    capfd.readouterr()
    with pytest.raises(ValueError, match="is not a torch.export program"):
        read_exported_program(bad)
    assert capfd.readouterr().err == ""  # torch's loader logs a traceback first: kept quiet
