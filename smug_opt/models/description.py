"""What a model says about itself: its SMUG defaults, class names, padding token and the
evaluation methods that apply to it.

The embedded models declare theirs in :mod:`smug_opt.models.zoo`; any other model gets
:data:`GENERIC_IMAGE_MODEL`'s (the paper's ImageNet setting).
:func:`smug_opt.models.catalog.describe` finds the one that applies to a model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from smug_opt.parameters import PAPER_PARAMETERS, SmugParameters

__all__ = ["GENERIC_IMAGE_MODEL", "IMAGE_EVALUATION_METHODS", "ModelDescription"]

IMAGE_EVALUATION_METHODS = ("smug", "smug_base", "ig", "gradcam", "centerbox", "maxbox", "optbox")
"""The methods that apply to any image classifier (``groundtruth`` needs annotations)."""


@dataclass(frozen=True)
class ModelDescription:
    """The facts about a model that the CLI, batch runs and the evaluation need.

    ``smug``: the SMUG parameters used when the caller gives none. ``class_names``: a
    name per output class (None: classes are shown as numbers). ``padding_token``: the
    token id that is no part of a text (None: the model reads no padded tokens); a cell
    made only of padding is kept by construction and not counted. ``vocabulary``: the
    model reads token ids of the embedded review vocabulary (``--tokens`` can be used).
    ``evaluation_methods``: what ``smug-opt evaluate`` runs when no method is named.
    ``pixel_mean``: the training data's mean raw value per channel (None: not declared;
    the ``mean`` baseline needs it). ``preprocessing``: how a raw input is made from a
    photo and what the model does to it first, in words (None: nothing to say).
    ``image_preprocessing``: how an image file's pixels become the model's input
    (:data:`smug_opt.inputs.PREPROCESSING_MODES`; ``raw``: 0–255 as they are).
    ``head_dtype``: the precision a PyTorch/ONNX head runs in for Integrated Gradients
    (``float32`` for large heads: torch's float64 convolutions on CPU take a slow path;
    the first layer stays exact in float64 either way).
    """

    name: str
    smug: SmugParameters = PAPER_PARAMETERS
    class_names: tuple[str, ...] | None = None
    padding_token: int | None = None
    vocabulary: bool = False
    evaluation_methods: tuple[str, ...] = IMAGE_EVALUATION_METHODS
    pixel_mean: tuple[float, ...] | None = None
    preprocessing: str | None = None
    image_preprocessing: str = "unit"
    head_dtype: Literal["float64", "float32"] = "float64"

    def class_label(self, target: int) -> str:
        """``target`` with its class name where the model has one: ``1 (positive)``."""
        names = self.class_names
        return f"{target} ({names[target]})" if names and 0 <= target < len(names) else str(target)

    def top_classes(self, outputs: np.ndarray, k: int = 5, *, logits: bool = True) -> list[dict[str, Any]]:
        """The ``k`` most probable classes of one output vector, most probable first: class
        index, name (None without class names) and probability (a softmax of ``outputs``
        when they are ``logits``, else ``outputs`` as they are)."""
        scores = np.asarray(outputs, dtype=np.float64).reshape(-1)
        p = np.exp(scores - scores.max()) if logits else scores
        if logits:
            p = p / p.sum()
        names = self.class_names
        return [{"class": int(i), "name": names[i] if names and i < len(names) else None,
                 "probability": float(p[i])} for i in np.argsort(-p, kind="stable")[:k]]


GENERIC_IMAGE_MODEL = ModelDescription("model")
"""A model that declares nothing: the paper's parameters, numbered classes."""
