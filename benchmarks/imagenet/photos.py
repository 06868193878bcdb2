"""The ImageNet evaluation suite's 24 inputs
(:func:`smug_opt.models.imagenet.evaluation_photos`: the six photos that ship with
scikit-image and scikit-learn, each as its central square, its mirror image, the central
75 % zoomed to 224×224, and that zoom mirrored), written as PNGs for
``smug-opt evaluate --model efficientnet-lite0 --images DIR --pixel-scale 1``.

    python benchmarks/imagenet/photos.py DIR
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np


def main() -> None:
    from PIL import Image

    from smug_opt.models.imagenet import evaluation_photos

    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    suite = evaluation_photos()
    for label, image in suite.items():
        Image.fromarray(np.clip(np.round(image), 0, 255).astype(np.uint8)).save(out / f"{label}.png")
    print(f"wrote {len(suite)} photos to {out}")


if __name__ == "__main__":
    main()
