"""Which description applies to a model, and the SMUG parameters it implies.

Every entry point (``explain``, batch runs, ``evaluate``, the CLIs) asks :func:`describe`
instead of deciding by a model's name, so one model gets one set of defaults everywhere.
"""

from __future__ import annotations

from typing import Any

from smug_opt.models import zoo
from smug_opt.models.description import GENERIC_IMAGE_MODEL, ModelDescription
from smug_opt.parameters import SmugParameters

__all__ = ["describe", "smug_parameters"]


def describe(model: Any) -> ModelDescription:
    """The description of ``model``: an embedded model's name, a model the zoo loaded, or
    anything else (a file path, a Keras model, an adapter: :data:`GENERIC_IMAGE_MODEL`)."""
    name = zoo.embedded_name(model)
    if name is not None:
        return zoo.description(name)
    return GENERIC_IMAGE_MODEL


def smug_parameters(model: Any, params: SmugParameters | None = None, **changes: Any) -> SmugParameters:
    """``params`` (default: ``model``'s own) with the ``changes`` that are not None: the one
    rule by which every entry point fills in the SMUG parameters."""
    return (describe(model).smug if params is None else params).updated(**changes)
