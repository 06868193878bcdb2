"""An exact encoding without ReLU constraints for a masked network with one hidden layer
whose neurons each read few cells (a convolution → ReLU → linear head, e.g. VeriVital's
avg-pool CNN, whose pooling the reader folds into the head).

Neurons that read the same set ``R`` of cells are functions of those cells' binaries alone,
so for each such set one binary ``y_{R,S}`` per subset ``S ⊆ R`` says which of them the
mask keeps: ``Σ_S y_{R,S} = 1`` and ``Σ_{S∋c} y_{R,S} = M_c`` for each ``c ∈ R``. Given
the cell binaries, these rows leave exactly one ``y`` at 1 per set, and each class score is
linear in the ``y`` (the hidden values of every subset computed beforehand). No big-M: the
LP relaxation is the marginal polytope of each set, far tighter than the ReLU relaxation
over the same neurons (all of them unstable on VeriVital's avg-pool CNN).

The coefficients are float64 sums, so the output rows carry a rigorous bound on their
distance to the network's exact ones (:attr:`PatternEncoding.row_deviation`), which the
minimum-size proof takes into account.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from smug_opt.bounds.rounding import ACCUMULATED
from smug_opt.encode.masked import MaskedNetwork, mlp_form
from smug_opt.exact import dot_error_bound
from smug_opt.ir import ProblemBuilder
from smug_opt.strengthen.rows import pattern_bits

__all__ = ["MAX_PATTERN_CELLS", "PatternEncoding", "encode_patterns", "pattern_applies"]

MAX_PATTERN_CELLS = 4
"""Cells a hidden neuron may read for :func:`encode_patterns` (16 subsets a set; VeriVital's
2×2 convolutions read 4 pixels)."""


@dataclass(frozen=True, eq=False)
class _Group:
    """The hidden neurons ``neurons`` that read exactly the cells ``cells``, and their
    pre-activations on every subset (row ``s``: the subset of bit ``i`` set ⇔ ``cells[i]``
    kept), float64."""

    cells: np.ndarray
    neurons: np.ndarray
    pre: np.ndarray


@dataclass(frozen=True, eq=False)
class PatternEncoding:
    """What :func:`encode_patterns` added: per cell set, the first of its ``2^|R|`` subset
    binaries; the hidden layer's neuron counts; per output row a bound on its slack's
    distance to the network's exact one."""

    groups: tuple[_Group, ...]
    first_binary: np.ndarray
    neurons: list[dict]
    row_deviation: np.ndarray

    def values(self, mask: np.ndarray, num_vars: int) -> np.ndarray:
        """The problem's variables for a cell mask: the mask, then each set's subset binary."""
        x = np.zeros(num_vars)
        x[:mask.size] = mask
        for group, first in zip(self.groups, self.first_binary, strict=True):
            subset = int(sum(1 << i for i, c in enumerate(group.cells) if mask[c] > 0.5))
            x[first + subset] = 1.0
        return x


def pattern_applies(network: MaskedNetwork) -> bool:
    """Whether :func:`encode_patterns` encodes ``network``: a ReLU MLP with one hidden layer
    whose neurons each read at most :data:`MAX_PATTERN_CELLS` cells, of more cells in all
    (a local layer, not a dense one over a handful of cells)."""
    return _pattern_layers(network) is not None


def _pattern_layers(network: MaskedNetwork) -> list[tuple[sp.csr_matrix, np.ndarray]] | None:
    """The network's two ``(matrix, bias)`` layers when :func:`pattern_applies`, else None."""
    layers = mlp_form(network.net)
    if layers is None or len(layers) != 2 or network.num_cells <= MAX_PATTERN_CELLS:
        return None
    reads = np.diff(sp.csr_matrix(network.linear_matrices[0]).indptr)
    return layers if reads.max(initial=0) <= MAX_PATTERN_CELLS else None


