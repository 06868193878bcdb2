"""Model inputs from files: an image, an array, a folder of them, or an array of many.

One rule for sizes, everywhere: a PNG/JPEG of another height × width than the model's
input is resized (bilinear) to it, and the record says so (``resized_from``); a ``.npy``
array is never resized: its values are used as they are, so its size must fit. A picture
for a flat input (an ``Input(784)`` MLP) keeps its H×W shape: the model's adapter reads
the mask grid from it.

Pixels (0–255) become model inputs by one of the ``keras.applications`` preprocessing
modes, written out in numpy (:func:`preprocess`): ``unit`` divides by a pixel scale (255:
[0, 1], the embedded models'), ``raw`` keeps 0–255 (models that rescale inside:
EfficientNet, ConvNeXt), ``tf`` maps to [-1, 1] (MobileNetV2, InceptionV3), ``caffe``
turns RGB into BGR and subtracts the ImageNet means (VGG16, ResNet50), ``torch``
standardises with the ImageNet means and deviations (DenseNet121). A masked pixel is 0
*after* this preprocessing (the mean colour for caffe/torch, mid-grey for tf), as in the
paper's preprocessed inputs.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from smug_opt.bounded import check_npy_file, open_image
from smug_opt.input_layout import in_input_shape
from smug_opt.outputs import SINGLE_RUN_FILES

__all__ = ["IMAGE_SUFFIXES", "INPUT_SUFFIXES", "PREPROCESSING_MODES", "image_size", "list_input_files",
           "load_input", "preprocess"]

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")
INPUT_SUFFIXES = (*IMAGE_SUFFIXES, ".npy")
PREPROCESSING_MODES = ("unit", "raw", "tf", "caffe", "torch")
_CAFFE_MEAN_BGR = np.array([103.939, 116.779, 123.68])
_TORCH_MEAN = np.array([0.485, 0.456, 0.406])
_TORCH_STD = np.array([0.229, 0.224, 0.225])


def preprocess(pixels: np.ndarray, mode: str = "unit", pixel_scale: float = 255.0,
               value_range: tuple[float, float] | None = None) -> np.ndarray:
    """0–255 pixels (H, W[, C]) as a model expects them (see the module docstring), float64;
    with ``value_range`` (a model's declared input range) mapped linearly onto it instead."""
    x = np.asarray(pixels, dtype=np.float64)
    if value_range is not None:
        lo, hi = value_range
        return lo + x / 255.0 * (hi - lo)
    if mode == "unit":
        return x / pixel_scale
    if mode == "raw":
        return x
    if mode == "tf":
        return x / 127.5 - 1.0
    if mode in ("caffe", "torch"):
        if x.ndim != 3 or x.shape[-1] != 3:
            raise ValueError(f"{mode!r} preprocessing needs RGB pixels (H, W, 3), got shape {x.shape}")
        return x[..., ::-1] - _CAFFE_MEAN_BGR if mode == "caffe" else (x / 255.0 - _TORCH_MEAN) / _TORCH_STD
    raise ValueError(f"preprocessing must be one of {', '.join(PREPROCESSING_MODES)}, got {mode!r}")


def list_input_files(folder: Path) -> list[Path]:
    """The image and ``.npy`` files of ``folder``, sorted by name (a ValueError if none),
    except the files a single explain writes (``mask.npy``, ``overlay.png``...: a folder
    that once received a run's ``--out`` holds them), which are skipped with a warning."""
    candidates = sorted(p for p in folder.iterdir()
                        if p.is_file() and p.suffix.lower() in INPUT_SUFFIXES)
    outputs = [p.name for p in candidates if p.name in SINGLE_RUN_FILES]
    files = [p for p in candidates if p.name not in SINGLE_RUN_FILES]
    if outputs:
        warnings.warn(f"--input {folder}: skipped {', '.join(outputs)}, which smug-opt explain "
                      "writes as its outputs, not inputs (rename a genuine input)", stacklevel=2)
    if not files:
        raise ValueError(f"--input {folder} holds no {'/'.join(INPUT_SUFFIXES)} file"
                         + (" other than smug-opt's own outputs" if outputs else ""))
    return files


def image_size(input_shape: tuple[int, ...]) -> tuple[int, int] | None:
    """The (H, W) an image must have for ``input_shape``; None when it is not an image shape."""
    if len(input_shape) == 3:
        return input_shape[0], input_shape[1]
    if len(input_shape) == 2:
        return input_shape[0], input_shape[1]
    side = math.isqrt(input_shape[0]) if len(input_shape) == 1 else 0
    return (side, side) if side and side * side == input_shape[0] else None


def load_input(path: Path, input_shape: tuple[int, ...], pixel_scale: float, preprocessing: str = "unit",
               value_range: tuple[float, float] | None = None) -> tuple[np.ndarray, tuple[int, int] | None]:
    """One model input of ``input_shape`` (a picture's H×W for a flat input) from an image
    or ``.npy`` file, and the (H, W) the image was resized from (None when it was not);
    ``value_range``: see :func:`preprocess`."""
    if not path.is_file():
        raise FileNotFoundError(f"--input {path}: no such file")
    resized = None
    if path.suffix.lower() == ".npy":
        check_npy_file(path)
        try:
            x = np.load(path, allow_pickle=False).astype(np.float64)
        except (OSError, ValueError) as exc:
            raise ValueError(f"--input {path} is not a numeric .npy array ({exc})") from None
    else:
        from PIL import Image

        channels = input_shape[-1] if len(input_shape) == 3 else 1
        with open_image(path) as opened:
            _warn_if_alpha_only(path, opened)
            img = opened.convert("L" if channels == 1 else "RGB")
        want = image_size(input_shape)
        if want is not None and (img.height, img.width) != want:
            resized = (img.height, img.width)
            img = img.resize((want[1], want[0]), resample=Image.Resampling.BILINEAR)
        x = preprocess(np.asarray(img), preprocessing, pixel_scale, value_range)
    if len(input_shape) == 1 and x.ndim >= 2 and x.size == input_shape[0]:
        return x, resized  # a picture for a flat input: its shape gives the mask grid
    x = in_input_shape(x, input_shape)  # (28, 28) → (28, 28, 1); (3, H, W) → (H, W, 3)
    if x.shape != input_shape:
        hint = (" (.npy arrays are used as they are, never resized)" if path.suffix.lower() == ".npy"
                else "")
        raise ValueError(f"--input {path} holds shape {x.shape}; the model expects {input_shape}{hint}")
    return x, resized



def _warn_if_alpha_only(path: Path, image: Any) -> None:
    """Warn when a picture lives only in its alpha channel: the colour channels, which are
    what is explained, are then uniform (a blank input)."""
    if "A" not in image.getbands() or image.mode not in ("RGBA", "LA", "PA", "La"):
        return
    rgba = image.convert("RGBA")
    colour_extrema = rgba.convert("RGB").getextrema()
    alpha_low, alpha_high = rgba.getchannel("A").getextrema()
    if all(low == high for low, high in colour_extrema) and alpha_low != alpha_high:
        warnings.warn(f"--input {path}: the picture is only in the alpha (transparency) channel, which "
                      "is dropped; the colour channels explained are uniform (a blank input). "
                      "Flatten it onto a background first", stacklevel=3)
