"""Test images recovered from VNN-LIB robustness specifications.

A robustness spec bounds every input ``X_i`` by ``[x_i − ε, x_i + ε]`` clipped to the valid
range, so the image is the box's centre where neither side was clipped, ``hi − ε`` where
the lower side was and ``lo + ε`` where the upper side was. ``ε`` is the widest half-width
among the inputs of one channel (normalised specs scale it per channel); a side counts as
clipped when the box is narrower and that side sits at the channel's extreme. The label is
the one the file's comment names (``label: N`` or ``correct label N``). Inputs ``X_i`` are
the network's input flattened in its own layout; images that several specs share (one per
ε) are returned once. Recovered values are rounded to float32 (what the images were) and
values within 1e-6 of 0 set to 0.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from smug_opt.bounded import read_budget_bytes
from smug_opt.vnnlib import MAX_FILE_BYTES, parse_vnnlib, read_vnnlib_text

__all__ = ["SpecImage", "read_spec_image", "spec_images"]

_LABEL = re.compile(r"correct label\s+(\d+)|label:\s*(\d+)")


@dataclass(frozen=True, eq=False)
class SpecImage:
    """An image recovered from ``source`` (flat, the network's input order) and its label."""

    name: str
    x: np.ndarray
    label: int
    source: str


def read_spec_image(path: str | Path, channels: int = 1, channels_first: bool = True) -> SpecImage:
    """The image and label of one ``.vnnlib`` or ``.vnnlib.gz`` file; ``channels`` and the
    layout group the inputs for the per-channel ``ε``."""
    path = Path(path)
    text = read_vnnlib_text(path, max_bytes=min(read_budget_bytes(), MAX_FILE_BYTES))
    label_match = _LABEL.search(text)
    if label_match is None:
        raise ValueError(f"{path}: no 'label: N' or 'correct label N' comment names the label")
    label = int(label_match.group(1) or label_match.group(2))
    spec = parse_vnnlib(text, source=path)
    lo, hi, n = spec.lo, spec.hi, spec.num_inputs
    if n % channels:
        raise ValueError(f"{path}: {n} inputs do not split into {channels} channels")
    channel = np.arange(n) // (n // channels) if channels_first else np.arange(n) % channels
    x = (lo + hi) / 2
    for c in range(channels):
        inside = channel == c
        half = (hi - lo)[inside] / 2
        eps = half.max()
        clipped = half < eps * (1 - 1e-6)
        low_side = clipped & (lo[inside] <= lo[inside].min())
        values = x[inside]
        values[low_side] = hi[inside][low_side] - eps
        values[clipped & ~low_side] = lo[inside][clipped & ~low_side] + eps
        x[inside] = values
    x = x.astype(np.float32).astype(np.float64)  # the images were float32; rounding noise off
    x[np.abs(x) < 1e-6] = 0.0  # a black pixel recovered as ±1e-9 is 0 (and gets no mask cell)
    return SpecImage(path.name.split(".vnnlib")[0], x, label, str(path))


def spec_images(folder: str | Path, channels: int = 1, channels_first: bool = True) -> list[SpecImage]:
    """Every distinct image of the specs in ``folder`` (searched recursively), in file-name
    order."""
    folder = Path(folder)
    files = sorted(p for p in folder.rglob("*") if p.name.endswith((".vnnlib", ".vnnlib.gz")))
    if not files:
        raise ValueError(f"no .vnnlib or .vnnlib.gz files under {folder}")
    seen: set[bytes] = set()
    images = []
    for path in sorted(files, key=_natural):
        image = read_spec_image(path, channels, channels_first)
        key = np.round(image.x, 4).tobytes() + bytes([image.label])
        if key not in seen:
            seen.add(key)
            images.append(image)
    return images


def _natural(path: Path) -> list:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path.name)]
