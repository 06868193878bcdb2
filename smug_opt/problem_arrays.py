"""A problem's vocabulary and arrays: variable kinds, row senses, and the parsing and
checks that turn what a caller gives (symbols, dense or sparse matrices, scalars) into the
float64 arrays a :class:`~smug_opt.ir.Problem` holds, with the assembly of row blocks."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import scipy.sparse as sp

__all__ = ["Sense", "Triplets", "VarKind", "as_csr", "checked_vector", "parse_senses", "stack_blocks",
           "stack_rows"]


@enum.unique
class VarKind(enum.IntEnum):
    """The domain of a variable."""

    BINARY = 0
    CONTINUOUS = 1


@enum.unique
class Sense(enum.IntEnum):
    """The relation of a linear row ``a·x SENSE rhs``."""

    LE = 0
    GE = 1
    EQ = 2
    LT = 3
    GT = 4

    @property
    def symbol(self) -> str:
        return _SENSE_SYMBOLS[self]

    @property
    def strict(self) -> bool:
        return self in (Sense.LT, Sense.GT)

    @classmethod
    def parse(cls, value: str | Sense) -> Sense:
        """Read ``"<="``, ``">="``, ``"=="`` (or ``"="``), ``"<"``, ``">"`` or a Sense."""
        if isinstance(value, Sense):
            return value
        try:
            return _SYMBOL_SENSES[str(value).strip()]
        except KeyError:
            raise ValueError(
                f"unknown constraint sense {value!r}; expected one of "
                f"{', '.join(repr(s) for s in _SENSE_SYMBOLS.values())}"
            ) from None


_SENSE_SYMBOLS = {Sense.LE: "<=", Sense.GE: ">=", Sense.EQ: "==", Sense.LT: "<", Sense.GT: ">"}
_SYMBOL_SENSES = {v: k for k, v in _SENSE_SYMBOLS.items()} | {"=": Sense.EQ, "=<": Sense.LE}


def parse_senses(senses: Sequence[str | Sense] | str | Sense, m: int) -> np.ndarray:
    """One int8 Sense code per row from a symbol (for every row) or one symbol per row."""
    if isinstance(senses, (str, Sense)):
        return np.full(m, Sense.parse(senses), dtype=np.int8)
    codes = np.fromiter((Sense.parse(s) for s in senses), dtype=np.int8)
    if codes.shape[0] != m:
        raise ValueError(f"got {codes.shape[0]} senses for {m} constraint rows")
    return codes


def as_csr(matrix: Any, name: str, n_cols: int | None = None) -> sp.csr_matrix:
    """A float64 CSR copy of a dense or sparse 2-D matrix, with finite entries only."""
    if sp.issparse(matrix):
        csr = sp.csr_matrix(matrix, dtype=np.float64, copy=True)
    else:
        dense = np.asarray(matrix, dtype=np.float64)
        if dense.ndim == 1 and n_cols is not None and dense.size == n_cols:
            dense = dense.reshape(1, -1)
        if dense.ndim != 2:
            raise ValueError(f"{name} must be 2-D (rows = constraints), got shape {dense.shape}")
        csr = sp.csr_matrix(dense)
    csr.sum_duplicates()
    csr.eliminate_zeros()
    if not np.all(np.isfinite(csr.data)):
        bad = int(np.count_nonzero(~np.isfinite(csr.data)))
        raise ValueError(f"{name} has {bad} non-finite (NaN or inf) coefficient(s)")
    if n_cols is not None and csr.shape[1] != n_cols:
        raise ValueError(f"{name} has {csr.shape[1]} columns but the problem has {n_cols} variables")
    csr.sort_indices()
    return csr


def checked_vector(values: Any, size: int, name: str, *, allow_inf: bool = False) -> np.ndarray:
    """A read-only float64 vector of ``size`` entries (a scalar fills it), without NaN (or inf)."""
    arr = np.array(values, dtype=np.float64).reshape(-1)
    if arr.size == 1 and size != 1:
        arr = np.full(size, arr[0])
    if arr.shape != (size,):
        raise ValueError(f"{name} has {arr.size} entries, expected {size}")
    if np.any(np.isnan(arr)) or (not allow_inf and not np.all(np.isfinite(arr))):
        raise ValueError(f"{name} contains NaN{'' if allow_inf else ' or inf'}")
    arr.setflags(write=False)
    return arr


class Triplets(NamedTuple):
    """A block of rows as COO triplets over the problem's global variable indices."""

    rows: np.ndarray
    cols: np.ndarray
    data: np.ndarray
    nrows: int


def stack_blocks(blocks: list[Triplets], n: int) -> sp.csr_matrix:
    """The blocks stacked into one canonical CSR matrix with ``n`` columns."""
    rows, cols, data, offset = [], [], [], 0
    for block in blocks:
        rows.append(block.rows + offset)
        cols.append(block.cols)
        data.append(block.data)
        offset += block.nrows
    if offset == 0:
        return sp.csr_matrix((0, n))
    csr = sp.csr_matrix(
        (np.concatenate(data), (np.concatenate(rows), np.concatenate(cols))), shape=(offset, n)
    )
    csr.sum_duplicates()
    csr.eliminate_zeros()
    csr.sort_indices()
    return csr


def stack_rows(
    blocks: list[Triplets], senses: list[np.ndarray], rhs: list[np.ndarray], n: int
) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray]:
    """The blocks' matrix, senses and right-hand sides, stacked."""
    A = stack_blocks(blocks, n)
    if not blocks:
        return A, np.zeros(0, dtype=np.int8), np.zeros(0)
    return A, np.concatenate(senses), np.concatenate(rhs)
