"""A :class:`~smug_opt.network.flat.FlatNetwork` seen as a function of mask-cell binaries:
the affine input's value ``i`` is ``xa[i]·M[cell of i]``, and the query is that the
label's class score beats every other one by more than a margin.

This is what the whole-network encoder, its bounds and its mask searches share: the
input-to-cells matrix, the output rows, and a float64 evaluation of many masks at once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np
import scipy.sparse as sp

from smug_opt.network.flat import FlatLayer, FlatNetwork

__all__ = ["BATCH_BYTES", "ENTRY_WORK", "MaskedNetwork", "cell_masks", "flat_digest", "flat_mlp",
           "mlp_form", "nonzero_pattern", "output_reach", "output_rows"]

BATCH_BYTES = 256e6
"""Memory for one batch of masks evaluated at once (their values at every layer): a batch
of 4096 masks of a 28x28 CNN held 5 GB."""


ENTRY_WORK = 4.0
"""Multiply-adds one value written by a non-linear layer (or a linear layer's output) is
counted as in :attr:`MaskedNetwork.mask_work`: numpy's passes over large arrays are bound
by memory, not arithmetic."""


@dataclass(frozen=True, eq=False)
class MaskedNetwork:
    """``net`` on the affine input ``xa`` (flat) masked by cell binaries.

    ``cells`` lists the grid cells holding a nonzero input that reaches an output
    (:func:`output_reach`), one binary each, in order;
    ``inputs`` (``num_inputs × len(cells)``, CSR) maps binaries to the affine input
    (entry ``xa[i]`` where input ``i`` lies in the cell); ``out_rows``·scores ``>=``
    ``out_rhs`` are the output rows, meant strictly.
    """

    net: FlatNetwork
    xa: np.ndarray
    cells: np.ndarray
    inputs: sp.csr_matrix
    out_rows: np.ndarray
    out_rhs: np.ndarray

    @classmethod
    def build(cls, net: FlatNetwork, xa: np.ndarray, cell_of: np.ndarray, label: int,
              margin: float) -> MaskedNetwork:
        """Binaries for the cells (``cell_of[i]``: the cell of affine input ``i``) that hold
        a nonzero input reaching an output (:func:`output_reach`: no other input changes any
        score, so no minimum mask keeps a cell of only those, and dropping them from
        ``inputs`` changes no value); output rows for ``label`` with ``margin``."""
        nonzero = np.flatnonzero((xa != 0) & output_reach(net))
        cells, member = np.unique(cell_of[nonzero], return_inverse=True)
        inputs = sp.csr_matrix((xa[nonzero], (nonzero, member)), shape=(xa.size, cells.size))
        rows, rhs = output_rows(net.num_outputs, label, margin)
        return cls(net, xa, cells, inputs, rows, rhs)

    @property
    def num_cells(self) -> int:
        return int(self.cells.size)

    def scores(self, masks: np.ndarray) -> np.ndarray:
        """Class scores ``(batch, n_out)`` of cell masks ``(batch, num_cells)``, float64
        (:meth:`values`' last layer)."""
        return self.values(masks)[-1]

    def values(self, masks: np.ndarray) -> list[np.ndarray]:
        """Every layer's float64 values ``(batch, size)`` on cell masks ``(batch, num_cells)``
        (:meth:`FlatNetwork.forward`'s arithmetic, with linear layers that read the input
        applied to the cells directly and dense-enough matrices as dense arrays); entry 0
        holds the masks themselves, not the affine input."""
        masks = np.asarray(masks, dtype=np.float64)
        values: list[np.ndarray] = [masks]  # never read as the input: a layer reading it uses the cells
        for layer, matrix in zip(self.net.layers[1:], self.linear_matrices, strict=True):
            source = layer.inputs[0]
            if layer.kind == "linear":
                v = masks if source == 0 else values[source]
                values.append(np.asarray(matrix @ v.T).T + layer.affine[1])
                continue
            v = values[source] if source else np.asarray(self.inputs @ masks.T).T
            if layer.kind == "add":
                other = layer.inputs[1]
                w = values[other] if other else np.asarray(self.inputs @ masks.T).T
                values.append(v + w)
            else:
                single = FlatNetwork((FlatLayer("input", (), v.shape[1]), replace(layer, inputs=(0,))),
                                     (v.shape[1],))
                values.append(single.forward(v)[-1])
        return values

    @cached_property
    def linear_matrices(self) -> list[np.ndarray | sp.csr_matrix | None]:
        """Per layer after the input, the matrix :meth:`scores` multiplies by: a linear
        layer's (times :attr:`inputs` when it reads the input), dense when over 10 % full."""
        out: list[np.ndarray | sp.csr_matrix | None] = []
        for layer in self.net.layers[1:]:
            if layer.kind != "linear":
                out.append(None)
                continue
            weights = layer.affine[0]
            matrix = sp.csr_matrix(weights @ self.inputs) if layer.inputs[0] == 0 else weights
            rows, cols = matrix.shape
            dense = matrix.nnz > 0.1 * rows * cols and rows * cols <= 50_000_000
            out.append(matrix.toarray() if dense else matrix)
        return out

    @cached_property
    def mask_work(self) -> float:
        """The work of evaluating one mask by :meth:`values`, in multiply-adds: the linear
        layers' plus :data:`ENTRY_WORK` per value every other layer writes (a max pool's
        window gather counted whole), which cost as much on a large CNN (VeriVital's
        max-pool CNN: 37k multiply-adds and 66k entries a mask; 0.6 ms a mask at load 9,
        cifar10_small's 185k and 5k, 0.2 ms)."""
        linear = sum(m.size if isinstance(m, np.ndarray) else m.nnz
                     for m in self.linear_matrices if m is not None)
        entries = sum(layer.size * (layer.pool_windows.shape[1] if layer.kind == "maxpool" else 1)
                      for layer in self.net.layers[1:])
        return float(linear + ENTRY_WORK * entries)

    def affordable_masks(self, work: float) -> int:
        """How many masks a search may evaluate within ``work`` (:attr:`mask_work` units):
        a count that depends on the network only, never on the machine's speed or load."""
        return int(work / max(self.mask_work, 1.0))

    def batch_rows(self, memory_bytes: float = BATCH_BYTES) -> int:
        """How many masks to evaluate at once so that their values and error bounds at
        every layer (a max pool's window gather counted whole) take about ``memory_bytes``:
        at most 4096, at least 1."""
        per_mask = sum(layer.size * (layer.pool_windows.shape[1] if layer.kind == "maxpool" else 1)
                       for layer in self.net.layers)
        return int(min(4096, max(1, memory_bytes // (2 * 8 * max(per_mask, 1)))))

    def slack(self, masks: np.ndarray, chunk: int = 256) -> np.ndarray:
        """The smallest ``out_rows·scores − out_rhs`` of each mask (a row of ``masks``)."""
        masks = np.atleast_2d(masks)
        parts = [(self.scores(masks[s:s + chunk]) @ self.out_rows.T - self.out_rhs).min(axis=1)
                 for s in range(0, masks.shape[0], chunk)]
        return np.concatenate(parts) if parts else np.zeros(0)

    def cells_slack(self, cells: np.ndarray) -> np.ndarray:
        """:meth:`slack` of the masks keeping ``cells`` (one row of cell indices per mask),
        in one chunk."""
        return self.slack(cell_masks(cells, self.num_cells), chunk=max(cells.shape[0], 1))

    @property
    def tolerance(self) -> float:
        """The output slack above which the float64 network is taken to accept a mask."""
        return 1e-9 * (1.0 + float(np.abs(self.out_rhs).max(initial=0.0)))


def output_rows(num_outputs: int, label: int, margin: float) -> tuple[np.ndarray, np.ndarray]:
    """Rows ``D·s >= d`` over class scores ``s`` meaning ``s[label] − s[l] > margin`` for
    every ``l ≠ label`` (a single sigmoid output: ``±s > margin``)."""
    if num_outputs == 1:
        sign = 1.0 if label == 1 else -1.0
        return np.array([[sign]]), np.array([float(margin)])
    others = np.delete(np.arange(num_outputs), label)
    rows = np.zeros((others.size, num_outputs))
    rows[:, label] = 1.0
    rows[np.arange(others.size), others] = -1.0
    return rows, np.full(others.size, float(margin))


def output_reach(net: FlatNetwork) -> np.ndarray:
    """Per input of ``net``, whether a path of stored nonzero weights (or an elementwise
    layer, a pooling window, a residual sum) leads from it to an output: every layer's value
    is the same whatever the inputs marked False hold (a CSR product skips what it does not
    store)."""
    layers = net.layers
    live = [np.zeros(layer.size, dtype=bool) for layer in layers]
    live[-1][:] = True
    for k in range(len(layers) - 1, 0, -1):
        layer, out = layers[k], live[k]
        source = live[layer.inputs[0]]
        if layer.kind == "linear":
            used = nonzero_pattern(layer.affine[0])[np.flatnonzero(out)]
            source[used.indices] = True
        elif layer.kind == "maxpool":
            window = layer.pool_windows[out]
            source[window[window >= 0]] = True
        else:  # elementwise layers and residual sums
            for i in layer.inputs:
                live[i] |= out
    return live[0]


def mlp_form(net: FlatNetwork) -> list[tuple[sp.csr_matrix, np.ndarray]] | None:
    """The network's ``(matrix, bias)`` layers when it is a plain ReLU MLP (linear, relu,
    linear, …, linear, each reading the one before), else None."""
    layers = net.layers[1:]
    if not layers or len(layers) % 2 == 0:
        return None
    for k, layer in enumerate(layers):
        if layer.inputs != (k,) or layer.kind != ("linear" if k % 2 == 0 else "relu"):
            return None
    return [layer.affine for layer in layers[::2]]


def cell_masks(cells: np.ndarray, num_cells: int) -> np.ndarray:
    """Cell masks ``(batch, num_cells)`` keeping each row's cells (indices ``(batch, k)``)."""
    masks = np.zeros((cells.shape[0], num_cells))
    np.put_along_axis(masks, cells, 1.0, axis=1)
    return masks


def nonzero_pattern(matrix: np.ndarray | sp.spmatrix) -> sp.csr_matrix:
    """1.0 where ``matrix`` holds a nonzero, nothing stored elsewhere (CSR)."""
    pattern = sp.csr_matrix(matrix, copy=True)
    pattern.eliminate_zeros()
    pattern.data[:] = 1.0
    return pattern


def flat_digest(net: FlatNetwork) -> str:
    """A short hash of the network's layers and weights."""
    digest = hashlib.sha256(repr(net.input_shape).encode())
    for layer in net.layers:
        digest.update(_layer_key(layer).encode())
        for array in (layer.matrix.data if layer.matrix is not None else None,
                      layer.matrix.indices if layer.matrix is not None else None,
                      layer.matrix.indptr if layer.matrix is not None else None,
                      layer.bias, layer.windows):
            if array is not None:
                digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()[:16]


def _layer_key(layer: FlatLayer) -> str:
    return f"{layer.kind}:{layer.inputs}:{layer.size}:{layer.alpha!r}:{layer.lo!r}:{layer.hi!r}"


def flat_mlp(layers: Sequence[tuple[np.ndarray, np.ndarray]], output: str = "logits") -> FlatNetwork:
    """The flat form of a ReLU MLP given as ``(W, b)`` layers, ``W`` of shape ``(n_in, n_out)``."""
    flat = [FlatLayer("input", (), int(layers[0][0].shape[0]))]
    for k, (W, b) in enumerate(layers):
        if k:
            flat.append(FlatLayer("relu", (len(flat) - 1,), flat[-1].size))
        flat.append(FlatLayer("linear", (len(flat) - 1,), int(W.shape[1]),
                              matrix=sp.csr_matrix(np.asarray(W, dtype=np.float64).T),
                              bias=np.asarray(b, dtype=np.float64)))
    kind = output if output in ("softmax", "sigmoid") else "logits"
    return FlatNetwork(tuple(flat), (flat[0].size,), kind)
