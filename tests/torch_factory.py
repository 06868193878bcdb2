"""A ``package.module:factory`` for the CLI tests: ``smug-opt explain --model
torch_factory:digit_cnn`` (with this folder on PYTHONPATH) builds a small MNIST CNN, seeded
and trained for a few steps on real digits, so every call returns the same weights."""

from __future__ import annotations

import torch
from torch import nn
from torch_networks import mnist_cnn, train

from smug_opt.data.mnist import load_digits


def digit_cnn() -> nn.Module:
    """Conv(stride 2) → BatchNorm → ReLU → Conv → MaxPool → Linear, NCHW 1×28×28 in [0, 1]."""
    torch.set_num_threads(1)  # the same float32 training arithmetic on every machine
    digits = load_digits()
    model = train(mnist_cnn(seed=0), digits.x_train[:512].transpose(0, 3, 1, 2), digits.y_train[:512])
    model.input_shape = (1, 28, 28)
    return model
