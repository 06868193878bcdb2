"""The mask grid: how an input is cut into the cells a SMUG mask keeps or drops.

A model adapter owns its grid (:meth:`ModelAdapter.mask_grid`): an image's H×W pixels for
convolutions and for MLPs that read an image (``Flatten→Dense``, or a flat ``Input(784)``
given a 28×28 picture), token positions for text. Encoders and the CLI take the grid from
the adapter; nothing decides it from a model's name.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import numpy as np

from smug_opt.errors import ParameterError

if TYPE_CHECKING:
    from smug_opt.models.base import AffineLayer

__all__ = ["CellGrid", "cell_grid", "data_grid", "regular_grid"]


@dataclass(frozen=True, eq=False)
class CellGrid:
    """How the affine input's grid is cut into mask cells.

    ``cell_of[j]`` is the cell of spatial index ``j``; ``shape`` is the grid of cells
    (e.g. ``(7, 7)`` for 28×28 pixels in 4×4 cells); ``spatial_shape`` the grid the mask
    is drawn on (``(H, W)``, ``(T,)`` or ``(n,)``; ``(H, W, C)`` when a flat dense input
    holds C channels per pixel, which share their pixel's cell).
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


def regular_grid(spatial: tuple[int, ...], cell: int | tuple[int, ...], channels: int = 1) -> CellGrid:
    """``cell``-sized blocks of a ``spatial`` grid (edge blocks may be smaller), row-major;
    with ``channels > 1`` every grid point stands for that many consecutive flat inputs."""
    spatial = tuple(int(n) for n in spatial)
    # np.isscalar does not narrow: cast to the branch's type
    cells = ((int(cast(int, cell)),) * len(spatial) if np.isscalar(cell)
             else tuple(int(c) for c in cast(tuple, cell)))
    if len(cells) != len(spatial) or min(cells) < 1:
        raise ParameterError("cell", f"must be a positive int or one per grid axis {spatial}, got {cell!r}")
    if any(c > n for c, n in zip(cells, spatial, strict=True)):
        raise ParameterError("cell", f"is larger than the input: {cell!r} on a {'x'.join(map(str, spatial))} "
                         f"grid would make the whole input one cell; give at most "
                         f"{min(spatial) if np.isscalar(cell) else spatial}")
    shape = tuple(-(-n // c) for n, c in zip(spatial, cells, strict=True))
    coords = np.unravel_index(np.arange(math.prod(spatial)), spatial)
    cell_of = np.ravel_multi_index(tuple(k // c for k, c in zip(coords, cells, strict=True)), shape)
    if channels > 1:
        cell_of = np.repeat(cell_of, channels)
        spatial = (*spatial, channels)
    cell_of.flags.writeable = False
    return CellGrid(cell_of=cell_of, shape=shape, spatial_shape=spatial, cell=cells)


def cell_grid(
    affine: AffineLayer, cell: int | tuple[int, ...], grid_shape: tuple[int, ...] | None = None
) -> CellGrid:
    """Cut an :class:`~smug_opt.models.base.AffineLayer`'s input grid into cells.

    ``grid_shape`` re-reads a dense layer's flat input as an image: ``(H, W)`` or
    ``(H, W, C)`` (channels last, sharing a cell), e.g. ``(28, 28)`` for a 784-input MLP.
    """
    spatial = affine.spatial_shape
    if grid_shape is None:
        return regular_grid(spatial, cell)
    grid_shape = tuple(int(g) for g in grid_shape)
    if math.prod(grid_shape) != math.prod(spatial):
        raise ValueError(
            f"grid_shape {grid_shape} has {math.prod(grid_shape)} entries but the first "
            f"layer reads {math.prod(spatial)} per channel"
        )
    if affine.kind != "dense" and grid_shape != spatial:
        raise ParameterError("grid_shape", f"only applies to dense first layers (grid is {spatial})")
    if len(grid_shape) == 3:
        return regular_grid(grid_shape[:2], cell, grid_shape[2])
    return regular_grid(grid_shape, cell)


def data_grid(n_values: int, data_shape: tuple[int, ...] | None) -> tuple[int, ...] | None:
    """The image grid ``(H, W)`` or ``(H, W, C)`` a flat input of ``n_values`` is read on
    when the data came with ``data_shape`` (a picture: two or three axes holding exactly
    ``n_values``); None when the data is flat (the grid is then the flat input itself)."""
    if data_shape is None or len(data_shape) < 2 or math.prod(data_shape) != n_values:
        return None
    height, width = int(data_shape[0]), int(data_shape[1])
    channels = n_values // (height * width)
    return (height, width) if channels == 1 else (height, width, channels)
