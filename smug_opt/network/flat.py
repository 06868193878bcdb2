"""A network lowered to flat per-example vectors: the form bounds and encoders work on.

Every linear operation of a :class:`~smug_opt.network.graph.Network` after its first
affine layer's input (Dense, Conv, folded BatchNorm, average pooling, reshapes,
transposes, padding, and chains of them, merged) is one sparse matrix; what remains are
elementwise piecewise-linear activations, max pooling and residual sums. The input of a
:class:`FlatNetwork` is the *affine input*: what the first affine layer reads, after the
elementwise preprocessing in front of it (:class:`Preprocess`). Masks act on it: a masked
value is 0 there (the paper's rule: 0 after normalisation).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Literal

import numpy as np
import scipy.sparse as sp

__all__ = ["FlatKind", "FlatLayer", "FlatNetwork", "Preprocess"]

FlatKind = Literal["input", "linear", "relu", "leaky_relu", "clip", "maxpool", "add"]


@dataclass(frozen=True, eq=False)
class FlatLayer:
    """One layer over flat vectors; ``inputs`` are indices of earlier layers (layer 0 is
    the input), ``size`` its output length, ``name`` the graph node it ends with.

    - ``linear``: ``y = matrix @ v + bias``, ``matrix`` CSR (size, len(v)) float64;
    - ``relu``: ``max(0, v)``; ``leaky_relu``: ``v`` or ``alpha·v`` below 0;
      ``clip``: ``min(max(v, lo), hi)``;
    - ``maxpool``: ``y[i] = max_k v[windows[i, k]]`` over the entries ``>= 0`` of
      ``windows`` (size, K) int64 (``-1`` marks padding, which never wins);
    - ``add``: the sum of its two inputs.
    """

    kind: FlatKind
    inputs: tuple[int, ...]
    size: int
    name: str = ""
    matrix: sp.csr_matrix | None = None
    bias: np.ndarray | None = None
    alpha: float = 0.0
    lo: float = 0.0
    hi: float = float("inf")
    windows: np.ndarray | None = None

    @property
    def affine(self) -> tuple[sp.csr_matrix, np.ndarray]:
        """A linear layer's ``(matrix, bias)``; ValueError for a layer that has none."""
        if self.matrix is None or self.bias is None:
            raise ValueError(f"{self.kind} layer {self.name!r} has no matrix and bias")
        return self.matrix, self.bias

    @property
    def pool_windows(self) -> np.ndarray:
        """A max-pooling layer's ``windows``; ValueError for a layer that has none."""
        if self.windows is None:
            raise ValueError(f"{self.kind} layer {self.name!r} has no pooling windows")
        return self.windows


@dataclass(frozen=True, eq=False)
class Preprocess:
    """The elementwise map from the model's input ``x`` (flattened row-major in the
    model's own layout) to the affine input: ``xa = x.ravel()[index] * scale + shift``."""

    index: np.ndarray
    scale: np.ndarray
    shift: np.ndarray

    def __call__(self, x_batch: np.ndarray) -> np.ndarray:
        """Affine inputs ``(batch, len(index))`` of a batch of model inputs."""
        x_batch = np.asarray(x_batch, dtype=np.float64)
        return x_batch.reshape(x_batch.shape[0], -1)[:, self.index] * self.scale + self.shift

    @cached_property
    def _pull(self) -> sp.csr_matrix:
        rows = np.arange(self.index.size)
        size = int(self.index.max()) + 1 if self.index.size else 0
        return sp.csr_matrix((self.scale * np.ones(self.index.size), (rows, self.index)),
                             shape=(self.index.size, size))

    @cached_property
    def _push(self) -> sp.csr_matrix:
        return self._pull.T.tocsr()  # transposed once: the attacks call backward thousands of times

    def backward(self, g_affine: np.ndarray, size: int) -> np.ndarray:
        """The gradient ``(batch, size)`` with respect to the model inputs of a function whose
        gradient with respect to the affine inputs is ``g_affine`` (one sparse product;
        repeated indices add up)."""
        pulled = np.asarray(self._push @ np.atleast_2d(g_affine).T).T
        out = np.zeros((pulled.shape[0], size))
        out[:, : pulled.shape[1]] = pulled
        return out


@dataclass(frozen=True, eq=False)
class FlatNetwork:
    """``layers[0]`` is the input (the affine input, of ``input_shape``: ``(C, H, W)``
    channels first for images, ``(n,)`` for vectors); the last layer gives the class
    scores. ``output`` as :attr:`smug_opt.network.graph.Network.output`."""

    layers: tuple[FlatLayer, ...]
    input_shape: tuple[int, ...]
    output: str = "logits"

    @property
    def num_inputs(self) -> int:
        return self.layers[0].size

    @property
    def num_outputs(self) -> int:
        return self.layers[-1].size

    def forward(self, xa: np.ndarray) -> list[np.ndarray]:
        """Every layer's output, float64, for a batch of affine inputs ``(batch, num_inputs)``."""
        xa = np.asarray(xa, dtype=np.float64)
        values: list[np.ndarray] = [xa.reshape(xa.shape[0], -1)]
        for layer in self.layers[1:]:
            v = values[layer.inputs[0]]
            if layer.kind == "linear":
                out = np.asarray(layer.matrix @ v.T).T + layer.bias
            elif layer.kind == "relu":
                out = np.maximum(v, 0.0)
            elif layer.kind == "leaky_relu":
                out = np.where(v >= 0, v, layer.alpha * v)
            elif layer.kind == "clip":
                out = np.clip(v, layer.lo, layer.hi)
            elif layer.kind == "maxpool":
                padded = np.concatenate([v, np.full((v.shape[0], 1), -np.inf)], axis=1)
                out = padded[:, layer.windows].max(axis=2)  # index -1 reads the -inf column
            elif layer.kind == "add":
                out = v + values[layer.inputs[1]]
            else:
                raise ValueError(f"unknown flat layer kind {layer.kind!r}")
            values.append(out)
        return values
