"""The derivation of single-row groups, batched: numpy over every group of one size at once.

Most tabulated supports hold one row (paper-scale k1000-s0: 942 of 971 groups), and
deriving each alone cost ~10 small numpy calls a group (~45 % of strengthening). Here the
same cuts, clauses and implications come from ``(groups, patterns)`` arrays, group by
group identical to :meth:`smug_opt.strengthen.presolve._Work._derive_group` with the
``cuts`` and ``implied`` pieces on: the row's lifted cardinality cut, the cardinality cut
over every free cell, then (when they describe the table up to :data:`MAX_CLAUSES`
patterns) the no-good clauses of the patterns they let through, else the row is kept.
Every sum is of small integers (exact in float64 and int64).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from smug_opt.strengthen.rows import NormalRows, pattern_bits

__all__ = ["MAX_CLAUSES", "Derived", "derive_single_rows", "single_row_groups"]

MAX_CLAUSES = 16
"""At most this many no-good clauses complete the exact description of one support."""

_ELEMENTS = 1 << 20
"""Groups are taken in chunks of at most this many (group, pattern) entries."""

Cut = tuple[np.ndarray, int]  # (integer coefficients over the group's cells, bound)


@dataclass(frozen=True)
class Derived:
    """What one single-row group gives: its ``cuts``, then (``described``) the ``clauses``
    that complete their description of its table (the row then leaves), else nothing more
    (the row is kept)."""

    cuts: list[Cut]
    described: bool
    clauses: list[Cut]


class _Tabulated(Protocol):
    cells: np.ndarray
    rows: list[int]
    table: np.ndarray


def single_row_groups(groups: Sequence[_Tabulated], rows: NormalRows, fixed: np.ndarray
                      ) -> dict[int, Derived | None]:
    """:func:`derive_single_rows` of each of ``groups`` (by position) that holds one row,
    those of one size at once."""
    single = [g for g, group in enumerate(groups) if len(group.rows) == 1]
    out: dict[int, Derived | None] = {}
    for size in sorted({groups[g].cells.size for g in single}):
        same = [g for g in single if groups[g].cells.size == size]
        cells = np.array([groups[g].cells for g in same], dtype=np.int64)
        tables = np.array([groups[g].table for g in same], dtype=bool)
        signs = np.array([rows.row(groups[g].rows[0])[1] for g in same], dtype=np.float64)
        out.update(zip(same, derive_single_rows(cells, tables, signs, fixed), strict=True))
    return out


def derive_single_rows(cells: np.ndarray, tables: np.ndarray, signs: np.ndarray,
                       fixed: np.ndarray) -> list[Derived | None]:
    """For groups of one row over ``cells`` (``(groups, size)``; the row's coefficients
    ``signs``, its exact table ``tables`` ``(groups, 2**size)``), given the cells'
    ``fixed`` values (-1 free): a :class:`Derived` each, None for a group with no free cell."""
    size = cells.shape[1]
    chunk = max(1, _ELEMENTS // (1 << size))
    out: list[Derived | None] = []
    for at in range(0, cells.shape[0], chunk):
        out += _chunk(cells[at:at + chunk], tables[at:at + chunk], signs[at:at + chunk], fixed)
    return out


def _chunk(cells: np.ndarray, tables: np.ndarray, signs: np.ndarray, fixed: np.ndarray
           ) -> list[Derived | None]:
    groups, size = cells.shape
    bits = pattern_bits(size).astype(np.int64)  # (patterns, size)
    state = fixed[cells]
    free = state == -1
    weight = 1 << np.arange(size)
    mask = ((state != -1) * weight).sum(axis=1)
    on = ((state == 1) * weight).sum(axis=1)
    consistent = (np.arange(1 << size)[None, :] & mask[:, None]) == on[:, None]
    allowed = tables & consistent
    row_cut = _lifted(bits, allowed, free & (signs > 0), free & (signs <= 0), signs)
    whole = _lifted(bits, allowed, free, np.zeros_like(free), signs)
    described = consistent.copy()
    for coef, bound, valid in (row_cut, whole):
        described &= ~valid[:, None] | ((coef @ bits.T) >= bound[:, None])
    extra = described & ~allowed
    counts = extra.sum(axis=1)
    out: list[Derived | None] = []
    for g in range(groups):
        if not free[g].any():
            out.append(None)
            continue
        cuts = [(coef[g], int(bound[g])) for coef, bound, valid in (row_cut, whole) if valid[g]]
        if len(cuts) == 2 and cuts[0][1] == cuts[1][1] and np.array_equal(cuts[0][0], cuts[1][0]):
            cuts = cuts[:1]
        if counts[g] > MAX_CLAUSES:
            out.append(Derived(cuts, False, []))
            continue
        patterns = bits[extra[g]]  # (clauses, size), in pattern order
        coefs = np.where(free[g], np.where(patterns == 1, -1, 1), 0).astype(np.int64)
        bounds = 1 - (patterns * free[g]).sum(axis=1)
        out.append(Derived(cuts, True, [(c, int(b)) for c, b in zip(coefs, bounds.tolist(), strict=True)]))
    return out


def _lifted(bits: np.ndarray, allowed: np.ndarray, base: np.ndarray, lift: np.ndarray,
            signs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`~smug_opt.strengthen.cuts.lifted_cardinality` of every group at once: the
    cut ``Σ_base p >= m`` lifted over ``lift``'s positions in increasing ``signs`` (stable).
    ``(coefs, bounds, valid)``: a group's cut exists where ``valid``."""
    groups, size = base.shape
    big = np.int64(size * (size + 1) + 1)  # above every lhs (coefficients at most size in magnitude)
    lhs = base.astype(np.int64) @ bits.T  # (groups, patterns)
    bound = np.where(allowed, lhs, big).min(axis=1)
    valid = allowed.any(axis=1) & base.any(axis=1) & (bound >= 1)
    coef = base.astype(np.int64)
    order = np.argsort(np.where(lift, signs, np.inf), axis=1, kind="stable")
    steps = lift.sum(axis=1)
    rows = np.arange(groups)
    for t in range(int(steps.max(initial=0))):
        k = order[:, t]
        bit = bits[:, k].T  # (groups, patterns): bit k of each pattern, per group
        on = allowed & (bit == 1) & (t < steps)[:, None]
        has = on.any(axis=1)
        alpha = np.where(has, bound - np.where(on, lhs, big).min(axis=1), 0)
        coef[rows[has], k[has]] = alpha[has]
        lhs += alpha[:, None] * bit
    return coef, bound, valid
