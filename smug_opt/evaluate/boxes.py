"""Box geometry for LSC: tightest box, bilinear crop-and-resize, and the reference boxes.

Boxes are half-open pixel ranges ``[top, bottom) x [left, right)``. Nothing here calls a
model; scoring boxes with a model (and the OptBox search) lives in :mod:`.lsc`.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np


class Box(NamedTuple):
    """A box of rows ``top:bottom`` and columns ``left:right`` (bottom/right exclusive)."""

    top: int
    left: int
    bottom: int
    right: int

    @property
    def height(self) -> int:
        return self.bottom - self.top

    @property
    def width(self) -> int:
        return self.right - self.left

    def area_fraction(self, shape: tuple[int, int]) -> float:
        """The box's area as a fraction of an ``(H, W)`` input."""
        return self.height * self.width / (shape[0] * shape[1])

    def mask(self, shape: tuple[int, int]) -> np.ndarray:
        """A boolean ``(H, W)`` mask that is True inside the box."""
        out = np.zeros(shape, dtype=bool)
        out[self.top : self.bottom, self.left : self.right] = True
        return out


def check_box(box: Box, shape: tuple[int, int]) -> Box:
    """Return ``box`` as a :class:`Box` if it is non-empty and inside an ``(H, W)`` input."""
    box = Box(*(int(v) for v in box))
    if not (0 <= box.top < box.bottom <= shape[0] and 0 <= box.left < box.right <= shape[1]):
        raise ValueError(
            f"box (top, left, bottom, right)={tuple(box)} is empty or outside an input of "
            f"shape (H, W)={tuple(shape)}"
        )
    return box


def tightest_box(mask: np.ndarray) -> Box:
    """The smallest box containing every True (non-zero) pixel of a 2-D mask."""
    mask = np.asarray(mask)
    if mask.ndim != 2:
        raise ValueError(f"mask must be 2-D (H, W); got shape {mask.shape}")
    rows = np.flatnonzero(mask.any(axis=1))
    cols = np.flatnonzero(mask.any(axis=0))
    if rows.size == 0:
        raise ValueError(f"mask of shape {mask.shape} has no selected pixel: no box exists")
    return Box(int(rows[0]), int(cols[0]), int(rows[-1]) + 1, int(cols[-1]) + 1)


def _source_coords(start: np.ndarray, length: np.ndarray, out_size: int):
    """Bilinear taps (half-pixel centres) along one axis for each box: lo, hi, weight of hi."""
    scale = length / out_size  # (N,)
    pos = (np.arange(out_size) + 0.5)[None, :] * scale[:, None] - 0.5  # (N, out)
    pos = np.clip(pos, 0.0, (length - 1)[:, None])
    lo = np.floor(pos)
    frac = pos - lo
    lo = lo.astype(np.intp)
    hi = np.minimum(lo + 1, (length - 1)[:, None])
    return start[:, None] + lo, start[:, None] + hi, frac


def crop_and_resize(
    image: np.ndarray, boxes: list[Box] | Box, size: tuple[int, int] | None = None
) -> np.ndarray:
    """Crop each box from ``image`` (H, W, C) and resize it bilinearly to ``size`` (default H, W).

    Returns (N, h, w, C). The interpolation is plain numpy with half-pixel centres and edge
    clamping, the same sampling as ``tf.image.resize(..., "bilinear", antialias=False)``;
    it is deterministic and vectorised over boxes. The dtype is the image's if floating,
    else float32.
    """
    image = np.asarray(image)
    if image.ndim != 3:
        raise ValueError(f"image must be (H, W, C); got shape {image.shape}")
    height, width = image.shape[:2]
    if isinstance(boxes, Box):
        boxes = [boxes]
    arr = np.array([tuple(check_box(b, (height, width))) for b in boxes], dtype=np.intp)
    if arr.size == 0:
        raise ValueError("crop_and_resize needs at least one box; got none")
    out_h, out_w = (height, width) if size is None else (int(size[0]), int(size[1]))
    dtype = np.result_type(image.dtype, np.float32)
    img = image.astype(dtype, copy=False)
    y0, y1, fy = _source_coords(arr[:, 0], arr[:, 2] - arr[:, 0], out_h)
    x0, x1, fx = _source_coords(arr[:, 1], arr[:, 3] - arr[:, 1], out_w)
    fy = fy.astype(dtype)[:, :, None, None]
    fx = fx.astype(dtype)[:, None, :, None]
    ya, yb = y0[:, :, None], y1[:, :, None]
    xa, xb = x0[:, None, :], x1[:, None, :]
    top = img[ya, xa] + (img[ya, xb] - img[ya, xa]) * fx
    bottom = img[yb, xa] + (img[yb, xb] - img[yb, xa]) * fx
    return top + (bottom - top) * fy


def center_box(shape: tuple[int, int]) -> Box:
    """CenterBox: the centred box with (about) half the area and the input's aspect ratio."""
    height, width = shape
    h = max(1, round(height / math.sqrt(2.0)))
    w = max(1, round(width / math.sqrt(2.0)))
    top, left = (height - h) // 2, (width - w) // 2
    return Box(top, left, top + h, left + w)


def max_box(shape: tuple[int, int]) -> Box:
    """MaxBox: the whole input."""
    return Box(0, 0, int(shape[0]), int(shape[1]))


def grid_boxes(shape: tuple[int, int], grid: int = 10, min_cells: int = 2) -> list[Box]:
    """Every box with corners on a ``grid`` x ``grid`` lattice spanning >= ``min_cells`` per side.

    With the defaults this is the paper code's OptBox search space: 45 x 45 = 2,025 boxes.
    Lattice lines are at ``int(k * H / grid)`` as in that code.
    """
    if grid < 1 or not 1 <= min_cells <= grid:
        raise ValueError(f"need grid >= 1 and 1 <= min_cells <= grid; got {grid=}, {min_cells=}")
    if min(shape) < grid:
        raise ValueError(f"a {grid}x{grid} grid needs an input of at least that size; got {shape}")
    ys = [int(k * shape[0] / grid) for k in range(grid + 1)]
    xs = [int(k * shape[1] / grid) for k in range(grid + 1)]
    spans = [(a, b) for a in range(grid) for b in range(a + min_cells, grid + 1)]
    return [Box(ys[t], xs[lf], ys[b], xs[r]) for t, b in spans for lf, r in spans]


def ground_truth_box(image: np.ndarray, background: float = 0.0) -> Box:
    """The object's box when no annotation exists: the tightest box of non-background pixels.

    For MNIST (black background) this is the digit's bounding box.
    """
    image = np.asarray(image)
    if image.ndim != 3:
        raise ValueError(f"image must be (H, W, C); got shape {image.shape}")
    return tightest_box(np.any(image != background, axis=-1))
