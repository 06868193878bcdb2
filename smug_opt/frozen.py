"""Read-only containers for immutable values: arrays, CSR matrices and mappings."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import scipy.sparse as sp

__all__ = ["FrozenMapping", "freeze", "read_only", "read_only_csr"]


def freeze(arr: np.ndarray) -> np.ndarray:
    """``arr`` itself, made read-only (for arrays nobody else holds)."""
    arr.setflags(write=False)
    return arr


def read_only(arr: Any) -> np.ndarray:
    """``arr`` itself when it already owns read-only data, else a read-only copy (so no
    caller's array or view can change it later)."""
    arr = np.asarray(arr)
    if arr.flags.writeable or not arr.flags.owndata:
        arr = arr.copy()
        arr.setflags(write=False)
    return arr


def read_only_csr(matrix: sp.csr_matrix) -> sp.csr_matrix:
    """``matrix`` in canonical form (sorted indices, no duplicates) over read-only ``data``,
    ``indices`` and ``indptr``: itself when it already is, else a copy."""
    parts = (matrix.data, matrix.indices, matrix.indptr)
    if all(not a.flags.writeable and a.flags.owndata for a in parts) and matrix.has_canonical_format:
        return matrix
    frozen = sp.csr_matrix(matrix, copy=True)
    frozen.sum_duplicates()  # sorts the indices too: nothing needs to write to them later
    for a in (frozen.data, frozen.indices, frozen.indptr):
        a.setflags(write=False)
    return frozen


class FrozenMapping(Mapping[str, Any]):
    """A read-only, picklable view of a copy of a mapping (a Problem's metadata)."""

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[str, Any] | None = None) -> None:
        self._items = dict(items or {})

    def __getitem__(self, key: str) -> Any:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"FrozenMapping({self._items!r})"

    def __getstate__(self) -> dict[str, Any]:
        return self._items

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._items = dict(state)
