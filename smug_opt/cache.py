"""Where smug-opt caches what it builds (zoo models, benchmark suites)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_dir"]


def cache_dir() -> Path:
    """``$SMUG_OPT_CACHE``, else ``$XDG_CACHE_HOME/smug-opt``, else ``~/.cache/smug-opt``
    (the directory may not exist yet)."""
    if os.environ.get("SMUG_OPT_CACHE"):
        return Path(os.environ["SMUG_OPT_CACHE"])
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]) / "smug-opt"
    return Path.home() / ".cache" / "smug-opt"
