"""Max pooling of ReLU outputs rewritten as ReLUs, so a CNN becomes a chain of linear layers
and ReLUs (:class:`~smug_opt.bounds.relu_chain.ReluChain`) that branch and bound can split.

For values ``a, b >= 0``, ``max(a, b) = a + relu(b − a)`` and ``a = relu(a)``: one level of
a pairwise tournament is a linear layer (per pair its first value, passed through, and the
difference) and a ReLU. A window of ``K`` inputs takes ``⌈log2 K⌉`` levels; the last level's
sums feed the layer after the pooling (its matrix multiplied into them). Splitting the ReLU
of a difference is branching on which input of the pair is the larger, so β-CROWN's splits
decide the max-pool units too. The rewrite is exact in real arithmetic (the bounds' model of
a network: they bound the network with its float weights evaluated exactly), and every
passed-through value is a sum of ReLU outputs, so its interval starts at 0: :attr:`PoolRelus.prior`
says so (those ReLUs are stable, exactly linear). Only max pooling that reads a ReLU is
rewritten (its inputs are ``>= 0``); a network with anything else than linear layers, ReLUs
and such pooling has no rewrite.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from smug_opt.network.flat import FlatLayer, FlatNetwork

__all__ = ["PoolRelus", "pools_as_relus"]


@dataclass(frozen=True, eq=False)
class PoolRelus:
    """``net``: linear and ReLU layers only, the same function as the original in real
    arithmetic; ``prior``: per linear layer of ``net`` feeding a ReLU of a tournament, lower
    bounds (0 for the passed-through values, ``-inf`` for the differences) and upper bounds
    (``inf``), in :func:`~smug_opt.bounds.propagation.propagate`'s ``prior`` form."""

    net: FlatNetwork
    prior: tuple[dict[int, np.ndarray], dict[int, np.ndarray]]
    same: dict[int, int]
    """Per linear layer of ``net``, the layer of the original network with the same values."""

    def prior_with(self, lo: tuple[np.ndarray, ...], hi: tuple[np.ndarray, ...]
                   ) -> tuple[dict[int, np.ndarray], dict[int, np.ndarray]]:
        """:attr:`prior` and the original network's intervals ``lo``, ``hi`` (e.g. its
        :class:`~smug_opt.bounds.propagation.FlatBounds`') on the layers it shares."""
        low, high = dict(self.prior[0]), dict(self.prior[1])
        for k, original in self.same.items():
            low[k], high[k] = lo[original], hi[original]
        return low, high


_CACHE: weakref.WeakKeyDictionary[FlatNetwork, PoolRelus | None] = weakref.WeakKeyDictionary()


def pools_as_relus(net: FlatNetwork) -> PoolRelus | None:
    """The rewrite of ``net`` (see the module docstring), or None when ``net`` has no max
    pooling or has layers the rewrite does not take. Computed once per network."""
    if net not in _CACHE:
        _CACHE[net] = _rewrite(net)
    return _CACHE[net]


def _rewrite(net: FlatNetwork) -> PoolRelus | None:
    layers = net.layers
    if not any(layer.kind == "maxpool" for layer in layers):
        return None
    out: list[FlatLayer] = [layers[0]]
    low: dict[int, np.ndarray] = {}
    high: dict[int, np.ndarray] = {}
    pending: sp.csr_matrix | None = None  # a pooling's output as a linear map of out[-1]
    same: dict[int, int] = {}
    for k, layer in enumerate(layers[1:], start=1):
        source = layer.inputs[0] if layer.inputs else -1
        if len(layer.inputs) != 1 or source != k - 1:
            return None  # not a chain
        if layer.kind == "linear":
            matrix, bias = layer.affine
            if pending is not None:
                matrix, pending = (matrix @ pending).tocsr(), None
            out.append(FlatLayer("linear", (len(out) - 1,), layer.size, layer.name, matrix=matrix,
                                 bias=np.array(bias, dtype=np.float64)))
            same[len(out) - 1] = k
        elif layer.kind == "relu" and pending is None and out[-1].kind == "linear":
            out.append(FlatLayer("relu", (len(out) - 1,), layer.size, layer.name))
        elif layer.kind == "maxpool" and pending is None and layers[source].kind == "relu":
            pending = _tournament(layer, out, low, high)
        else:
            return None
    if pending is not None or out[-1].kind != "linear":
        return None
    return PoolRelus(FlatNetwork(tuple(out), net.input_shape, net.output), (low, high), same)


def _tournament(layer: FlatLayer, out: list[FlatLayer], low: dict[int, np.ndarray],
                high: dict[int, np.ndarray]) -> sp.csr_matrix:
    """Append the tournament's linear and ReLU layers for ``layer`` (reading ``out[-1]``, a
    ReLU) to ``out``; the pooling's outputs as a linear map of the last layer appended."""
    windows = layer.pool_windows
    width = out[-1].size
    # per window, its candidates: rows of a matrix over the current layer's outputs
    candidates: list[list[dict[int, float]]] = [[{int(i): 1.0} for i in w if i >= 0] for w in windows]
    if any(not c for c in candidates):
        raise ValueError(f"max pooling {layer.name!r} has a window with no input")
    while any(len(c) > 1 for c in candidates):
        rows: list[dict[int, float]] = []
        passed: list[bool] = []
        following: list[list[dict[int, float]]] = []
        for window in candidates:
            nxt = []
            for a in range(0, len(window), 2):
                first = window[a]
                rows.append(first)
                passed.append(True)
                if a + 1 < len(window):  # max(first, second) = first + relu(second − first)
                    diff = dict(window[a + 1])
                    for j, v in first.items():
                        diff[j] = diff.get(j, 0.0) - v
                    rows.append(diff)
                    passed.append(False)
                    nxt.append({len(rows) - 2: 1.0, len(rows) - 1: 1.0})
                else:
                    nxt.append({len(rows) - 1: 1.0})
            following.append(nxt)
        matrix = _rows(rows, width)
        k = len(out)
        out.append(FlatLayer("linear", (k - 1,), len(rows), f"{layer.name}/tournament",
                             matrix=matrix, bias=np.zeros(len(rows))))
        out.append(FlatLayer("relu", (k,), len(rows), f"{layer.name}/tournament"))
        low[k] = np.where(passed, 0.0, -np.inf)
        high[k] = np.full(len(rows), np.inf)
        candidates, width = following, len(rows)
    return _rows([c[0] for c in candidates], width)


def _rows(rows: list[dict[int, float]], width: int) -> sp.csr_matrix:
    """The sparse matrix whose row ``r`` has the entries ``rows[r]``."""
    r = np.repeat(np.arange(len(rows)), [len(row) for row in rows])
    c = np.fromiter((j for row in rows for j in row), dtype=np.int64, count=r.size)
    v = np.fromiter((x for row in rows for x in row.values()), dtype=np.float64, count=r.size)
    keep = v != 0.0
    return sp.csr_matrix((v[keep], (r[keep], c[keep])), shape=(len(rows), width))
