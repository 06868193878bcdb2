"""Seeded random PyTorch networks of the families the readers cover, for the reader campaign
(``tests/network/test_generated_nets.py``): each draw is a small ``nn.Module`` mixing the
operations real nets use (input normalisation by Sub/Div, NHWC inputs through a permute,
Conv with stride/padding/'same'/dilation/groups/depthwise, unfused BatchNorm, ReLU/ReLU6/
clamp/LeakyReLU, max and average pooling with padding, ceil_mode and count_include_pad,
residual sums, constant padding, global average pooling, the flatten idioms, Linear (also on a 3-D
tensor) and ``x @ W + b``, a ReLU on the logits, a final softmax), and the same module exported to ONNX
at several opsets, to a ``torch.export`` ``.pt2`` file, or named by a factory."""

from __future__ import annotations

import copy
import functools
import hashlib
import io
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["FORMATS", "Arch", "build", "digits", "draw", "export_onnx", "export_pt2", "images", "real_inputs",
           "specs", "torch64", "write_factory"]

FAMILIES = ("mlp", "cnn", "cifar")
SHAPES = {"mlp": (1, 28, 28), "cnn": (1, 28, 28), "cifar": (3, 32, 32)}
FORMATS = ("onnx11", "onnx13", "onnx17", "pt2", "factory")
"""ONNX at three opsets (TorchScript exporter), a torch.export .pt2 file, a factory."""


@dataclass(frozen=True)
class Arch:
    """One draw: ``family``, ``seed`` and the choices the module is built from."""

    family: str
    seed: int
    choices: dict[str, Any]

    @property
    def input_shape(self) -> tuple[int, ...]:
        """The module's per-example input shape (NHWC when ``nhwc``)."""
        c, h, w = SHAPES[self.family]
        return (h, w, c) if self.choices.get("nhwc") else (c, h, w)


def draw(family: str, seed: int, **fixed: Any) -> Arch:
    """A random architecture of ``family`` (one of :data:`FAMILIES`); ``fixed`` overrides
    choices (a test that wants one operation sets it)."""
    rng = np.random.default_rng([seed, FAMILIES.index(family)])
    pick = lambda options: options[int(rng.integers(len(options)))]  # noqa: E731
    choices: dict[str, Any] = {
        "norm": pick(["none", "scalar", "channel"]),
        "flatten": pick(["view", "flatten", "reshape", "module", "squeeze"]),
        "dense": pick(["linear", "matmul", "addmm", "linear3d"]),
        "hidden": int(pick([6, 8, 12])),
        "act": pick(["relu", "relu6", "clamp", "leaky"]),
        "logit_relu": bool(rng.random() < 0.3),
        "softmax": bool(rng.random() < 0.3),
    }
    if family != "mlp":
        choices.update({
            "nhwc": bool(rng.random() < 0.3),
            "conv": pick(["plain", "stride", "asym", "same", "dilated", "groups"]),
            "channels": int(pick([2, 4])),
            "bn": bool(rng.random() < 0.6),
            "depthwise": bool(rng.random() < 0.4),
            "residual": bool(rng.random() < 0.4),
            "pad": bool(rng.random() < 0.3),
            "pool": pick(["max", "max_ceil", "max_pad", "avg", "avg_pad", "avg_pad_excl", "avg_ceil",
                          "none"]),
            "head": pick(["flatten", "global"]),
        })
    choices.update(fixed)
    return Arch(family, seed, choices)


def build(arch: Arch) -> Any:
    """The module of ``arch``, in eval mode, with ``input_shape`` set; trained for
    ``choices["train"]`` Adam steps on MNIST training digits (untrained nets mostly keep
    their prediction on an empty mask: nothing to explain)."""
    import torch

    torch.manual_seed(arch.seed)
    module = _Net(arch)
    if arch.choices.get("train"):
        module.load_state_dict(_trained(repr(arch)))
    module = module.eval()
    module.input_shape = arch.input_shape
    return module


@functools.lru_cache(maxsize=1)
def digits() -> Any:
    """The embedded MNIST digits (read once: the file takes seconds to parse)."""
    from smug_opt.data import load_digits

    return load_digits()


@functools.lru_cache(maxsize=32)
def _trained(key: str) -> dict[str, Any]:
    """The weights of the net ``key`` (an Arch's repr) after its training steps."""
    import torch

    from smug_opt.threads import one_thread

    arch = eval(key, {"Arch": Arch})  # our own repr of a dataclass of literals
    torch.manual_seed(arch.seed)
    module = _Net(arch)
    steps = int(arch.choices["train"])
    with one_thread():  # torch's thread pool on a loaded 2-core machine: many times slower
        x = torch.from_numpy(images(arch, digits().x_train[:512, :, :, 0]).astype(np.float32))
        y = torch.from_numpy(np.array(digits().y_train[:512]))
        optimiser = torch.optim.Adam(module.parameters(), lr=0.01)
        for step in range(steps):
            batch = slice(64 * (step % 8), 64 * (step % 8 + 1))
            out = module(x[batch])
            log_p = out.clamp_min(1e-12).log() if arch.choices["softmax"] else out.log_softmax(-1)
            loss = torch.nn.functional.nll_loss(log_p, y[batch])
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
    return {name: value.detach().clone() for name, value in module.state_dict().items()}


