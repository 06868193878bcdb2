"""The 1,000 ImageNet-1k (ILSVRC 2012) class names, by class index: WordNet synonyms, the
first of each being the name shown (``imagenet_classes()[285] == "Egyptian cat"``).

The names live in ``imagenet_classes.txt`` beside this module (one class a line, its
synonyms comma separated), package data from the ``imagenet-classes`` package (MIT licence,
Illia Volkov and Nikita Kisel, ``imagenet1k_label_to_names.json``), shipped so that naming a
class needs no download.
"""

from __future__ import annotations

import functools
from importlib import resources

__all__ = ["imagenet_classes", "imagenet_synonyms"]


@functools.cache
def imagenet_synonyms() -> tuple[str, ...]:
    """Every class's synonyms, comma separated, as WordNet lists them."""
    text = resources.files(__package__).joinpath("imagenet_classes.txt").read_text(encoding="utf-8")
    names = tuple(text.splitlines())
    if len(names) != 1000:
        raise RuntimeError(f"imagenet_classes.txt holds {len(names)} classes, not 1000: a damaged install")
    return names


@functools.cache
def imagenet_classes() -> tuple[str, ...]:
    """The name shown for each class (its first synonym)."""
    return tuple(names.split(",")[0].strip() for names in imagenet_synonyms())
