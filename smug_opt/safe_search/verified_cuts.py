"""HiGHS's root cuts, each kept only when one row over binaries proves it rigorously.

HiGHS's MIP root separates cuts (lifted knapsack covers, c-MIR, ...) that lift the LP
bound well past the cover cuts of :mod:`~smug_opt.safe_search.covers`; its cut pool is read
by callback (:func:`highs_root_pool`). HiGHS's word is never taken: a cut ``π·x >= π₀``
enters the search's LP only with the right-hand side :func:`row_minimum` proves, a rigorous
lower bound on ``min π·x`` over the binary points satisfying a single row of the problem,
or, for a cut over a few columns that no single row proves, when probing its support
against all the rows proves it (:mod:`~smug_opt.safe_search.probed_cuts`).

**Rounds** (:func:`proven_root_cuts`): HiGHS's root again on the problem with the cuts
proven so far as rows separates more cuts on top of them (the headline instance's part:
98 proven cuts and a root bound of 43.56 after one round, 179 and 43.69 after five).

:func:`row_minimum` enumerates the row's columns in the cut's support (meet in the middle:
two halves of at most :data:`MAX_SHARED` / 2 each), sets the row's other columns to their
best value for the row and the cut's other columns to their best value for ``π``; every
float64 sum is taken with a bound on its rounding error, the row's test relaxed by it
(so no feasible point is lost) and the minimum lowered by it.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from typing import Any, NamedTuple

import numpy as np
import scipy.sparse as sp

from smug_opt.console import silenced_stdout
from smug_opt.exact import dot_error_bound
from smug_opt.ir import Problem
from smug_opt.safe_search.covers import Cut, KnapsackRow, knapsack_rows
from smug_opt.safe_search.probed_cuts import probed_cuts
from smug_opt.safe_search.propagation import RowPropagator
from smug_opt.safe_search.relaxation import problem_lp
from smug_opt.strengthen.rows import pattern_bits

__all__ = ["MAX_SHARED", "Round", "fingerprint", "highs_root_pool", "proven_root_cuts", "remember",
           "remembered", "root_cut_rounds", "row_minimum", "verified_cuts"]

MAX_SHARED = 24
"""A cut is checked against a row only where they share at most this many columns (the
enumeration is 2 × 2^(shared/2) points)."""


def row_minimum(row: KnapsackRow, cols: np.ndarray, coefs: np.ndarray) -> float | None:
    """A rigorous lower bound on ``min Σ coefs·x[cols]`` over binary ``x`` satisfying ``row``
    (``+inf`` when no binary point satisfies it), or None when they share more than
    :data:`MAX_SHARED` columns. ``cols`` distinct."""
    shared, in_row, in_cut = np.intersect1d(row.cols, cols, assume_unique=True, return_indices=True)
    if shared.size > MAX_SHARED:
        return None
    a, c = row.a[in_row], coefs[in_cut]
    row_rest = np.delete(row.a, in_row)
    cut_rest = np.delete(coefs, in_cut)
    fixed_activity = float(np.maximum(row_rest, 0.0).sum())  # the row's other columns: their best
    fixed_cost = float(np.minimum(cut_rest, 0.0).sum())  # the cut's other columns: their best
    terms = row.a.size + 3
    slack_a = 2.0 * dot_error_bound(terms, float(np.abs(row.a).sum()) + abs(row.b))
    slack_c = 2.0 * dot_error_bound(coefs.size + 3, float(np.abs(coefs).sum()))
    half = shared.size // 2
    left, right = pattern_bits(half), pattern_bits(shared.size - half)
    act_l, act_r = left @ a[:half], right @ a[half:]
    cost_l, cost_r = left @ c[:half], right @ c[half:]
    order = np.argsort(act_r, kind="stable")
    act_r, cost_r = act_r[order], cost_r[order]
    cheapest_from = np.minimum.accumulate(cost_r[::-1])[::-1]  # the least cost among right halves from i on
    need = row.b - fixed_activity - act_l - slack_a  # a right half reaching this may complete a point
    first = np.searchsorted(act_r, need, side="left")
    reachable = first < act_r.size
    if not reachable.any():
        return float("inf")
    best = float((cost_l[reachable] + cheapest_from[first[reachable]]).min())
    return float(best + fixed_cost - slack_c)


def verified_cuts(candidates: list[Cut], rows: list[KnapsackRow], tolerance: float = 1e-9) -> list[Cut]:
    """The ``candidates`` some single row proves (to within ``tolerance``, relative), each
    with the right-hand side :func:`row_minimum` proves for it."""
    by_column: dict[int, list[int]] = {}
    for i, r in enumerate(rows):
        for j in r.cols.tolist():
            by_column.setdefault(j, []).append(i)
    kept = []
    for cut in candidates:
        counts: dict[int, int] = {}
        for j in cut.cols.tolist():
            for i in by_column.get(j, []):
                counts[i] = counts.get(i, 0) + 1
        for i in sorted(counts, key=lambda i: -counts[i]):
            bound = row_minimum(rows[i], cut.cols, cut.coefs)
            if bound is not None and np.isfinite(bound) and bound >= cut.rhs - tolerance * (1 + abs(cut.rhs)):
                kept.append(Cut(cut.cols, cut.coefs, bound))
                break
    return kept


_known: dict[bytes, tuple[int, list[Cut], bool]] = {}
"""Proven cuts by :func:`fingerprint` of the problem they were proven for, with their rounds
and whether they were computed ahead (while the solve ran)."""

_KEPT = 8
"""Problems whose cuts :data:`_known` keeps (the oldest forgotten first)."""


def fingerprint(problem: Problem) -> bytes:
    """A digest of what a cut's validity depends on: ``problem``'s rows, bounds and kinds
    (equal digests: the same feasible set, so a cut proven for one holds for the other)."""
    A = problem.A.tocsr()
    digest = hashlib.blake2b(digest_size=20)
    for part in (A.indptr, A.indices, A.data, problem.senses, problem.rhs, problem.lb, problem.ub,
                 np.asarray(problem.binary, dtype=bool), np.array(A.shape)):
        digest.update(np.ascontiguousarray(part).tobytes())
        digest.update(b"|")
    return digest.digest()


def remember(key: bytes, rounds: int, cuts: list[Cut], ahead: bool = False) -> None:
    """Keep ``cuts``, proven by ``rounds`` rounds for the problem of :func:`fingerprint` ``key``
    (``ahead``: while the solve ran)."""
    _known.pop(key, None)
    _known[key] = (rounds, cuts, ahead)
    while len(_known) > _KEPT:
        del _known[next(iter(_known))]


def remembered(problem: Problem, rounds: int = 1, *, ahead: bool = False) -> list[Cut] | None:
    """The cuts kept for ``problem`` (by :func:`fingerprint`) from ``rounds`` rounds, or from
    at least as many computed ahead (``ahead``: those only), or None."""
    known = _known.get(fingerprint(problem))
    if known is None or (ahead and not known[2]):
        return None
    kept, early = known[0], known[2]
    return known[1] if kept == rounds or (early and kept >= rounds) else None


def proven_root_cuts(problem: Problem, seconds: float, rounds: int = 1) -> list[Cut]:
    """The cuts of :func:`root_cut_rounds` after up to ``rounds`` rounds, computed once for
    the same problem asked twice (certification's budgeted search takes them, and the longer
    search after it on the same part of the same strengthening takes them again) or taken
    from the rounds computed while the solve ran (:mod:`smug_opt.safe_search.ahead`)."""
    known = remembered(problem, rounds)
    if known is not None:
        return known
    done = list(root_cut_rounds(problem, seconds, rounds))
    cuts = done[-1].cuts if done else []
    remember(fingerprint(problem), rounds, cuts)
    return cuts


class Round(NamedTuple):
    """What :func:`root_cut_rounds` has proven after a round: every cut so far (this round's
    last), and whether the rounds are over before their number: ``final`` (then no cut is
    new) when HiGHS finished its root and separated no cut a row proves that was not known
    already, so that every later round would be the same."""

    cuts: list[Cut]
    final: bool = False


def root_cut_rounds(problem: Problem, seconds: float, rounds: int) -> Iterator[Round]:
    """Up to ``rounds`` rounds of HiGHS's root cuts on ``problem`` with the cuts proven so far
    as rows, each round's kept where a single row of ``problem`` proves it
    (:func:`verified_cuts`): a :class:`Round` after each round that proves new cuts, and a
    ``final`` one after a finished root that proves none. The rounds stop there, or once
    ``seconds`` have passed (a root cut short by its time limit is never ``final``)."""
    deadline = time.monotonic() + seconds
    rows = knapsack_rows(problem)
    propagator = RowPropagator(rows)
    lb, ub = np.asarray(problem.lb, dtype=np.float64), np.asarray(problem.ub, dtype=np.float64)
    cuts: list[Cut] = []
    known: set[tuple[bytes, bytes]] = set()
    for _ in range(rounds):
        left = deadline - time.monotonic()
        if left <= 0:
            return
        pool, finished = highs_root_pool(_with_rows(problem, cuts), left)
        proven = verified_cuts(pool, rows)
        by_row = {_key(c) for c in proven}
        proven += probed_cuts([c for c in pool if _key(c) not in by_row], propagator, lb, ub, deadline)
        new = [c for c in proven if _key(c) not in known]
        if not new:
            if finished:
                yield Round(cuts, final=True)
            return
        known.update(_key(c) for c in new)
        cuts = cuts + new
        yield Round(cuts)


def _key(cut: Cut) -> tuple[bytes, bytes]:
    return cut.cols.tobytes(), cut.coefs.tobytes()


def _with_rows(problem: Problem, cuts: list[Cut]) -> Problem:
    """``problem`` with ``cuts`` as ``>=`` rows (itself without any)."""
    if not cuts:
        return problem
    indptr = np.cumsum([0] + [c.cols.size for c in cuts])
    block = sp.csr_matrix((np.concatenate([c.coefs for c in cuts]), np.concatenate([c.cols for c in cuts]),
                           indptr), shape=(len(cuts), problem.num_vars))
    return problem.with_constraints(block, [">="] * len(cuts), np.array([c.rhs for c in cuts]))


def highs_root_pool(problem: Problem, seconds: float) -> tuple[list[Cut], bool]:
    """The cuts over binaries only in HiGHS's cut pool after its MIP root on ``problem``
    (strict rows as non-strict), as ``coefs·x >= rhs`` (unverified: see :func:`verified_cuts`,
    whose :func:`row_minimum` takes every column of a cut to be binary), and whether HiGHS
    finished its root (or the whole MIP), not stopped by its time limit (or anything else)
    before its separation was done."""
    import highspy

    lp = problem_lp(problem)
    binary = np.asarray(problem.binary, dtype=bool)
    kinds = highspy.HighsVarType
    lp.integrality_ = [kinds.kInteger if b else kinds.kContinuous for b in binary]
    with silenced_stdout():
        h: Any = highspy.Highs()
    options = {"output_flag": False, "threads": 1, "presolve": "off",  # cuts over the problem's own columns
               "mip_max_nodes": 1, "mip_heuristic_effort": 0.0, "time_limit": max(seconds, 0.01),
               "mip_rel_gap": 0.0, "mip_abs_gap": 0.0}
    for option, value in options.items():
        h.setOptionValue(option, value)
    h.passModel(lp)
    # HiGHS reads its cut pool out only after a root that has not closed the gap: with an
    # integral objective, a root bound rounded up to a rounding heuristic's solution ends the
    # MIP first (stress avg-pool d00000: an empty pool). A continuous column fixed at 0 with
    # a cost of 1/2 keeps the objective from counting as integral; the gaps at 0 keep a root
    # short of the optimum from counting as closed.
    h.addCol(0.5, 0.0, 0.0, 0, np.zeros(0, dtype=np.int32), np.zeros(0))
    pool: list[Cut] = []

    def read(kind: Any, message: str, out: Any, into: Any, user: Any) -> None:
        if kind != highspy.cb.HighsCallbackType.kCallbackMipGetCutPool:
            return
        pool.clear()
        count = out.cutpool_num_cut
        start, index, value = (np.array(v) for v in (out.cutpool_start, out.cutpool_index, out.cutpool_value))
        lower, upper = np.array(out.cutpool_lower)[:count], np.array(out.cutpool_upper)[:count]
        for k in range(count):
            cols, coefs = index[start[k]:start[k + 1]].astype(np.int64), value[start[k]:start[k + 1]]
            if (cols.size and cols.max() < binary.size and np.unique(cols).size == cols.size
                    and binary[cols].all()):
                if np.isfinite(lower[k]) and lower[k] > -highspy.kHighsInf:
                    pool.append(Cut(cols, coefs.copy(), float(lower[k])))
                if np.isfinite(upper[k]) and upper[k] < highspy.kHighsInf:
                    pool.append(Cut(cols, -coefs, -float(upper[k])))

    h.setCallback(read, None)
    h.startCallback(highspy.cb.HighsCallbackType.kCallbackMipGetCutPool)
    h.run()
    status = highspy.HighsModelStatus
    return pool, h.getModelStatus() in (status.kOptimal, status.kInfeasible, status.kUnboundedOrInfeasible,
                                        status.kUnbounded, status.kSolutionLimit)
