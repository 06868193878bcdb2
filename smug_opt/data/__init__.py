"""Embedded data sets: real MNIST digits and synthetic reviews with planted rationales."""

from smug_opt.data.mnist import Digits, load_digits, pick_test_digits
from smug_opt.data.text import (
    EncodedTexts,
    Reviews,
    Vocabulary,
    default_vocabulary,
    load_reviews,
    load_text_csv,
)

__all__ = [
    "Digits",
    "EncodedTexts",
    "Reviews",
    "Vocabulary",
    "default_vocabulary",
    "load_digits",
    "load_reviews",
    "load_text_csv",
    "pick_test_digits",
]