def encode_patterns(builder: ProblemBuilder, network: MaskedNetwork) -> PatternEncoding:
    """Add the subset binaries, their rows and the strict output rows to ``builder``, whose
    first ``network.num_cells`` variables are the cell binaries (see the module doc)."""
    layers = _pattern_layers(network)
    if layers is None:
        raise ValueError("encode_patterns needs a one-hidden-layer ReLU MLP whose neurons read at most "
                         f"{MAX_PATTERN_CELLS} cells each")
    (W1, b1), (W2, b2) = layers
    A = sp.csr_matrix(network.linear_matrices[0])  # neurons × cells: the first layer @ inputs, float64
    D = np.asarray(network.out_rows, dtype=np.float64)
    V = np.asarray(sp.csr_matrix(D) @ sp.csr_matrix(W2).toarray())  # rows × neurons
    groups = _groups(A, b1)
    empty = np.diff(A.indptr) == 0
    const = D @ b2 + V[:, empty] @ np.maximum(b1[empty], 0.0)
    first_binary, columns, coefs = [], [], []
    for group in groups:
        t = group.cells.size
        ys = builder.add_binaries(1 << t)
        first_binary.append(int(ys[0]))
        builder.add_constraints(np.ones((1, ys.size)), ys, "==", 1.0)
        marginals = np.hstack([pattern_bits(t).T, -np.eye(t)])  # subsets' cells, minus each cell
        builder.add_constraints(marginals, np.concatenate([ys, group.cells]), "==", np.zeros(t))
        columns.append(ys)
        coefs.append(V[:, group.neurons] @ np.maximum(group.pre, 0.0).T)  # rows × subsets
    cols = np.concatenate(columns) if columns else np.zeros(0, dtype=np.int64)
    rows = np.hstack(coefs) if coefs else np.zeros((D.shape[0], 0))
    builder.add_constraints(rows, cols, ">", network.out_rhs - const)
    neurons = _neuron_counts(groups, b1, empty)
    deviation = _row_deviation(network, W1, b1, D, W2, b2, V, groups, empty)
    return PatternEncoding(tuple(groups), np.asarray(first_binary, dtype=np.int64), neurons, deviation)


def _groups(A: sp.csr_matrix, b1: np.ndarray) -> list[_Group]:
    """The neurons that read cells, grouped by the set they read, with their
    pre-activations ``fl(b + Σ_{c∈S} A[j, c])`` on every subset."""
    by_cells: dict[tuple[int, ...], list[int]] = {}
    for j in range(A.shape[0]):
        cells = tuple(A.indices[A.indptr[j]:A.indptr[j + 1]].tolist())
        if cells:
            by_cells.setdefault(tuple(sorted(cells)), []).append(j)
    groups = []
    for cells, members in by_cells.items():
        neurons = np.asarray(members, dtype=np.int64)
        weights = A[neurons][:, list(cells)].toarray()  # neurons × cells
        t = len(cells)
        pre = b1[neurons][None, :] + pattern_bits(t) @ weights.T
        groups.append(_Group(np.asarray(cells, dtype=np.int64), neurons, pre))
    return groups


def _neuron_counts(groups: list[_Group], b1: np.ndarray, empty: np.ndarray) -> list[dict]:
    """The hidden layer's neurons by phase over all subsets (as the ReLU encoder counts them)."""
    lo = np.where(empty, b1, np.inf)
    hi = np.where(empty, b1, -np.inf)
    for group in groups:
        lo[group.neurons] = group.pre.min(axis=0)
        hi[group.neurons] = group.pre.max(axis=0)
    dead, active = hi <= 0, lo >= 0
    return [{"layer": 0, "flat_layer": 1, "n": int(b1.size), "dead": int(dead.sum()),
             "active": int(active.sum()), "unstable": int((~dead & ~active).sum()), "kept": []}]


def _row_deviation(network: MaskedNetwork, W1: sp.csr_matrix, b1: np.ndarray, D: np.ndarray,
                   W2: sp.csr_matrix, b2: np.ndarray, V: np.ndarray, groups: list[_Group],
                   empty: np.ndarray) -> np.ndarray:
    """Per output row, a bound on ``|problem slack − network slack|`` for every mask.

    The hidden pre-activation ``b + Σ_i W1_ji·xa_i·M`` is computed as ``fl(b + Σ_c A_jc)``
    with ``A = fl(W1 @ inputs)``: within ``e_j`` = dot_error_bound(2(terms + 1), H_j),
    ``H_j = |b_j| + Σ |W1_ji·xa_i|``, and so is its ReLU (1-Lipschitz). Each coefficient
    ``fl(Σ_j V_rj·h_j)`` over a set's neurons, ``V = fl(D @ W2)``, the constant and the
    right-hand side add their rounding, bounded together by one dot_error_bound over every
    term's magnitude ``|D|·|W2|·(H + e) + |D|·|b2| + |rhs|``."""
    terms1 = np.diff(W1.indptr)
    H = np.abs(b1) + np.asarray(abs(W1) @ np.abs(network.xa)).reshape(-1)
    e = dot_error_bound(2 * (terms1 + 1), H)
    abs_W2 = abs(sp.csr_matrix(W2))
    abs_D = np.abs(D)
    reach = np.asarray((sp.csr_matrix(abs_D) @ abs_W2) @ (H + e)).reshape(-1)
    magnitude = reach + abs_D @ np.abs(b2) + np.abs(network.out_rhs) + np.abs(V) @ (H + e)
    largest_group = max((g.neurons.size for g in groups), default=0)
    terms = largest_group + int(empty.sum()) + int(np.count_nonzero(D, axis=1).max(initial=0)) + 8
    through = np.abs(V) @ e
    return (through + dot_error_bound(terms, magnitude)) * ACCUMULATED
