"""Small structured networks the network tests share: every graph operation once."""

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
