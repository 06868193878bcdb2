"""The SMUG first-layer encoding: the smallest cell mask that keeps chosen neurons active.

For each selected neuron ``t`` (pre-activation ``o_t = W1[t]·x + b1[t]``) and mask cells
``M_c`` (one per ``cell × cell`` block of the affine input's grid, shared by all channels)::

    Σ_c a_tc · M_c + b1[t]  >  γ · o_t,      a_tc = Σ_{j in cell c} W1[t, j] · x_j

minimising ``Σ_c M_c`` (every cell counts once, edge cells included). The coefficients are
aggregated with one vectorised gather (:meth:`AffineLayer.tap_contributions`) and one
sparse COO→CSR sum: no Python loop over neurons or pixels.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from smug_opt.ir import Problem, ProblemBuilder
from smug_opt.models.base import AffineLayer

__all__ = ["CellGrid", "FirstLayerEncoding", "build_problem", "cell_grid", "encode_first_layer",
           "greedy_mask"]


@dataclass(frozen=True, eq=False)
class CellGrid:
    """How the affine input's grid is cut into mask cells.

    ``cell_of[j]`` is the cell of spatial index ``j``; ``shape`` is the grid of cells
    (e.g. ``(7, 7)`` for 28×28 pixels in 4×4 cells); ``spatial_shape`` the grid the mask
    is drawn on (``(H, W)``, ``(T,)`` or ``(n,)``).
    """

    cell_of: np.ndarray
    shape: tuple[int, ...]
    spatial_shape: tuple[int, ...]
    cell: tuple[int, ...]

    @property
    def num_cells(self) -> int:
        return math.prod(self.shape)

    def expand(self, per_cell: np.ndarray) -> np.ndarray:
        """Per-cell values (num_cells,) drawn on the spatial grid (``spatial_shape``)."""
        values = np.asarray(per_cell).reshape(-1)
        if values.size != self.num_cells:
            raise ValueError(f"expected {self.num_cells} cell values, got {values.size}")
        return values[self.cell_of].reshape(self.spatial_shape)


def cell_grid(
    affine: AffineLayer, cell: int | tuple[int, ...], grid_shape: tuple[int, ...] | None = None
) -> CellGrid:
    """Cut the affine input's spatial grid into cells.

    ``grid_shape`` re-reads a dense layer's flat input as an image: ``(H, W)`` or
    ``(H, W, C)`` (channels last, sharing a cell), e.g. ``(28, 28)`` for a 784-input MLP.
    """
    spatial = affine.spatial_shape
    channels = 1
    if grid_shape is not None:
        grid_shape = tuple(int(g) for g in grid_shape)
        if math.prod(grid_shape) != math.prod(spatial):
            raise ValueError(
                f"grid_shape {grid_shape} has {math.prod(grid_shape)} entries but the first "
                f"layer reads {math.prod(spatial)} per channel"
            )
        if affine.kind != "dense" and grid_shape != spatial:
            raise ValueError(f"grid_shape only applies to dense first layers (grid is {spatial})")
        if len(grid_shape) == 3:
            channels = grid_shape[2]
            grid_shape = grid_shape[:2]
        spatial = grid_shape
    cells = (int(cell),) * len(spatial) if np.isscalar(cell) else tuple(int(c) for c in cell)
    if len(cells) != len(spatial) or min(cells) < 1:
        raise ValueError(f"cell must be a positive int or one per grid axis {spatial}, got {cell!r}")
    shape = tuple(-(-n // c) for n, c in zip(spatial, cells, strict=True))
    coords = np.unravel_index(np.arange(math.prod(spatial)), spatial)
    cell_coords = tuple(k // c for k, c in zip(coords, cells, strict=True))
    cell_of = np.ravel_multi_index(cell_coords, shape)
    if channels > 1:
        cell_of = np.repeat(cell_of, channels)
        spatial = (*spatial, channels)
    cell_of.flags.writeable = False
    return CellGrid(cell_of=cell_of, shape=shape, spatial_shape=spatial, cell=cells)


@dataclass(frozen=True, eq=False)
class FirstLayerEncoding:
    """The problem plus what explanations need from the encoding.

    ``receptive`` (k × num_cells, bool CSR): cell ``c`` lies in neuron ``neurons[r]``'s
    receptive field; ``preactivations``: ``o`` of the selected neurons (float64).
    """

    problem: Problem
    grid: CellGrid
    neurons: np.ndarray
    preactivations: np.ndarray
    receptive: sp.csr_matrix
    gamma: float


def encode_first_layer(
    affine: AffineLayer,
    x_affine: np.ndarray,
    neurons: np.ndarray,
    *,
    gamma: float = 0.0,
    cell: int | tuple[int, ...] = 4,
    grid_shape: tuple[int, ...] | None = None,
) -> FirstLayerEncoding:
    """Encode SMUG's masked first-layer constraints for ``neurons`` (flat indices into the
    layer's output) on the affine input ``x_affine``; see the module docstring."""
    if not np.isfinite(gamma):
        raise ValueError(f"gamma must be finite, got {gamma!r}")
    neurons = np.asarray(neurons, dtype=np.int64).reshape(-1)
    if neurons.size == 0:
        raise ValueError("no neurons selected: nothing to keep active")
    if np.unique(neurons).size != neurons.size:
        raise ValueError("neurons must be distinct")
    grid = cell_grid(affine, cell, grid_shape)
    rows, spatial_index, values = affine.tap_contributions(x_affine, neurons)
    bias = affine.bias[neurons % affine.filters]
    o = np.bincount(rows, weights=values, minlength=neurons.size) + bias
    cols = grid.cell_of[spatial_index]
    shape = (neurons.size, grid.num_cells)
    coefficients = sp.csr_matrix((values, (rows, cols)), shape=shape)  # sums taps per cell
    receptive = sp.csr_matrix((np.ones(rows.size, dtype=bool), (rows, cols)), shape=shape)
    rhs = gamma * o - bias

    greedy = greedy_mask(coefficients, rhs)
    builder = ProblemBuilder(metadata={
        "encoding": "smug-first-layer", "layer": affine.kind, "gamma": float(gamma),
        "cell": list(grid.cell), "cell_grid": list(grid.shape),
        "spatial_shape": list(grid.spatial_shape), "k": int(neurons.size),
        "neurons": neurons.tolist(),
        **({} if greedy is None else {"start": greedy.astype(int).tolist()}),
    })
    mask = builder.add_binaries(grid.num_cells)
    builder.add_constraints(coefficients, mask, ">", rhs)
    builder.set_objective(mask, 1.0)
    return FirstLayerEncoding(builder.build(), grid, neurons, o, receptive, float(gamma))


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
) -> Problem:
    """Just the :class:`Problem` of :func:`encode_first_layer`."""
    return encode_first_layer(
        affine, x_affine, neurons, gamma=gamma, cell=cell, grid_shape=grid_shape
    ).problem
