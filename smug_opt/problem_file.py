"""The ``.smug`` file format: a versioned, lossless container for a :class:`Problem`.

A ``.smug`` file is a zip archive written by :func:`numpy.savez_compressed`: one
``.npy`` member per array (float64 bit-for-bit, no pickles) and ``header`` holding a JSON
document ``{"format": "smug-opt-problem", "version": 1, "metadata": {...}}``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from smug_opt.bounded import read_npz
from smug_opt.ir import Problem

__all__ = ["FORMAT_NAME", "FORMAT_VERSION", "load_problem", "save_problem"]

FORMAT_NAME = "smug-opt-problem"
FORMAT_VERSION = 1

_VECTORS = ("kinds", "lb", "ub", "senses", "rhs", "objective",
            "relu_out", "relu_const", "relu_lo", "relu_hi")


def _csr_arrays(prefix: str, m: sp.csr_matrix) -> dict[str, np.ndarray]:
    return {
        f"{prefix}_data": m.data, f"{prefix}_indices": m.indices.astype(np.int64),
        f"{prefix}_indptr": m.indptr.astype(np.int64), f"{prefix}_shape": np.array(m.shape),
    }


def _csr_from(arrays: Any, prefix: str) -> sp.csr_matrix:
    shape = tuple(int(v) for v in arrays[f"{prefix}_shape"])
    return sp.csr_matrix(
        (arrays[f"{prefix}_data"], arrays[f"{prefix}_indices"], arrays[f"{prefix}_indptr"]),
        shape=shape,
    )


def save_problem(problem: Problem, path: str | os.PathLike[str]) -> None:
    """Write ``problem`` to ``path`` (conventionally ending in ``.smug``)."""
    try:
        header = json.dumps(
            {"format": FORMAT_NAME, "version": FORMAT_VERSION, "metadata": dict(problem.metadata)}
        )
    except TypeError as exc:
        raise ValueError(f"problem metadata must be JSON-serialisable: {exc}") from None
    arrays = {name: np.asarray(getattr(problem, name)) for name in _VECTORS}
    arrays |= _csr_arrays("A", problem.A)
    arrays |= _csr_arrays("relu_in", problem.relu_in)
    arrays["header"] = np.frombuffer(header.encode(), dtype=np.uint8)
    target = Path(path)
    tmp = target.with_name(target.name + ".tmp")
    with open(tmp, "wb") as fh:
        # numpy's stub takes **arrays as possibly holding allow_pickle (a bool)
        np.savez_compressed(fh, **arrays)  # type: ignore[arg-type]
    os.replace(tmp, target)


def load_problem(path: str | os.PathLike[str]) -> Problem:
    """Read a problem written by :func:`save_problem`, checking format and version, and
    every member's declared size before decompressing it (:mod:`smug_opt.bounded`)."""
    target = Path(path)
    if not target.is_file():
        raise FileNotFoundError(f"no problem file at {target}")
    not_ours = (f"{target} is not a smug-opt problem file (those are written by save_problem "
                "or `smug-opt bench`: a numpy .npz archive with a header)")
    try:
        arrays = read_npz(target)
    except ValueError as exc:
        if "not a zip archive" in str(exc):
            raise ValueError(not_ours) from None
        raise
    if "header" not in arrays:
        raise ValueError(f"{target} is not a smug-opt problem file (no header)")
    try:
        header = json.loads(arrays["header"].tobytes().decode())
    except (UnicodeDecodeError, ValueError):
        raise ValueError(f"{target}: its header is not JSON text") from None
    if not isinstance(header, dict) or header.get("format") != FORMAT_NAME:
        raise ValueError(not_ours)
    if header.get("version") != FORMAT_VERSION:
        raise ValueError(
            f"{target}: format version {header.get('version')} is not supported "
            f"(this smug-opt reads version {FORMAT_VERSION})"
        )
    metadata = header.get("metadata", {})
    if not isinstance(metadata, dict):
        raise ValueError(f"{target}: its metadata must be a JSON object, got {type(metadata).__name__}")
    missing = [name for name in (*_VECTORS, *(f"{m}_{part}" for m in ("A", "relu_in")
                                              for part in ("data", "indices", "indptr", "shape")))
               if name not in arrays]
    if missing:
        raise ValueError(f"{target}: members missing: {', '.join(missing)}")
    try:
        fields = {name: arrays[name] for name in _VECTORS}
        fields["kinds"] = fields["kinds"].astype(np.int8)
        fields["senses"] = fields["senses"].astype(np.int8)
        fields["relu_out"] = fields["relu_out"].astype(np.int64)
        for value in fields.values():
            value.setflags(write=False)
        return Problem(A=_csr_from(arrays, "A"), relu_in=_csr_from(arrays, "relu_in"),
                       metadata=metadata, **fields)
    except (ValueError, TypeError, IndexError, OverflowError) as exc:
        raise ValueError(f"{target}: not a valid problem ({exc})") from None
