"""The SMUG first-layer encoding: the smallest cell mask that keeps chosen neurons active.

For each selected neuron ``t`` (pre-activation ``o_t = W1[t]·x + b1[t]``) and mask cells
``M_c`` (one per ``cell × cell`` block of the affine input's grid, shared by all channels)::

    Σ_c a_tc · M_c + c_t  >  γ · o_t,    a_tc = Σ_{j in cell c} W1[t, j] · (x_j − x̄_j),
                                         c_t  = b1[t] + Σ_j W1[t, j] · x̄_j

minimising ``Σ_c M_c`` (every cell counts once, edge cells included). A masked value
becomes the baseline's ``x̄`` (:mod:`smug_opt.mask_baseline`; the paper's ``x̄ = 0`` gives
``a_tc = Σ W1·x`` and ``c_t = b1[t]``). Rows with ``c_t > γ·o_t`` hold at the empty mask. The coefficients are
aggregated with one vectorised gather (:meth:`AffineLayer.tap_contributions`) and one
sparse COO→CSR sum: no Python loop over neurons or pixels.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from smug_opt.errors import ParameterError
from smug_opt.ir import Problem, ProblemBuilder
from smug_opt.models.base import AffineLayer
from smug_opt.models.grid import CellGrid, cell_grid

__all__ = ["FirstLayerEncoding", "build_problem", "encode_first_layer", "greedy_mask"]


@dataclass(frozen=True, eq=False)
class FirstLayerEncoding:
    """The problem plus what explanations need from the encoding.

    ``receptive`` (k × num_cells, bool CSR): cell ``c`` lies in neuron ``neurons[r]``'s
    receptive field; ``preactivations``: ``o`` of the selected neurons (float64);
    ``empty_mask_rows``: how many of the selected rows the empty mask already satisfies
    (all of them: the smallest mask is empty, the explanation vacuous).
    """

    problem: Problem
    grid: CellGrid
    neurons: np.ndarray
    preactivations: np.ndarray
    receptive: sp.csr_matrix
    gamma: float
    empty_mask_rows: int


def encode_first_layer(
    affine: AffineLayer,
    x_affine: np.ndarray,
    neurons: np.ndarray,
    *,
    gamma: float = 0.0,
    cell: int | tuple[int, ...] = 4,
    grid_shape: tuple[int, ...] | None = None,
    grid: CellGrid | None = None,
    baseline: np.ndarray | None = None,
) -> FirstLayerEncoding:
    """Encode SMUG's masked first-layer constraints for ``neurons`` (flat indices into the
    layer's output) on the affine input ``x_affine``; see the module docstring.

    The cells are ``grid`` (a model adapter's :meth:`~smug_opt.models.ModelAdapter.mask_grid`)
    when given, else ``cell``-sized blocks of the layer's grid (read as ``grid_shape``).
    ``baseline``: the affine input a masked value becomes (None: 0)."""
    if not np.isfinite(gamma):
        raise ParameterError("gamma", f"must be finite, got {gamma!r}")
    neurons = np.asarray(neurons, dtype=np.int64).reshape(-1)
    if neurons.size == 0:
        raise ValueError("no neurons selected: nothing to keep active")
    if np.unique(neurons).size != neurons.size:
        raise ValueError("neurons must be distinct")
    if grid is None:
        grid = cell_grid(affine, cell, grid_shape)
    elif grid.cell_of.size != math.prod(affine.spatial_shape):
        raise ValueError(
            f"the mask grid covers {grid.cell_of.size} grid points but the first layer reads "
            f"{math.prod(affine.spatial_shape)}"
        )
    bias = affine.bias[neurons % affine.filters]
    if baseline is None:
        rows, spatial_index, values = affine.tap_contributions(x_affine, neurons)
    else:
        baseline = np.asarray(baseline, dtype=np.float64)
        if baseline.shape != np.shape(x_affine):
            raise ValueError(f"baseline must have the affine input's shape {np.shape(x_affine)}, "
                             f"got {baseline.shape}")
        rows, spatial_index, values = affine.tap_contributions(np.asarray(x_affine) - baseline, neurons)
        base_rows, _, base_values = affine.tap_contributions(baseline, neurons)
        bias = bias + np.bincount(base_rows, weights=base_values, minlength=neurons.size)
    o = np.bincount(rows, weights=values, minlength=neurons.size) + bias
    cols = grid.cell_of[spatial_index]
    shape = (neurons.size, grid.num_cells)
    coefficients = sp.csr_matrix((values, (rows, cols)), shape=shape)  # sums taps per cell
    receptive = sp.csr_matrix((np.ones(rows.size, dtype=bool), (rows, cols)), shape=shape)
    rhs = gamma * o - bias
    empty_mask_rows = int(np.count_nonzero(rhs < 0))

    greedy = greedy_mask(coefficients, rhs)
    builder = ProblemBuilder(metadata={
        "encoding": "smug-first-layer", "layer": affine.kind, "gamma": float(gamma),
        "cell": list(grid.cell), "cell_grid": list(grid.shape), "empty_mask_rows": empty_mask_rows,
        "spatial_shape": list(grid.spatial_shape), "k": int(neurons.size),
        "neurons": neurons.tolist(),
        **({} if greedy is None else {"start": greedy.astype(int).tolist()}),
    })
    mask = builder.add_binaries(grid.num_cells)
    builder.add_constraints(coefficients, mask, ">", rhs)
    builder.set_objective(mask, 1.0)
    return FirstLayerEncoding(builder.build(), grid, neurons, o, receptive, float(gamma), empty_mask_rows)


def greedy_mask(coefficients: sp.csr_matrix, rhs: np.ndarray) -> np.ndarray | None:
    """A small 0/1 mask with ``coefficients @ mask > rhs`` in float64 (with a relative
    safety margin), or None when even the full mask fails: start from every cell and
    drop cells one pass in order of their column sums (the least useful first) while
    every row they touch keeps its slack. O(nonzeros); the solver's start, which the core
    verifies exactly before using it."""
    A = sp.csc_matrix(coefficients)
    slack = np.asarray(A.sum(axis=1)).ravel() - rhs
    margin = 1e-9 * (np.asarray(abs(A).sum(axis=1)).ravel() + np.abs(rhs) + 1.0)
    if np.any(slack <= margin):
        return None
    mask = np.ones(A.shape[1])
    for c in np.argsort(np.asarray(A.sum(axis=0)).ravel(), kind="stable").tolist():
        rows = A.indices[A.indptr[c]:A.indptr[c + 1]]
        after = slack[rows] - A.data[A.indptr[c]:A.indptr[c + 1]]
        if np.all(after > margin[rows]):
            slack[rows] = after
            mask[c] = 0.0
    return mask


def build_problem(
    affine: AffineLayer,
    x_affine: np.ndarray,
    neurons: np.ndarray,
    *,
    gamma: float = 0.0,
    cell: int | tuple[int, ...] = 4,
    grid_shape: tuple[int, ...] | None = None,
    grid: CellGrid | None = None,
    baseline: np.ndarray | None = None,
) -> Problem:
    """Just the :class:`Problem` of :func:`encode_first_layer`."""
    return encode_first_layer(
        affine, x_affine, neurons, gamma=gamma, cell=cell, grid_shape=grid_shape, grid=grid,
        baseline=baseline,
    ).problem
