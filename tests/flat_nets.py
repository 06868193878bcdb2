"""Small FlatNetworks built by hand for the bounds tests: MLPs, a conv/max-pool/residual
net with every layer kind, and an exact (rational) forward pass to check rigour against."""

from __future__ import annotations

import itertools
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog

from smug_opt.bounds import Box, propagate
from smug_opt.network.flat import FlatLayer, FlatNetwork

if TYPE_CHECKING:  # torch only where a chain is asked for
    from smug_opt.bounds.relu_chain import ChainBounds
    from smug_opt.robustness.bab import Leaves


def linear(inputs: int, W: np.ndarray, b: np.ndarray) -> FlatLayer:
    return FlatLayer("linear", (inputs,), W.shape[0], matrix=sp.csr_matrix(W), bias=np.asarray(b, float))


def mlp(rng: np.random.Generator, sizes: list[int], scale: float = 1.0) -> FlatNetwork:
    """Dense layers with ReLU between them (He-like weights times ``scale``)."""
    layers = [FlatLayer("input", (), sizes[0])]
    for i, (a, b) in enumerate(itertools.pairwise(sizes)):
        layers.append(linear(len(layers) - 1, rng.normal(size=(b, a)) * scale / np.sqrt(a),
                             rng.normal(size=b) * 0.3))
        if i < len(sizes) - 2:
            layers.append(FlatLayer("relu", (len(layers) - 1,), b))
    return FlatNetwork(tuple(layers), (sizes[0],))


def conv_matrix(rng: np.random.Generator, channels: int, size: int, out: int, k: int) -> np.ndarray:
    """A dense matrix of a stride-1, unpadded ``k``×``k`` convolution on (channels, size, size)."""
    kernel = rng.normal(size=(out, channels, k, k)) / np.sqrt(channels * k * k)
    s = size - k + 1
    W = np.zeros((out * s * s, channels * size * size))
    for o in range(out):
        for i in range(s):
            for j in range(s):
                row = (o * s + i) * s + j
                for c in range(channels):
                    for di in range(k):
                        W[row, c * size * size + (i + di) * size + (j + np.arange(k))] = kernel[o, c, di]
    return W


def pool_windows(channels: int, size: int) -> np.ndarray:
    """2×2 windows, stride 1 (overlapping), with one padded (-1) entry per window on the edge."""
    s = size - 1
    windows = []
    for c in range(channels):
        for i in range(s):
            for j in range(s):
                base = c * size * size + i * size + j
                window = [base, base + 1, base + size, base + size + 1]
                windows.append(window + ([-1] if j == 0 else [base]))
    return np.array(windows, dtype=np.int64)


def every_kind(rng: np.random.Generator) -> FlatNetwork:
    """(2, 5, 5) input → conv 3×3 (3 ch) → leaky_relu → maxpool 2×2 → linear → clip →
    linear + residual add → relu → linear 3 logits: every flat layer kind."""
    conv = conv_matrix(rng, 2, 5, 3, 3)  # (27, 50)
    layers = [FlatLayer("input", (), 50),
              linear(0, conv, rng.normal(size=27) * 0.3),                    # 1
              FlatLayer("leaky_relu", (1,), 27, alpha=0.1),                  # 2
              FlatLayer("maxpool", (2,), 12, windows=pool_windows(3, 3)),    # 3
              linear(3, rng.normal(size=(12, 12)) / 3, rng.normal(size=12) * 0.3),  # 4
              FlatLayer("clip", (4,), 12, lo=-0.5, hi=0.8),                  # 5
              linear(5, rng.normal(size=(12, 12)) / 3, rng.normal(size=12) * 0.3),  # 6
              FlatLayer("add", (6, 5), 12),                                  # 7
              FlatLayer("relu", (7,), 12),                                   # 8
              linear(8, rng.normal(size=(3, 12)) / 3, rng.normal(size=3) * 0.3)]   # 9
    return FlatNetwork(tuple(layers), (2, 5, 5))


def exact_forward(network: FlatNetwork, x: np.ndarray) -> list[list[Fraction]]:
    """Every layer's output for one input, in exact rational arithmetic on the float weights."""
    values: list[list[Fraction]] = [[Fraction(float(v)) for v in x]]
    for layer in network.layers[1:]:
        v = values[layer.inputs[0]]
        if layer.kind == "linear":
            W = layer.matrix.tocsr()
            out = []
            for r in range(layer.size):
                lo, hi = W.indptr[r], W.indptr[r + 1]
                total = Fraction(float(layer.bias[r]))
                for c, w in zip(W.indices[lo:hi], W.data[lo:hi], strict=True):
                    total += Fraction(float(w)) * v[c]
                out.append(total)
        elif layer.kind == "relu":
            out = [max(a, Fraction(0)) for a in v]
        elif layer.kind == "leaky_relu":
            out = [a if a >= 0 else Fraction(layer.alpha) * a for a in v]
        elif layer.kind == "clip":
            out = [min(max(a, Fraction(layer.lo)), Fraction(layer.hi)) for a in v]
        elif layer.kind == "maxpool":
            out = [max(v[i] for i in window if i >= 0) for window in layer.windows]
        else:
            out = [a + b for a, b in zip(v, values[layer.inputs[1]], strict=True)]
        values.append(out)
    return values


