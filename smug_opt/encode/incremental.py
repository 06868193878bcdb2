"""Small masks of a chain network evaluated from the empty mask's values: a mask of a few
cells changes only the neurons those cells reach, so each linear layer is computed as the
empty mask's values plus its matrix times the change of its input, a sparse product.

A chain network is a plain ReLU MLP in flat form (linear, relu, …, linear, each layer
reading the one before; convolutions are linear layers with sparse matrices), e.g.
Marabou's ``cifar10_small`` CNN and the mnistfc MLPs. Its first layer is the empty mask's
values (the bias) plus the kept cells' columns; every later linear layer is
``fl(z∅ + fl(W·fl(h − h∅)))``, whose rounding :func:`linear_error_terms` bounds. The search
over small masks (:mod:`smug_opt.encode.flat_enumeration`) budgets it by
:func:`incremental_work`, a count from the network's sparsity alone.
"""

from __future__ import annotations

import weakref

import numpy as np
import scipy.sparse as sp

from smug_opt.encode.masked import ENTRY_WORK, MaskedNetwork, mlp_form, nonzero_pattern

__all__ = ["INCREMENTAL_SHARE", "IncrementalMasks", "incremental_pays", "incremental_work",
           "linear_error_terms"]

INCREMENTAL_SHARE = 0.1
"""A later linear layer is computed from the change of its input when 2 cells change at
most this share of that input on average (a sparse product pays only that far: on
``cifar10_small``, the second convolution's input, not the dense layers')."""


def linear_error_terms(terms: np.ndarray) -> np.ndarray:
    """The terms :func:`~smug_opt.exact.dot_error_bound` must cover, over the magnitude
    ``|W|·L + |b|`` (``L`` bounding the input's values on the masks and on the empty one),
    for a later layer of ``terms`` terms per row computed incrementally: ``z∅``'s rounding
    (``terms``), the change's (``terms`` over differences up to ``2L``), the differences'
    and the final sum's (``5u``): ``(3·terms + 5)·u`` times the magnitude, within
    ``dot_error_bound(3·terms + 2)``'s ``2(3·terms + 5)·u``."""
    return 3 * np.asarray(terms) + 2


class IncrementalMasks:
    """Evaluates batches of masks, given as the kept cells' indices ``(batch, k)``, on a
    chain network (:meth:`applies`)."""

    def __init__(self, network: MaskedNetwork) -> None:
        if not self.applies(network):
            raise ValueError("incremental evaluation needs a plain ReLU MLP in flat form (a chain network)")
        self.network = network
        self.base = [v[0] for v in network.values(np.zeros((1, network.num_cells)))]
        self._transposed = [None if m is None else (m.T if isinstance(m, np.ndarray) else sp.csr_matrix(m.T))
                            for m in network.linear_matrices]
        self.incremental = _incremental_layers(network)
        """The later linear layers computed from the change of their input (the rest, and
        every layer after one of them that is not, directly as :meth:`MaskedNetwork.values`
        does)."""

    @staticmethod
    def applies(network: MaskedNetwork) -> bool:
        """Whether ``network`` is a chain network (a plain ReLU MLP in flat form)."""
        return mlp_form(network.net) is not None

    def scores(self, cells: np.ndarray, largest: list[np.ndarray]) -> np.ndarray:
        """The class scores ``(batch, n_out)`` of the masks keeping ``cells`` (one row of cell
        indices per mask), raising ``largest[layer]`` to every layer's largest ``|value|``
        on them (the empty mask's counted too)."""
        cells = np.asarray(cells, dtype=np.int64)
        batch, ones = cells.shape
        masks = sp.csr_matrix((np.ones(batch * ones), cells.reshape(-1), np.arange(batch + 1) * ones),
                              shape=(batch, self.network.num_cells))
        # while sparse: each layer's values on the entries that may differ from the empty mask's
        changed = _plus(self.base[1], _pruned(masks @ self._transposed[0]))
        dense: np.ndarray | None = None
        for index, layer in enumerate(self.network.net.layers[1:], start=1):
            if dense is None and index > 1:
                if layer.kind == "relu":
                    changed = sp.csr_matrix((np.maximum(changed.data, 0.0), changed.indices, changed.indptr),
                                            shape=changed.shape)
                elif index in self.incremental:
                    source = self.base[index - 1]
                    difference = sp.csr_matrix((changed.data - source[changed.indices], changed.indices,
                                                changed.indptr), shape=changed.shape)
                    difference.eliminate_zeros()
                    changed = _plus(self.base[index], _pruned(difference @ self._transposed[index - 1]))
                else:
                    dense = _written(self.base[index - 1], changed)
            if dense is None:
                _raise(largest[index], self.base[index], changed)
                continue
            if layer.kind == "relu":
                dense = np.maximum(dense, 0.0)
            else:
                dense = np.asarray(self.network.linear_matrices[index - 1] @ dense.T).T + layer.affine[1]
            np.maximum(largest[index], np.abs(dense).max(axis=0, initial=0.0), out=largest[index])
        return dense if dense is not None else _written(self.base[-1], changed)