def images(arch: Arch, digits: np.ndarray) -> np.ndarray:
    """MNIST digits ``(n, 28, 28)`` in ``arch``'s input shape, float64 (CIFAR-shaped: the
    digit padded to 32×32 in three channels of different contrast)."""
    digits = np.asarray(digits, dtype=np.float64)
    if arch.family == "cifar":
        x = np.stack([np.pad(digits, ((0, 0), (2, 2), (2, 2))) * a for a in (1.0, 0.7, 0.4)], axis=1)
    else:
        x = digits[:, None]
    return np.ascontiguousarray(x.transpose(0, 2, 3, 1) if arch.choices.get("nhwc") else x)


def _activation(kind: str) -> Any:
    from torch import nn

    return {"relu": nn.ReLU(), "relu6": nn.ReLU6(), "clamp": _Clamp(), "leaky": nn.LeakyReLU(0.1)}[kind]


def _Clamp() -> Any:
    from torch import nn

    class Clamp(nn.Module):
        def forward(self, x: Any) -> Any:
            return x.clamp(-1.0, 2.0)

    return Clamp()


def _pool(kind: str) -> Any:
    from torch import nn

    return {
        "max": nn.MaxPool2d(2),
        "max_ceil": nn.MaxPool2d(3, stride=2, ceil_mode=True),
        "max_pad": nn.MaxPool2d(3, stride=2, padding=1),
        "avg": nn.AvgPool2d(2),
        "avg_pad": nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=True),
        "avg_pad_excl": nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False),
        "avg_ceil": nn.AvgPool2d(2, stride=2, ceil_mode=True),
        "none": nn.Identity(),
    }[kind]


def _conv(kind: str, c_in: int, c_out: int) -> Any:
    from torch import nn

    if kind == "stride":
        return nn.Conv2d(c_in, c_out, 3, stride=2, padding=1)
    if kind == "asym":
        return nn.Sequential(nn.ZeroPad2d((1, 0, 2, 1)), nn.Conv2d(c_in, c_out, (3, 2), stride=(2, 1)))
    if kind == "same":
        return nn.Conv2d(c_in, c_out, 4, padding="same")
    if kind == "dilated":
        return nn.Conv2d(c_in, c_out, 3, padding=2, dilation=2)
    if kind == "groups" and c_in > 1:
        return nn.Conv2d(c_in, c_out, 3, padding=1, groups=c_in if c_out % c_in == 0 else 1)
    return nn.Conv2d(c_in, c_out, 3, stride=2)


def _randomise_bn(bn: Any) -> Any:
    import torch

    with torch.no_grad():
        bn.running_mean.uniform_(-0.3, 0.3)
        bn.running_var.uniform_(0.5, 2.0)
        bn.weight.uniform_(0.5, 1.5)
        bn.bias.uniform_(-0.3, 0.3)
    return bn


