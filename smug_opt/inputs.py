"""Model inputs from files: an image, an array, a folder of them, or an array of many.

One rule for sizes, everywhere: a PNG/JPEG of another height × width than the model's
input is resized (bilinear) to it, and the record says so (``resized_from``); a ``.npy``
array is never resized: its values are used as they are, so its size must fit.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

__all__ = ["IMAGE_SUFFIXES", "INPUT_SUFFIXES", "list_input_files", "load_input"]

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")
INPUT_SUFFIXES = (*IMAGE_SUFFIXES, ".npy")


def list_input_files(folder: Path) -> list[Path]:
    """The image and ``.npy`` files of ``folder``, sorted by name (a ValueError if none)."""
    files = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in INPUT_SUFFIXES)
    if not files:
        raise ValueError(f"--input {folder} holds no {'/'.join(INPUT_SUFFIXES)} file")
    return files


def _spatial(input_shape: tuple[int, ...]) -> tuple[int, int] | None:
    """The (H, W) an image must have for ``input_shape``; None when it is not an image shape."""
    if len(input_shape) == 3:
        return input_shape[0], input_shape[1]
    if len(input_shape) == 2:
        return input_shape[0], input_shape[1]
    side = math.isqrt(input_shape[0]) if len(input_shape) == 1 else 0
    return (side, side) if side and side * side == input_shape[0] else None


def load_input(path: Path, input_shape: tuple[int, ...], pixel_scale: float
               ) -> tuple[np.ndarray, tuple[int, int] | None]:
    """One model input of ``input_shape`` from an image or ``.npy`` file, and the (H, W) the
    image was resized from (None when it was not resized)."""
    if not path.is_file():
        raise FileNotFoundError(f"--input {path}: no such file")
    resized = None
    if path.suffix.lower() == ".npy":
        try:
            x = np.load(path, allow_pickle=False).astype(np.float64)
        except (OSError, ValueError) as exc:
            raise ValueError(f"--input {path} is not a numeric .npy array ({exc})") from None
    else:
        from PIL import Image, UnidentifiedImageError

        channels = input_shape[-1] if len(input_shape) == 3 else 1
        try:
            with Image.open(path) as opened:
                img = opened.convert("L" if channels == 1 else "RGB")
        except (UnidentifiedImageError, OSError):
            raise ValueError(f"--input {path} is not an image PIL can read") from None
        want = _spatial(input_shape)
        if want is not None and (img.height, img.width) != want:
            resized = (img.height, img.width)
            img = img.resize((want[1], want[0]), resample=Image.BILINEAR)
        x = np.asarray(img, dtype=np.float64) / pixel_scale
    if x.shape != input_shape and x.size == math.prod(input_shape):
        x = x.reshape(input_shape)  # (28, 28) → (28, 28, 1) or (784,)
    if x.shape != input_shape:
        hint = (" (.npy arrays are used as they are, never resized)" if path.suffix.lower() == ".npy"
                else "")
        raise ValueError(f"--input {path} holds shape {x.shape}; the model expects {input_shape}{hint}")
    return x, resized
