"""Small PyTorch models for the adapter tests and their hand-built Networks (read layer by
layer from their weights; the readers' own torch reader is tested on its own)."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from smug_opt.network.graph import (
    AvgPool,
    Clip,
    Conv,
    Dense,
    Input,
    LeakyRelu,
    MaxPool,
    Network,
    Node,
    Relu,
    Reshape,
    Scale,
)


def _pair(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v, v)


def weight(tensor: torch.Tensor) -> np.ndarray:
    return tensor.detach().double().numpy()


def _op(layer: nn.Module):
    if isinstance(layer, nn.Linear):
        bias = weight(layer.bias) if layer.bias is not None else np.zeros(layer.out_features)
        return Dense(weight(layer.weight), bias)
    if isinstance(layer, nn.Conv2d):
        ph, pw = _pair(layer.padding)
        bias = weight(layer.bias) if layer.bias is not None else np.zeros(layer.out_channels)
        return Conv(weight(layer.weight), bias, _pair(layer.stride), (ph, pw, ph, pw), _pair(layer.dilation),
                    layer.groups)
    if isinstance(layer, nn.BatchNorm2d):
        scale = weight(layer.weight) / np.sqrt(weight(layer.running_var) + layer.eps)
        shift = weight(layer.bias) - weight(layer.running_mean) * scale
        return Scale(scale[:, None, None], shift[:, None, None])
    if isinstance(layer, nn.ReLU):
        return Relu()
    if isinstance(layer, nn.ReLU6):
        return Clip(0.0, 6.0)
    if isinstance(layer, nn.LeakyReLU):
        return LeakyRelu(layer.negative_slope)
    if isinstance(layer, nn.MaxPool2d):
        p = _pair(layer.padding)
        return MaxPool(_pair(layer.kernel_size), _pair(layer.stride), (p[0], p[1], p[0], p[1]))
    if isinstance(layer, nn.AvgPool2d):
        p = _pair(layer.padding)
        return AvgPool(_pair(layer.kernel_size), _pair(layer.stride), (p[0], p[1], p[0], p[1]),
                       layer.count_include_pad)
    if isinstance(layer, nn.Flatten):
        return Reshape()
    raise TypeError(f"no Network op for {type(layer).__name__}")


def network_of(model: nn.Sequential, input_shape: tuple[int, ...], *, output: str = "logits",
               normalise: tuple[float, float] | None = None) -> Network:
    """The Network of a Sequential of the layers above (``normalise=(mean, std)``: an input
    normalisation node in front, as ERAN's nets have)."""
    nodes = [Node("input", Input(), (), input_shape)]
    x = torch.zeros(1, *input_shape, dtype=torch.float64)
    if normalise is not None:
        mean, std = normalise
        nodes.append(Node("normalise", Scale(np.array(1 / std), np.array(-mean / std)), (0,), input_shape))
        x = (x - mean) / std
    model = model.double().eval()
    for i, layer in enumerate(model):
        x = layer(x)
        nodes.append(Node(f"{i}:{type(layer).__name__}", _op(layer), (len(nodes) - 1,), tuple(x.shape[1:])))
    model.float()
    return Network(tuple(nodes), output=output, name="torch-test")


def mnist_cnn(seed: int = 0) -> nn.Sequential:
    """Conv(stride 2, padding 1) → BatchNorm → ReLU → Conv → MaxPool → Flatten → Linear."""
    torch.manual_seed(seed)
    model = nn.Sequential(
        nn.Conv2d(1, 8, 3, stride=2, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
        nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(8 * 7 * 7, 10),
    )
    with torch.no_grad():  # non-trivial inference statistics, so the folding is tested
        model[1].running_mean.uniform_(-0.2, 0.2)
        model[1].running_var.uniform_(0.5, 2.0)
        model[1].weight.uniform_(0.5, 1.5)
        model[1].bias.uniform_(-0.1, 0.1)
    return model.eval()


def train(model: nn.Module, x: np.ndarray, y: np.ndarray, *, steps: int = 60, seed: int = 0) -> nn.Module:
    """A few Adam steps on real digits (inputs in the model's own layout)."""
    torch.manual_seed(seed)
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    xs, ys = torch.tensor(np.array(x), dtype=torch.float32), torch.tensor(np.array(y), dtype=torch.long)
    for step in range(steps):
        batch = slice((step * 64) % len(xs), (step * 64) % len(xs) + 64)
        opt.zero_grad()
        nn.functional.cross_entropy(model(xs[batch]), ys[batch]).backward()
        opt.step()
    return model.eval()
