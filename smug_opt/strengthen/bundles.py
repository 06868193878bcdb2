"""Small independent parts packed into one problem, so that each is not solved alone.

A 3x3 stem strengthens into 340 parts of at most 48 cells, MobileNetV2's into 258: each
solve (a race of two worker processes, the loser restarted) costs ~0.2 s however small the
part, so at load 12-15 the 340 parts did not all get solved within 60 s (NO_SOLUTION).
Independent parts side by side are one block-diagonal problem with the same optimum (the
sum of theirs) and the same feasible set; packed, they cost one solve.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp

from smug_opt.ir import Problem
from smug_opt.strengthen.outcome import Part

__all__ = ["BUNDLE_WEIGHT", "bundled", "weight"]

BUNDLE_WEIGHT = 5000
"""Parts lighter than this (:func:`weight`) and without strict rows are packed, smallest
first, into bundles that stay at most this heavy; the others are solved alone."""


def weight(part: Part) -> int:
    """A part's size as the time split counts it: non-zeros plus variables."""
    return int(part.problem.A.nnz + part.problem.num_vars)


def bundled(parts: Sequence[Part]) -> list[Part]:
    """``parts`` with the light ones packed into bundles (:data:`BUNDLE_WEIGHT`), lightest
    first; a bundle of one part is that part."""
    # a part with strict rows left (pieces switched off, or a row no integer row matches) is
    # solved alone: a float solver's tightening levels and certification concern it only
    alone = [weight(p) >= BUNDLE_WEIGHT or p.problem.has_strict for p in parts]
    light = sorted((p for p, a in zip(parts, alone, strict=True) if not a), key=weight)
    heavy = [p for p, a in zip(parts, alone, strict=True) if a]
    groups: list[list[Part]] = []
    load = BUNDLE_WEIGHT
    for part in light:
        if load + weight(part) > BUNDLE_WEIGHT:
            groups.append([])
            load = 0
        groups[-1].append(part)
        load += weight(part)
    packed = [group[0] if len(group) == 1 else _pack(group) for group in groups]
    return sorted(packed + heavy, key=lambda p: p.problem.A.nnz)


def _pack(parts: list[Part]) -> Part:
    """One part holding ``parts`` side by side: every part's columns first, then every
    part's carried cells (a :class:`Part`'s layout), rows block-diagonal."""
    sizes = np.array([p.columns.size for p in parts])
    carried = np.array([p.carried.size for p in parts])
    column_at = np.concatenate([[0], np.cumsum(sizes)])
    carried_at = int(sizes.sum()) + np.concatenate([[0], np.cumsum(carried)])
    n = int(sizes.sum() + carried.sum())
    blocks, positions = [], []
    for k, part in enumerate(parts):
        local = np.arange(part.problem.num_vars)
        positions.append(np.where(local < sizes[k], column_at[k] + local,
                                  carried_at[k] + local - sizes[k]))
        blocks.append(part.problem.A.tocoo())
    rows = np.concatenate([b.row + offset for b, offset in
                           zip(blocks, np.cumsum([0] + [b.shape[0] for b in blocks[:-1]]), strict=True)])
    cols = np.concatenate([pos[b.col] for b, pos in zip(blocks, positions, strict=True)])
    A = sp.csr_matrix((np.concatenate([b.data for b in blocks]), (rows, cols)),
                      shape=(sum(b.shape[0] for b in blocks), n))

    def spread(name: str) -> np.ndarray:
        out = np.zeros(n, dtype=getattr(parts[0].problem, name).dtype)
        for part, pos in zip(parts, positions, strict=True):
            out[pos] = getattr(part.problem, name)
        return out

    def stacked(name: str) -> np.ndarray:
        return np.concatenate([getattr(p.problem, name) for p in parts])

    problem = Problem(kinds=spread("kinds"), lb=spread("lb"), ub=spread("ub"), A=A,
                      senses=stacked("senses"), rhs=stacked("rhs"), objective=spread("objective"),
                      metadata=parts[0].problem.metadata)
    return Part(problem, np.concatenate([p.columns for p in parts]),
                np.concatenate([p.carried for p in parts]))
