"""The ImageNet evaluation suite's 24 inputs: the six photos that ship with scikit-image and
scikit-learn (:data:`smug_opt.models.imagenet.PHOTOS`), each as its central square, its
mirror image, the central 75 % zoomed to 224×224, and that zoom mirrored; written as PNGs
for ``smug-opt evaluate --model efficientnet-lite0 --images DIR``.

    python benchmarks/imagenet/photos.py DIR
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np


def variants(name: str) -> dict[str, np.ndarray]:
    """The four 224×224 RGB variants of one photo, 0–255."""
    from skimage.transform import resize

    from smug_opt.models import imagenet

    square = imagenet.photo(name, size=448)
    zoom = resize(square[56:392, 56:392], (224, 224), preserve_range=True, anti_aliasing=True)
    full = imagenet.photo(name)
    return {name: full, f"{name}_flip": full[:, ::-1], f"{name}_zoom": zoom,
            f"{name}_zoom_flip": zoom[:, ::-1]}


def main() -> None:
    from PIL import Image

    from smug_opt.models import imagenet

    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    for name in imagenet.PHOTOS:
        for label, image in variants(name).items():
            Image.fromarray(np.clip(np.round(image), 0, 255).astype(np.uint8)).save(out / f"{label}.png")
    print(f"wrote {4 * len(imagenet.PHOTOS)} photos to {out}")


if __name__ == "__main__":
    main()