def _Net(arch: Arch) -> Any:
    import torch
    from torch import nn

    c = arch.choices
    channels_in = SHAPES[arch.family][0]
    convolutional = arch.family != "mlp" and c.get("features", True)  # features=False: an MLP on images

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            mean = [0.1307] if c["norm"] == "scalar" else [0.5, 0.4, 0.45][:channels_in]
            std = [0.3081] if c["norm"] == "scalar" else [0.25, 0.3, 0.2][:channels_in]
            self.register_buffer("mean", torch.tensor(mean).reshape(1, -1, 1, 1))
            self.register_buffer("std", torch.tensor(std).reshape(1, -1, 1, 1))
            self.act = _activation(c["act"])
            features = int(np.prod(SHAPES[arch.family]))
            if convolutional:
                k = c["channels"]
                self.conv = _conv(c["conv"], channels_in, k)
                self.bn = _randomise_bn(nn.BatchNorm2d(k)) if c["bn"] else nn.Identity()
                self.depthwise = nn.Conv2d(k, k, 3, padding=1, groups=k) if c["depthwise"] else None
                self.residual = nn.Conv2d(k, k, 3, padding=1) if c["residual"] else None
                self.pool = _pool(c["pool"])
                with torch.no_grad():
                    features = int(np.prod(self.features(torch.zeros(1, *SHAPES[arch.family])).shape))
            self.fc1 = nn.Linear(features, c["hidden"])
            self.fc2 = nn.Linear(c["hidden"], 10)
            self.flat = nn.Flatten()

        def features(self, x: Any) -> Any:
            h = self.act(self.bn(self.conv(x)))
            if self.depthwise is not None:
                h = self.act(self.depthwise(h))
            if self.residual is not None:
                h = h + self.act(self.residual(h))
            if c["pad"]:
                h = nn.functional.pad(h, (1, 0, 0, 1), value=0.0)
            h = self.pool(h)
            if c["head"] == "global":
                mean = arch.seed % 2  # ReduceMean, else GlobalAveragePool
                h = h.mean(dim=(2, 3), keepdim=True) if mean else nn.functional.adaptive_avg_pool2d(h, 1)
            return h

        def flatten(self, h: Any) -> Any:
            kind = c["flatten"]
            if kind == "view":
                return h.contiguous().view(h.size(0), -1)
            if kind == "flatten":
                return torch.flatten(h, 1)
            if kind == "reshape":
                return h.reshape(-1, int(np.prod(h.shape[1:])))
            if kind == "squeeze" and h.dim() == 4 and h.shape[2] == h.shape[3] == 1:
                return h.squeeze(-1).squeeze(-1)
            return self.flat(h)

        def dense(self, layer: Any, h: Any) -> Any:
            if c["dense"] == "matmul":
                return h @ layer.weight.t() + layer.bias
            if c["dense"] == "linear3d":  # MatMul + Add on (N, 1, F), as nn.Linear exports a 3-D input
                return layer(h.unsqueeze(1)).squeeze(1)
            if c["dense"] == "addmm":
                return torch.addmm(layer.bias, h, layer.weight.t(), beta=0.5, alpha=2.0)
            return layer(h)

        def forward(self, x: Any) -> Any:
            if c.get("nhwc"):
                x = x.permute(0, 3, 1, 2)
            if c["norm"] != "none":
                x = (x - self.mean) / self.std
            if convolutional:
                x = self.features(x)
            h = self.act(self.dense(self.fc1, self.flatten(x)))
            scores = self.dense(self.fc2, h)
            if c["logit_relu"]:
                scores = torch.relu(scores)
            return torch.softmax(scores, dim=-1) if c["softmax"] else scores

    return Net()


def export_onnx(module: Any, arch: Arch, path: Path, *, opset: int = 17, dynamic: bool = True,
                fold: bool = False) -> Path:
    """``module`` exported with the TorchScript exporter to ``path`` (``fold``: the
    exporter's constant folding, which fuses nothing but may pre-compute constants)."""
    import torch

    buffer = io.BytesIO()
    axes = {"x": {0: "batch"}, "scores": {0: "batch"}} if dynamic else None
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (torch.zeros(1, *arch.input_shape),), buffer, dynamo=False,
                          opset_version=opset, do_constant_folding=fold, input_names=["x"],
                          output_names=["scores"], dynamic_axes=axes, training=torch.onnx.TrainingMode.EVAL)
    path.write_bytes(buffer.getvalue())
    return path


def export_pt2(module: Any, arch: Arch, path: Path) -> Path:
    """``module`` saved by ``torch.export.save`` (batch traced at 1)."""
    import torch

    program = torch.export.export(module, (torch.zeros(1, *arch.input_shape),))
    torch.export.save(program, str(path))
    return path


def write_factory(arch: Arch, folder: Path, name: str) -> str:
    """A module file ``folder/name.py`` whose ``net()`` builds ``arch``; the spec
    ``name:net`` for ``--model`` (``folder`` on ``sys.path``)."""
    (folder / f"{name}.py").write_text(
        "from generated_nets import Arch, build\n\n\n"
        f"def net():\n    return build(Arch({arch.family!r}, {arch.seed}, {arch.choices!r}))\n")
    return f"{name}:net"


def real_inputs(arch: Arch, n: int = 8) -> np.ndarray:
    """``n`` held-out MNIST digits in ``arch``'s input shape."""
    return images(arch, digits().x_test[:n, :, :, 0])


def torch64(module: Any, x: np.ndarray) -> np.ndarray:
    """``module``'s outputs in float64 (a copy of it in double precision)."""
    import torch

    from smug_opt.threads import one_thread

    with torch.no_grad(), one_thread():
        return copy.deepcopy(module).double()(torch.from_numpy(x)).numpy()


def specs(arch: Arch, module: Any, folder: Path, formats: tuple[str, ...] = FORMATS, *,
          dynamic: bool = True) -> dict[str, str]:
    """``--model`` values of ``module`` in each format (files and a factory in ``folder``)."""
    out = {}
    for fmt in formats:
        if fmt.startswith("onnx"):
            name = f"{arch.family}{arch.seed}_{fmt}{'d' if dynamic else 's'}.onnx"
            out[fmt] = str(export_onnx(module, arch, folder / name, opset=int(fmt[4:]), dynamic=dynamic))
        elif fmt == "pt2":
            out[fmt] = str(export_pt2(module, arch, folder / f"{arch.family}{arch.seed}.pt2"))
        else:
            key = hashlib.sha256(repr(arch).encode()).hexdigest()[:12]  # one module name per net
            out[fmt] = write_factory(arch, folder, f"factory_{arch.family}{arch.seed}_{key}")
    return out
