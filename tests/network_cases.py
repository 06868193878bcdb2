"""Small networks the tests share: a structured network with every graph operation once, a
PyTorch CNN with every layer kind the readers cover, a tiny ONNX MLP."""

from __future__ import annotations

import numpy as np

from smug_opt.network.graph import (
    Add,
    AvgPool,
    Clip,
    Conv,
    Dense,
    Input,
    LeakyRelu,
    MaxPool,
    Network,
    Node,
    Pad,
    Relu,
    Reshape,
    Scale,
    Transpose,
)


def _random(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.normal(size=shape)


def all_ops_network(rng: np.random.Generator) -> Network:
    """Every operation once, on (3, 9, 9) inputs."""
    nodes = [
        Node("x", Input(), (), (3, 9, 9)),
        Node("norm", Scale(_random(rng, 3, 1, 1), _random(rng, 3, 1, 1)), (0,), (3, 9, 9)),
        Node("conv", Conv(_random(rng, 6, 3, 3, 3), _random(rng, 6), (2, 1), (1, 0, 2, 1), (1, 2)), (1,),
             (6, 5, 6)),
        Node("relu6", Clip(0.0, 6.0), (2,), (6, 5, 6)),
        Node("dw", Conv(_random(rng, 6, 1, 3, 3), _random(rng, 6), pads=(1, 1, 1, 1), groups=6), (3,),
             (6, 5, 6)),
        Node("leaky", LeakyRelu(0.1), (4,), (6, 5, 6)),
        Node("res", Add(), (3, 5), (6, 5, 6)),
        Node("pad", Pad((0, 1, 1, 0), 0.5), (6,), (6, 6, 7)),
        Node("max", MaxPool((2, 2), (2, 2), (1, 1, 1, 1)), (7,), (6, 4, 4)),
        Node("avg", AvgPool((3, 3), (1, 1), (1, 1, 1, 1), count_include_pad=False), (8,), (6, 4, 4)),
        Node("avgc", AvgPool((2, 2), (2, 2), (1, 1, 0, 0), count_include_pad=True), (9,), (6, 2, 2)),
        Node("t", Transpose((1, 2, 0)), (10,), (2, 2, 6)),
        Node("flat", Reshape(), (11,), (24,)),
        Node("dense", Dense(_random(rng, 10, 24), _random(rng, 10)), (12,), (10,)),
        Node("relu", Relu(), (13,), (10,)),
    ]
    return Network(tuple(nodes), name="all-ops")


def small_torch_cnn():
    """A PyTorch CNN (NCHW) with every layer kind the readers cover: input normalisation,
    Conv+BatchNorm, ReLU6, a dilated depthwise Conv, LeakyReLU, a residual Add, max and
    average pooling, ``x.view(x.size(0), -1)``, Linear layers; ``input_shape`` says its
    input (a factory for ``load_model("network_cases:small_torch_cnn")``)."""
    import torch
    from torch import nn

    class SmallCNN(nn.Module):
        input_shape = (1, 12, 12)

        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.register_buffer("mean", torch.tensor(0.1307))
            self.register_buffer("std", torch.tensor(0.3081))
            self.conv = nn.Conv2d(1, 6, 3, stride=2, padding=1)
            self.bn = nn.BatchNorm2d(6)
            self.depthwise = nn.Conv2d(6, 6, 3, padding=2, dilation=2, groups=6)
            self.pool = nn.MaxPool2d(2, padding=1)
            self.avg = nn.AvgPool2d(2, stride=1, padding=1, count_include_pad=False)
            self.fc1 = nn.Linear(6 * 5 * 5, 16)
            self.prelu = nn.PReLU(init=0.05)
            self.fc2 = nn.Linear(16, 10)
            with torch.no_grad():  # non-trivial inference statistics
                self.bn.running_mean.uniform_(-0.5, 0.5)
                self.bn.running_var.uniform_(0.5, 2.0)
                self.bn.weight.uniform_(0.5, 1.5)
                self.bn.bias.uniform_(-0.5, 0.5)

        def forward(self, x):
            x = (x - self.mean) / self.std
            h = nn.functional.relu6(self.bn(self.conv(x)))
            h = h + nn.functional.leaky_relu(self.depthwise(h), 0.1)
            h = self.avg(self.pool(h))
            h = self.prelu(self.fc1(h.view(h.size(0), -1)))
            return self.fc2(h)

    return SmallCNN()


def rgb_torch_cnn():
    """A PyTorch CNN on 3×8×8 colour inputs (NCHW): Conv(stride 2) → ReLU → Linear (a
    factory for ``as_adapter("network_cases:rgb_torch_cnn")``)."""
    import torch
    from torch import nn

    torch.manual_seed(1)
    model = nn.Sequential(nn.Conv2d(3, 4, 3, stride=2, padding=1), nn.ReLU(), nn.Flatten(),
                          nn.Linear(4 * 4 * 4, 5))
    model.input_shape = (3, 8, 8)
    return model


def tiny_onnx(seed: int, n_in: int = 5, hidden: int = 8, n_out: int = 3) -> bytes:
    """An ONNX model (bytes): x (1, n_in) in [0, 1] → (x − mean)/std → Dense → ReLU → Dense
    → scores, the normalisation in the graph."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    arrays = {"mean": np.full((1, n_in), 0.5), "std": np.full((1, n_in), 0.25),
              "w1": rng.normal(size=(n_in, hidden)), "b1": rng.normal(size=hidden) * 0.1,
              "w2": rng.normal(size=(hidden, n_out)), "b2": rng.normal(size=n_out) * 0.1}
    nodes = [helper.make_node("Sub", ["x", "mean"], ["c"]), helper.make_node("Div", ["c", "std"], ["n"]),
             helper.make_node("Gemm", ["n", "w1", "b1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("Gemm", ["r", "w2", "b2"], ["out"])]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, n_in])]
    graph = helper.make_graph(nodes, "tiny", inputs,
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, n_out])],
                              [numpy_helper.from_array(v.astype(np.float32), k) for k, v in arrays.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
