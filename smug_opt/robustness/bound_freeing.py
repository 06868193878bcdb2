"""Free many values per bound computation: the linear lower bounds that back-substitution
builds over a box say how much each input costs the bound, so one computation over the
box that frees every candidate shows which candidates to keep fixed for the bound to hold
(those costing most), and a second, over the smaller box, proves the rest free (as FAME's
abstract batch freeing does). The choice is a heuristic; only the second computation,
rigorous as every bound here, frees anything.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np
import scipy.sparse as sp

from smug_opt.bounds.domain import Box
from smug_opt.robustness.query import RobustnessQuery

__all__ = ["bound_round", "by_bound_cost"]

@dataclass(frozen=True, eq=False)
class _WatchedBox(Box):
    """A box that keeps the last linear functions minimised over it (their input coefficients)."""

    seen: list[np.ndarray] = field(default_factory=list, repr=False)

    def minimum(self, lam: np.ndarray | sp.csr_matrix) -> tuple[np.ndarray, np.ndarray]:
        self.seen[:] = [np.array(lam) if isinstance(lam, np.ndarray) else lam.toarray()]
        return super().minimum(lam)


def _bound_and_costs(query: RobustnessQuery, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per disjunct row, its rigorous lower bound (row·y − rhs) over the query's box, and per
    model input the amount by which fixing it at ``x`` would raise the linear bound
    behind it (rows × inputs)."""
    box = query.affine_box
    watched = _WatchedBox(box.lo, box.hi)
    bounds = replace(query.bounds, domain=watched)  # the query's intervals; the last functions watched
    rows = np.vstack([d.matrix for d in query.disjuncts])
    low, _ = bounds.linear(rows, -np.concatenate([d.rhs for d in query.disjuncts]))
    coeff = watched.seen[0][: rows.shape[0]]  # linear() minimises the rows, then their negations
    a = query.preprocess.backward(coeff, x.size)
    costs = np.where(a > 0, a * (x - query.lo), -a * (query.hi - x))
    return low, costs


def _open_costs(query: RobustnessQuery, x: np.ndarray, pool: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Over the box freeing ``pool``: per disjunct its best row's bound, and per disjunct the
    bounds leave open, that row's deficit and the pool's costs to it (open disjuncts × pool)."""
    low, costs = _bound_and_costs(query, x)
    ends = np.cumsum([d.matrix.shape[0] for d in query.disjuncts])[:-1]
    parts = np.split(low, ends)
    best = np.array([part.max() for part in parts])
    starts = np.concatenate([[0], ends]).astype(int)
    pick = np.array([int(np.argmax(part)) + begin for part, begin in zip(parts, starts, strict=True)])
    short = best <= 0
    deficit = -best[short] * 1.05 + 1e-9 * (1.0 + np.abs(best[short]))
    return best, deficit, costs[pick[short]][:, pool]


def by_bound_cost(query_for: Callable[[np.ndarray], RobustnessQuery], x: np.ndarray, pool: np.ndarray
                  ) -> np.ndarray:
    """``pool`` from the value costing the bound least to the one costing it most, by the
    linear bounds over the box freeing the whole pool (each value's cost to every disjunct
    the bounds leave open, as a share of that disjunct's deficit, summed): an order only."""
    pool = np.asarray(pool, dtype=int)
    _, deficit, gains = _open_costs(query_for(pool), x, pool)
    return pool[np.argsort((gains / deficit[:, None]).sum(axis=0), kind="stable")]


def bound_round(query_for: Callable[[np.ndarray], RobustnessQuery], x: np.ndarray, pool: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, int]:
    """One round over ``pool`` (values still fixed, model input indices): the values proven
    free, the values to keep fixed for now, and the bound computations made.
    ``query_for(values)``: the query with ``values`` freed on top of the free set so far.

    The bound over the box freeing the whole pool either proves it free, or its linear
    functions rank the pool by cost: the costliest values that cover every open
    disjunct's deficit are kept, and the rest is freed if a bound over that smaller box
    proves it (failing that, the cheaper half of the rest)."""
    pool = np.asarray(pool, dtype=int)
    best, deficit, gains = _open_costs(query_for(pool), x, pool)
    if np.all(best > 0):
        return pool, pool[:0], 1
    order = np.argsort(-(gains / deficit[:, None]).sum(axis=0), kind="stable")
    covered = np.flatnonzero((np.cumsum(gains[:, order], axis=1) >= deficit[:, None]).all(axis=0))
    if not covered.size or covered[0] + 1 >= pool.size:
        return pool[:0], pool, 1
    rest = order[covered[0] + 1:]  # cheapest last
    computations = 1
    for trial in (rest, rest[rest.size // 2:]):
        if not trial.size:
            break
        computations += 1
        if query_for(pool[trial]).refuted().all():
            freed = pool[trial]
            return freed, pool[~np.isin(pool, freed)], computations
    return pool[:0], pool, computations
