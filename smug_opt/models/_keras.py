"""Lazy, quiet import of Keras on its TensorFlow backend."""

from __future__ import annotations

import os
from types import ModuleType

__all__ = ["import_keras"]


def import_keras() -> ModuleType:
    """Import and return ``keras`` (TensorFlow backend), with TensorFlow's C++ logs quieted."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    from smug_opt.console import silenced_stderr

    try:
        with silenced_stderr():  # TensorFlow's absl/oneDNN lines bypass TF_CPP_MIN_LOG_LEVEL
            import keras
    except ImportError as error:
        raise ImportError(
            "Keras models need TensorFlow and Keras 3: pip install 'smug-opt[keras]'"
        ) from error
    if keras.backend.backend() != "tensorflow":
        raise RuntimeError(
            "smug-opt's Keras adapter needs the TensorFlow backend, but Keras runs on "
            f"{keras.backend.backend()!r}; set KERAS_BACKEND=tensorflow before importing keras"
        )
    return keras
