"""What the explain commands say while they run, and the embedded models' own inputs."""

from __future__ import annotations

import argparse
import re
import sys
import warnings
from typing import Any

import numpy as np

from smug_opt.models.catalog import describe

__all__ = ["embedded_example", "say"]


def say(args: argparse.Namespace, message: str) -> None:
    """One progress line on stderr, unless ``--quiet``."""
    if not args.quiet:
        print(f"smug-opt: {message}", file=sys.stderr, flush=True)


def embedded_example(name: str, index: int, tokens: str | None) -> tuple[np.ndarray, dict[str, Any]]:
    """Input ``index`` of an embedded model's held-out data (or ``tokens`` for a text model),
    with what the record says about it."""
    if describe(name).vocabulary:
        from smug_opt.data.text import UNK_ID, default_vocabulary, load_reviews

        vocab = default_vocabulary()
        if tokens is not None:
            ids = vocab.encode(tokens)
            unknown = [w for w in re.findall(r"[\w']+", tokens.lower()) if vocab.id(w) == UNK_ID]
            if unknown:
                warnings.warn(f"{len(unknown)} word(s) not in the vocabulary become <unk>: "
                              f"{', '.join(dict.fromkeys(unknown))} (see --list-vocab)", stacklevel=2)
            return ids, {"text": tokens, "unknown_words": unknown}
        reviews = load_reviews()
        if not 0 <= index < len(reviews.x_test):
            raise ValueError(f"--index must be in [0, {len(reviews.x_test)}), got {index}")
        rationale = np.flatnonzero(reviews.rationale_test[index])
        return reviews.x_test[index], {"review_index": index, "label": int(reviews.y_test[index]),
                                       "rationale_positions": rationale.tolist()}
    from smug_opt.data.mnist import load_digits

    digits = load_digits()
    if not 0 <= index < len(digits.x_test):
        raise ValueError(f"--index must be in [0, {len(digits.x_test)}), got {index}")
    return digits.x_test[index], {"digit_index": index, "label": int(digits.y_test[index])}
