"""Loading evaluation inputs: a folder of images and a CSV of ground-truth boxes."""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from smug_opt.bounded import check_npy_file, open_image
from smug_opt.evaluate.boxes import Box
from smug_opt.input_layout import in_input_shape
from smug_opt.inputs import INPUT_SUFFIXES

BOX_COLUMNS = ("name", "top", "left", "bottom", "right")


def _read_image(path: Path, size: tuple[int, int] | None) -> np.ndarray:
    if path.suffix.lower() == ".npy":
        check_npy_file(path)
        try:
            array = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as error:
            raise ValueError(f"cannot read {path} as a .npy array: {error}") from error
        if array.ndim == 2:
            array = array[:, :, None]
        if array.ndim != 3 or not np.issubdtype(array.dtype, np.number):
            raise ValueError(f"{path}: a .npy image must be numeric (H, W), (H, W, C) or (C, H, W); "
                             f"got {array.dtype} {array.shape}")
        if size is not None and array.shape[:2] != tuple(size) and array.shape[1:] == tuple(size):
            array = in_input_shape(array, (*size, array.shape[0]))  # channels first, as torch saves it
        if size is not None and array.shape[:2] != tuple(size):
            raise ValueError(f"{path}: .npy images are not resized; shape {array.shape[:2]} != {size}")
        return array.astype(np.float32)
    from PIL import Image

    with open_image(path) as img:
        img = img.convert("L" if img.mode in ("1", "L", "I", "I;16", "F") else "RGB")
        if size is not None:
            img = img.resize((int(size[1]), int(size[0])), resample=Image.Resampling.BILINEAR)
        array = np.asarray(img, dtype=np.float32)
    return array[:, :, None] if array.ndim == 2 else array


def load_image_folder(
    directory: str | Path, size: tuple[int, int] | None = None
) -> tuple[np.ndarray, list[str]]:
    """Every PNG/JPEG/.npy file of ``directory`` (sorted by name) as (N, H, W, C) float32.

    Pixel values are kept as stored (0-255 for PNG/JPEG): scale them as the model expects.
    Grayscale gives C = 1, colour C = 3 (alpha dropped). ``size=(H, W)`` resizes PNG/JPEG
    bilinearly; without it every image must already have the same shape. Names are the
    file stems.
    """
    folder = Path(directory)
    if not folder.is_dir():
        raise ValueError(f"image folder {folder} does not exist or is not a directory")
    files = sorted(p for p in folder.iterdir() if p.suffix.lower() in INPUT_SUFFIXES)
    if not files:
        raise ValueError(f"no {'/'.join(INPUT_SUFFIXES)} file in {folder}")
    names = [p.stem for p in files]
    if len(set(names)) != len(names):
        raise ValueError(f"two files in {folder} share a name (stem): {sorted(names)}")
    images = [_read_image(p, size) for p in files]
    shapes = {img.shape for img in images}
    if len(shapes) != 1:
        listing = ", ".join(f"{p.name}: {img.shape}" for p, img in zip(files, images, strict=True))
        raise ValueError(f"images in {folder} differ in shape (pass size=(H, W)): {listing}")
    return np.stack(images), names


def load_boxes_csv(path: str | Path) -> dict[str, Box]:
    """Ground-truth boxes from a CSV with header ``name,top,left,bottom,right`` (pixels).

    ``bottom``/``right`` are exclusive. Each name (an image's file stem) appears once.
    """
    path = Path(path)
    try:
        with path.open(newline="") as handle:
            reader = csv.DictReader(handle)
            missing = [c for c in BOX_COLUMNS if c not in (reader.fieldnames or [])]
            if missing:
                raise ValueError(
                    f"{path}: the header must name {','.join(BOX_COLUMNS)}; missing {missing}, "
                    f"got {reader.fieldnames}"
                )
            rows = list(reader)
    except OSError as error:
        raise ValueError(f"cannot read boxes CSV {path}: {error}") from error
    boxes: dict[str, Box] = {}
    for line, row in enumerate(rows, start=2):
        name = (row["name"] or "").strip()
        try:
            box = Box(*(int(row[c]) for c in BOX_COLUMNS[1:]))
        except (TypeError, ValueError):
            raise ValueError(
                f"{path}:{line}: top,left,bottom,right must be integers; got "
                f"{[row[c] for c in BOX_COLUMNS[1:]]}"
            ) from None
        if not name:
            raise ValueError(f"{path}:{line}: empty name")
        if name in boxes:
            raise ValueError(f"{path}:{line}: name {name!r} appears twice")
        if box.top < 0 or box.left < 0 or box.bottom <= box.top or box.right <= box.left:
            raise ValueError(f"{path}:{line}: box {tuple(box)} for {name!r} is empty or negative")
        boxes[name] = box
    if not boxes:
        raise ValueError(f"{path}: no box rows")
    return boxes


def align_boxes(names: Sequence[str], boxes: Mapping[str, Box]) -> list[Box | None]:
    """The box of each named input (``None`` where the CSV has none), in the inputs' order.

    Raises ``ValueError`` if the CSV names no input at all (likely a mismatch of names).
    """
    aligned = [boxes.get(name) for name in names]
    if boxes and all(b is None for b in aligned):
        raise ValueError(
            f"no box name matches an input name; boxes name e.g. {sorted(boxes)[:3]}, inputs "
            f"are e.g. {list(names)[:3]}"
        )
    return aligned


def load_spec_images(folder: str | Path, input_view: Any) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """The test images recovered from the VNN-LIB robustness specs under ``folder``
    (:func:`smug_opt.data.vnnlib.spec_images`), as the model reads them: (N, H, W, C) in
    ``input_view``'s layout (an ONNX/PyTorch adapter's :attr:`input_view`), their labels
    (N,) and names (the spec file names)."""
    from smug_opt.data.vnnlib import spec_images

    view_shape, net_shape = tuple(input_view.view_shape), tuple(input_view.net_shape)
    if len(view_shape) != 3:
        raise ValueError(f"spec images need an image model (H, W, C); this one reads {view_shape}")
    channels = view_shape[-1]
    channels_first = net_shape != view_shape and net_shape[0] == channels
    images = spec_images(folder, channels, channels_first)
    flat = np.stack([image.x for image in images])
    if flat.shape[1] != int(np.prod(view_shape)):
        raise ValueError(f"the specs under {folder} bound {flat.shape[1]} inputs; the model reads "
                         f"{int(np.prod(view_shape))} {view_shape}")
    inputs = np.asarray(input_view.to_view(flat), dtype=np.float64).reshape(len(flat), *view_shape)
    return inputs, np.array([image.label for image in images]), [image.name for image in images]
