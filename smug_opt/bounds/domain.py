"""Input domains of bound propagation: a box, or masks over cells of a fixed input.

A domain names the inputs that may be nonzero (``support``; the others are 0 throughout)
and turns a linear function ``Λ·x`` of the network's (affine) input into a rigorous
lower bound over the domain: :meth:`Box.minimum` and :meth:`Masks.minimum` return the float
value and a bound on its rounding error, which the caller subtracts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from smug_opt.bounds.rounding import slack
from smug_opt.exact import TINY

__all__ = ["Box", "Domain", "Masks"]


@dataclass(frozen=True, eq=False)
class Box:
    """Every input ``x`` with ``lo <= x <= hi`` (finite, flat)."""

    lo: np.ndarray
    hi: np.ndarray

    def __post_init__(self) -> None:
        lo = np.asarray(self.lo, dtype=np.float64).reshape(-1)
        hi = np.asarray(self.hi, dtype=np.float64).reshape(-1)
        if lo.shape != hi.shape:
            raise ValueError(f"Box: lo has {lo.size} values but hi has {hi.size}")
        if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))):
            raise ValueError("Box: lo and hi must be finite")
        if np.any(lo > hi):
            raise ValueError(f"Box: lo > hi at inputs {np.flatnonzero(lo > hi)[:10].tolist()}")
        object.__setattr__(self, "lo", lo)
        object.__setattr__(self, "hi", hi)

    @property
    def size(self) -> int:
        return self.lo.size

    def interval(self) -> tuple[np.ndarray, np.ndarray]:
        """Per-input bounds."""
        return self.lo, self.hi

    @property
    def support(self) -> np.ndarray:
        """The inputs that may be nonzero (all of them)."""
        return np.arange(self.size)

    def minimum(self, lam: np.ndarray | sp.csr_matrix) -> tuple[np.ndarray, np.ndarray]:
        """``min Λ·x`` over the box per row of ``lam`` (columns: :attr:`support`; dense or
        sparse), in float, and a bound on its rounding error."""
        if sp.issparse(lam):
            # scipy.sparse is untyped: issparse does not narrow lam to a sparse matrix
            value = lam.maximum(0) @ self.lo + lam.minimum(0) @ self.hi  # type: ignore[union-attr]
        else:
            value = np.maximum(lam, 0.0) @ self.lo + np.minimum(lam, 0.0) @ self.hi
        magnitude = abs(lam) @ np.maximum(np.abs(self.lo), np.abs(self.hi))
        return value, slack(self.size, magnitude)


@dataclass(frozen=True, eq=False)
class Masks:
    """Every input ``x_i = M[cell_of[i]]·values[i]`` for binary cell variables ``M`` (at
    most ``max_cells`` of them 1, if given): the stress case's masked inputs, 0 where
    masked. ``cell_of`` numbers the cells ``0 .. num_cells − 1``."""

    values: np.ndarray
    cell_of: np.ndarray
    max_cells: int | None = None
    num_cells: int = field(init=False)
    support: np.ndarray = field(init=False, repr=False)  # the inputs with a nonzero value
    _order: np.ndarray = field(init=False, repr=False)  # positions in the support, by cell
    _starts: np.ndarray = field(init=False, repr=False)  # where each present cell begins in _order
    _cell_map: sp.csr_matrix = field(init=False, repr=False)  # (support, present cells): 1 per input

    def __post_init__(self) -> None:
        values = np.asarray(self.values, dtype=np.float64).reshape(-1)
        cell_of = np.asarray(self.cell_of).reshape(-1)
        if cell_of.shape != values.shape:
            raise ValueError(f"Masks: cell_of has {cell_of.size} entries but values has {values.size}")
        if not np.all(np.isfinite(values)):
            raise ValueError("Masks: values must be finite")
        if cell_of.dtype.kind not in "iu" or (cell_of.size and cell_of.min() < 0):
            raise ValueError("Masks: cell_of must hold cell numbers >= 0")
        max_cells = self.max_cells
        if max_cells is not None and (isinstance(max_cells, bool) or max_cells < 0
                                      or not isinstance(max_cells, (int, np.integer))):
            raise ValueError(f"Masks: max_cells must be None or an int >= 0, got {max_cells!r}")
        num_cells = int(cell_of.max()) + 1 if cell_of.size else 0
        support = np.flatnonzero(values)
        order = np.argsort(cell_of[support], kind="stable")
        starts = np.flatnonzero(np.diff(cell_of[support][order], prepend=-1))
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "cell_of", cell_of.astype(np.int64))
        object.__setattr__(self, "max_cells", None if max_cells is None else int(max_cells))
        object.__setattr__(self, "num_cells", num_cells)
        object.__setattr__(self, "support", support)
        object.__setattr__(self, "_order", order)
        object.__setattr__(self, "_starts", starts)
        group = np.unique(cell_of[support], return_inverse=True)[1]
        object.__setattr__(self, "_cell_map", sp.csr_matrix(
            (np.ones(support.size), (np.arange(support.size), group)), shape=(support.size, starts.size)))

    @classmethod
    def from_matrix(cls, inputs: sp.spmatrix, max_cells: int | None = None) -> Masks:
        """The masks ``x = inputs @ M`` of an ``(inputs, cells)`` matrix with at most one
        nonzero per row (the input's value, in its cell's column)."""
        coo = sp.coo_matrix(inputs)
        if np.unique(coo.row).size != coo.row.size:
            raise ValueError("Masks.from_matrix: an input lies in more than one cell")
        values, cell_of = np.zeros(coo.shape[0]), np.zeros(coo.shape[0], dtype=np.int64)
        values[coo.row], cell_of[coo.row] = coo.data, coo.col
        return cls(values, cell_of, max_cells)

    @property
    def size(self) -> int:
        return self.values.size

    def interval(self) -> tuple[np.ndarray, np.ndarray]:
        """Per-input bounds: between 0 (masked) and the value."""
        return np.minimum(self.values, 0.0), np.maximum(self.values, 0.0)

    def minimum(self, lam: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``min Λ·x`` over the masks per row of ``lam`` (columns: :attr:`support`), exactly
        up to rounding: each cell contributes ``g_c = Σ_{i in c} Λ_i·values_i`` when kept, so
        the minimum keeps the cells with ``g_c < 0`` (the ``max_cells`` most negative ones);
        and a bound on the rounding error (of every ``g_c``, summed over all cells, plus the
        final sum's). ``lam`` dense or sparse."""
        if sp.issparse(lam):
            return self._sparse_minimum(sp.csr_matrix(lam))
        scaled = (lam * self.values[self.support])[:, self._order]
        singletons = self._starts.size == self.support.size
        cells = scaled if singletons else np.add.reduceat(scaled, self._starts, axis=1)
        terms = np.minimum(cells, 0.0)
        k = self.max_cells
        if k is not None:
            crowded = np.flatnonzero(np.count_nonzero(terms, axis=1) > k)  # more negative cells than k
            if crowded.size:
                kept = np.partition(terms[crowded], k, axis=1)[:, :k]
                terms[crowded] = 0.0
                terms[crowded, :k] = kept
        value = terms.sum(axis=1)
        return value, self._error(lam, np.abs(terms).sum(axis=1))

    def _sparse_minimum(self, lam: sp.csr_matrix) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`minimum` for sparse rows (e.g. a convolution's): the cells' terms stay
        sparse; only rows with more negative cells than ``max_cells`` are made dense."""
        terms = sp.csr_matrix(lam.multiply(self.values[self.support][None, :])) @ self._cell_map
        terms = sp.csr_matrix(terms.minimum(0))
        terms.eliminate_zeros()
        value = np.asarray(terms.sum(axis=1)).ravel()
        k = self.max_cells
        if k is not None:
            crowded = np.flatnonzero(np.diff(terms.indptr) > k)
            if crowded.size:
                dense = terms[crowded].toarray()
                value[crowded] = np.partition(dense, k, axis=1)[:, :k].sum(axis=1) if k > 0 else 0.0
        return value, self._error(lam, np.asarray(abs(terms).sum(axis=1)).ravel())

    def _error(self, lam: np.ndarray | sp.csr_matrix, terms_magnitude: np.ndarray) -> np.ndarray:
        """The rounding error of :meth:`minimum`: of every cell's sum ``g_c``, summed over
        the cells, plus the final sum's (``terms_magnitude``: its terms' absolute sum, or more)."""
        per_cell = int(np.bincount(self.cell_of).max(initial=0))
        cell_error = (slack(per_cell, abs(lam) @ np.abs(self.values[self.support]))
                      + (self.size + self.num_cells) * TINY)
        return cell_error + slack(self._starts.size, terms_magnitude)


Domain = Box | Masks
"""What :func:`smug_opt.bounds.propagate` bounds over."""