def exact_minimum(net: FlatNetwork, lo: np.ndarray, hi: np.ndarray, c: np.ndarray,
                  splits: list[np.ndarray] | None = None) -> float:
    """min c·y over the box of a ReLU chain (:func:`mlp`), and over the splits' subdomain
    (1 active, -1 inactive): one LP per activation pattern
    (inf when the subdomain is empty)."""
    linear = [layer.affine for layer in net.layers[1::2]]
    widths = [W.shape[0] for W, _ in linear[:-1]]
    best = np.inf
    for pattern in itertools.product([0, 1], repeat=sum(widths)):
        masks = np.split(np.array(pattern, dtype=float), np.cumsum(widths)[:-1])
        if splits is not None and any(np.any((s == 1) & (m == 0)) or np.any((s == -1) & (m == 1))
                                      for s, m in zip(splits, masks, strict=True)):
            continue
        A, b = np.eye(lo.size), np.zeros(lo.size)  # the current layer's input as A·x + b
        rows, rhs = [], []
        for (W, bias), m in zip(linear[:-1], masks, strict=True):
            Wd = W.toarray()
            zA, zb = Wd @ A, Wd @ b + bias
            sign = np.where(m == 1, -1.0, 1.0)  # active: -z <= 0; inactive: z <= 0
            rows.append(sign[:, None] * zA)
            rhs.append(-sign * zb)
            A, b = m[:, None] * zA, m * zb
        W, bias = linear[-1]
        obj = c @ W.toarray() @ A
        const = c @ (W.toarray() @ b + bias)
        res = linprog(obj, A_ub=np.vstack(rows), b_ub=np.concatenate(rhs),
                      bounds=list(zip(lo, hi, strict=True)), method="highs")
        if res.status == 0:
            best = min(best, float(res.fun + const))
    return best


def chain_of(net: FlatNetwork, lo: np.ndarray, hi: np.ndarray) -> ChainBounds:
    """The chain of an MLP from :func:`mlp` with CROWN's intervals over the box."""
    from smug_opt.bounds.relu_chain import ChainBounds, ReluChain

    fb = propagate(net, Box(lo, hi), method="crown")
    relus = range((len(net.layers) - 2) // 2)
    return ChainBounds.of(ReluChain.from_flat(net), lo, hi, [fb.lo[2 * i + 1] for i in relus],
                          [fb.hi[2 * i + 1] for i in relus])


def covered(net: FlatNetwork, leaves: Leaves, points: np.ndarray) -> np.ndarray:
    """Per point, whether some leaf's splits hold at it (z >= 0 for +1, z <= 0 for -1)."""
    import torch

    values = net.forward(points)
    pre = [values[2 * i + 1] for i in range(len(leaves.splits))]
    inside = torch.ones(points.shape[0], leaves.count, dtype=torch.bool)
    for z, s in zip(pre, leaves.splits, strict=True):
        z = torch.from_numpy(z)[:, None, :]
        s = s[None].to(torch.int64)
        ok = ((s > 0) & (z >= 0)) | ((s < 0) & (z <= 0)) | (s == 0)
        inside &= ok.all(dim=-1)
    return inside.any(dim=-1).numpy()


def pool_cnn(rng: np.random.Generator, dense: int = 0) -> FlatNetwork:
    """(1, 5, 5) input → conv 3×3 (2 ch) → relu → maxpool (2×2 windows plus a padded or
    repeated entry: 5 inputs, an odd tournament) → [linear ``dense`` → relu] → linear 3."""
    layers = [FlatLayer("input", (), 25),
              linear(0, conv_matrix(rng, 1, 5, 2, 3) * 2.0, rng.normal(size=18) * 0.3),
              FlatLayer("relu", (1,), 18),
              FlatLayer("maxpool", (2,), 8, windows=pool_windows(2, 3))]
    width = 8
    if dense:
        layers += [linear(3, rng.normal(size=(dense, 8)) / 2, rng.normal(size=dense) * 0.3),
                   FlatLayer("relu", (4,), dense)]
        width = dense
    layers.append(linear(len(layers) - 1, rng.normal(size=(3, width)) / 2, rng.normal(size=3) * 0.3))
    return FlatNetwork(tuple(layers), (1, 5, 5))