def _plus(base: np.ndarray, change: sp.csr_matrix) -> sp.csr_matrix:
    """``base + change`` on ``change``'s entries."""
    return sp.csr_matrix((base[change.indices] + change.data, change.indices, change.indptr),
                         shape=change.shape)


def _written(base: np.ndarray, changed: sp.csr_matrix) -> np.ndarray:
    """Every entry ``(batch, size)``: ``changed``'s where it has one, else ``base``'s."""
    out = np.repeat(base[None, :], changed.shape[0], axis=0)
    out[np.repeat(np.arange(changed.shape[0]), np.diff(changed.indptr)), changed.indices] = changed.data
    return out


def _raise(largest: np.ndarray, base: np.ndarray, changed: sp.csr_matrix) -> None:
    """``largest`` raised to ``|base|`` and to ``|changed|`` on its entries."""
    np.maximum(largest, np.abs(base), out=largest)
    if changed.nnz:
        np.maximum.at(largest, changed.indices, np.abs(changed.data))


def _pruned(m: sp.spmatrix) -> sp.csr_matrix:
    """``m`` as CSR with one entry per (row, column), sorted."""
    m = sp.csr_matrix(m)
    m.sum_duplicates()
    return m


def incremental_pays(network: MaskedNetwork) -> bool:
    """Whether :class:`IncrementalMasks` applies to ``network`` and computes at least one
    later layer from its change (else a direct evaluation costs no more)."""
    return IncrementalMasks.applies(network) and bool(_incremental_layers(network))


def incremental_work(network: MaskedNetwork, ones: int) -> float:
    """The work of evaluating one mask of ``ones`` cells by :class:`IncrementalMasks`, in
    :attr:`~smug_opt.encode.masked.MaskedNetwork.mask_work` units: the first layer's
    ``ones`` columns, each later linear layer's matrix whole or, where it is computed from
    the change, in the share of its input that ``ones`` cells reach on average (by the
    matrices' sparsity), and :data:`ENTRY_WORK` per value written (twice where a change is
    taken)."""
    shares = _reach_shares(network, ones)
    incremental = _incremental_layers(network)
    first = network.linear_matrices[0]
    assert first is not None, "a chain network starts with a linear layer"
    work = float(ones * first.shape[0] + ENTRY_WORK * network.net.layers[1].size)
    for index, layer in enumerate(network.net.layers[2:], start=2):
        work += ENTRY_WORK * layer.size
        matrix = network.linear_matrices[index - 1]
        if matrix is None:
            continue
        nnz = _sparsity(network)[index][2]
        if index in incremental:
            work += shares[index] * nnz + ENTRY_WORK * matrix.shape[1]
        else:
            work += nnz
    return work


def _incremental_layers(network: MaskedNetwork) -> frozenset[int]:
    """The later linear layers :class:`IncrementalMasks` computes from the change: from the
    second on, while 2 cells change at most :data:`INCREMENTAL_SHARE` of their input."""
    chosen = []
    for index, share in _reach_shares(network, 2).items():
        if share > INCREMENTAL_SHARE:
            break
        chosen.append(index)
    return frozenset(chosen)


def _reach_shares(network: MaskedNetwork, ones: int) -> dict[int, float]:
    """Per later linear layer (flat index), the share of its input's entries that a mask of
    ``ones`` cells changes on average, by the matrices' sparsity (``ones`` times a single
    cell's average reach, at most all)."""
    cells = max(network.num_cells, 1)
    return {index: min(ones * reached / cells, source) / max(source, 1)
            for index, (reached, source, _) in _sparsity(network).items()}


_Sparsity = dict[int, tuple[int, int, int]]
_SPARSITY: weakref.WeakKeyDictionary[MaskedNetwork, _Sparsity] = weakref.WeakKeyDictionary()


def _sparsity(network: MaskedNetwork) -> _Sparsity:
    """Per later linear layer (flat index): how many (input entry, cell) pairs reach it (the
    input entries each cell changes, summed over the cells), its input's size and its
    matrix's nonzeros; computed once per network (the searches' budgets ask for it often)."""
    found = _SPARSITY.get(network)
    if found is None:
        found = {}
        reach = nonzero_pattern(network.linear_matrices[0])  # neurons × cells: which cells each reads
        for index, matrix in enumerate(network.linear_matrices[1:], start=2):
            if matrix is None:
                continue
            pattern = nonzero_pattern(matrix)
            found[index] = (reach.nnz, matrix.shape[1], pattern.nnz)
            reach = nonzero_pattern(pattern @ reach)
        _SPARSITY[network] = found
    return found
