"""Verified explanations: a set of input values that, kept fixed, provably keeps the label
while every other value moves anywhere within ε (L∞, clipped to the valid range).

:func:`robust_explanation` frees values in order of increasing sensitivity, in batches
with binary search on failure (as VeriX+ does), cheapest evidence first: rigorous bounds
alone free most values; a batched attack shows which of the rest are necessary; full
robustness queries (:func:`smug_opt.robustness.decide.decide`: bounds, attack, exact
solve) settle the others. Freeing more values only adds counterexamples, so a value
whose freeing gave a confirmed counterexample is necessary in the final set: when every
value left fixed has such a counterexample the set is subset-minimal (no value can be
dropped). A query left ``unknown`` keeps its values fixed (the guarantee still holds;
minimality is then not claimed for them), and so does every value not reached when the
overall ``time_limit`` runs out. The confirmed counterexamples are kept:
:mod:`smug_opt.robustness.minimum` starts its hitting sets from them.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from smug_opt.backend_choice import DEFAULT_BACKEND, BackendChoice
from smug_opt.bounds.alpha_flat import default_steps
from smug_opt.network.flat import FlatNetwork, Preprocess
from smug_opt.query_work import Work
from smug_opt.robustness.attack import flat_gradient
from smug_opt.robustness.bab import Leaves
from smug_opt.robustness.bound_freeing import bound_round, by_bound_cost
from smug_opt.robustness.bounds_memo import BoundsMemo
from smug_opt.robustness.decide import decide
from smug_opt.robustness.necessity import necessary_by_attack
from smug_opt.robustness.query import RobustnessQuery
from smug_opt.threads import one_blas_thread
from smug_opt.vnnlib import Conjunct

__all__ = ["RobustExplanation", "by_sensitivity", "label_changes", "robust_explanation"]

SMALLEST_BOUND_POOL = 8
"""Pools this small that bounds do not free go to the full queries undivided (near the
end almost every single value fails the bounds: halving down to each cost 2 bound
computations a value for nothing)."""

SINGLE_MISSES = 8
"""With α-CROWN on (``alpha_steps``), the values the bound rounds leave are tried one at a time
by bounds alone, cheapest first, until this many in a row fail: on the VeriVital CNN at
ε = 0.05 α-CROWN frees nearly every value that CROWN leaves at the end of the rounds
(benchmarks/robust/README.md), which the full queries (branch and bound, MILP) over the
near-whole box do not decide."""

CHUNK_QUERY_TIME = 3.0
"""Seconds at most for a full query freeing several values: one that runs out is split in
halves (a single value's query gets the whole ``query_time``)."""

CHUNK_WORK_SHARE = 4
"""With a work budget per query, a query freeing several values gets this fraction of it
(one over it): as :data:`CHUNK_QUERY_TIME` does, a chunk that runs out is halved, and
its halves start from its tree."""

ATTACK_STEPS = 50
"""PGD steps of each full query's attack: the batched attack has already looked for the
necessary single values."""


@dataclass(frozen=True)
class RobustExplanation:
    """``fixed`` (bool per model input, flat): the explanation. Every input that agrees
    with ``x`` on it and lies within ``eps`` of ``x`` (clipped to the valid range) gets
    ``label``, proven (``proof``: ``"exact"`` when every query was settled by bounds or
    exact proofs, ``"solver"`` when some rest on a floating-point solver's word).
    ``necessary`` counts fixed values shown necessary by a counterexample, ``undecided``
    those kept because a query (or the overall time limit) ran out; ``subset_minimal``
    when none was. ``counterexamples``: the confirmed counterexamples met on the way (model
    inputs, flat), each breaking the label with the set fixed at that point."""

    fixed: np.ndarray
    label: int
    eps: float
    proof: str
    necessary: int
    undecided: int
    queries: int
    seconds: float
    counterexamples: tuple[np.ndarray, ...] = field(default=(), repr=False)

    @property
    def size(self) -> int:
        return int(self.fixed.sum())

    @property
    def subset_minimal(self) -> bool:
        return self.undecided == 0


def label_changes(num_outputs: int, label: int) -> tuple[Conjunct, ...]:
    """The unsafe region 'another class scores at least the label's' (one disjunct each)."""
    out = []
    for j in range(num_outputs):
        if j != label:
            row = np.zeros((1, num_outputs))
            row[0, label], row[0, j] = 1.0, -1.0
            out.append(Conjunct(row, np.zeros(1), np.zeros(1, dtype=bool)))
    return tuple(out)


@one_blas_thread()
def robust_explanation(net: FlatNetwork, preprocess: Preprocess, x: np.ndarray, *, eps: float,
                       valid_range: tuple[float, float] = (0.0, 1.0), label: int | None = None,
                       query_time: float = 5.0, backend: str | BackendChoice = DEFAULT_BACKEND,
                       batch: int | None = None,
                       time_limit: float | None = None, solve_options: Mapping[str, Any] | None = None,
                       lean: bool = True, reuse_counterexamples: bool = True,
                       order_by_bounds: bool = True, reuse_proofs: bool = True,
                       query_work: Work | None = None, reuse_bounds: bool = True,
                       alpha_steps: int | None = None) -> RobustExplanation:
    """The explanation of ``net``'s label on ``x`` (model input units, flat) at ``eps``.

    Three passes, cheapest first: (1) in order of increasing sensitivity, chunks of
    ``batch`` values (default: a sixteenth of the inputs) are freed where rigorous bounds
    alone prove the label kept, halving a chunk they do not prove down to single values;
    (2) a batched attack (:func:`~smug_opt.robustness.necessity.necessary_by_attack`) shows
    which of the values left are necessary; (3) the others are freed in chunks by full
    queries (bounds, attack, exact solve; ``query_time`` seconds each), halving on failure.
    With ``reuse_counterexamples``, a chunk's counterexample restarts the batched attack on
    that chunk (from a point where the free values already sit where they break the label,
    moving one value of the chunk often suffices), and when it shows some necessary
    the chunk is asked again without them instead of halved; later batched attacks start
    from the latest such counterexample. The values a batched attack has already tried
    from the same start over the same free set are not tried again. With
    ``order_by_bounds``, pass (3) takes the values left by their cost to the linear bounds
    over the box freeing all of them (cheapest first), not by gradient sensitivity. With
    ``reuse_proofs``, each disjunct's branch and bound starts from the closed leaves of its
    last proof in this traversal (split decisions, α and β; see
    :class:`~smug_opt.robustness.bab.Leaves`), not from the root.

    ``time_limit``: seconds for the whole traversal (values not reached by then stay fixed,
    counted ``undecided``, as do values whose query ran out); ``solve_options`` go to each
    query's :func:`smug_opt.solve`; ``lean``: the full queries run :func:`decide`'s lean
    chain (the batched attack has already looked for counterexamples); ``query_work``: each
    query's budget in work instead of ``query_time`` (:class:`~smug_opt.query_work.Work`;
    a chunk's, :data:`CHUNK_WORK_SHARE` times smaller): the set then does not depend on
    the machine's load, unless ``time_limit`` ends the traversal first. With ``reuse_bounds``,
    each query's CROWN intervals start from an earlier query's
    (:class:`~smug_opt.robustness.bounds_memo.BoundsMemo`): only the neurons the values
    where their boxes differ reach are computed again. ``alpha_steps``: the bound rounds' and
    the queries' α-CROWN steps where CROWN leaves a disjunct open
    (:attr:`RobustnessQuery.alpha_steps`; 0: CROWN only; None:
    :func:`~smug_opt.bounds.alpha_flat.default_steps`)."""
    start = time.monotonic()
    deadline = None if time_limit is None else start + time_limit
    alpha_steps = default_steps(net) if alpha_steps is None else alpha_steps
    x = np.asarray(x, dtype=np.float64).reshape(-1)
    if not eps > 0:
        raise ValueError(f"eps must be positive, got {eps!r}")
    if query_work is not None:
        query_work.solver_extras(backend)  # a backend without a node limit fails here, not in a query
    scores = net.forward(preprocess(x[None]))
    label = int(scores[-1][0].argmax()) if label is None else int(label)
    region = label_changes(net.num_outputs, label)
    low = np.minimum(np.maximum(x - eps, valid_range[0]), x)
    high = np.maximum(np.minimum(x + eps, valid_range[1]), x)
    free = np.zeros(x.size, dtype=bool)
    necessary = undecided = queries = 0
    proofs: set[str] = set()
    counterexamples: list[np.ndarray] = []
    proof_leaves: dict[int, Leaves] | None = {} if reuse_proofs else None
    memo = BoundsMemo() if reuse_bounds else None

    def out_of_time() -> bool:
        return deadline is not None and time.monotonic() >= deadline

    def query_for(extra: np.ndarray) -> RobustnessQuery:
        freed = free.copy()
        freed[extra] = True
        return RobustnessQuery(net, preprocess, np.where(freed, low, x), np.where(freed, high, x), region,
                               memo=memo, alpha_steps=alpha_steps)

    def bounds_free(pool: np.ndarray, left: list[int]) -> None:
        nonlocal queries
        if out_of_time():
            left.extend(pool.tolist())
            return
        freed, kept, computed = bound_round(query_for, x, pool)
        queries += computed
        if freed.size:
            free[freed] = True
            proofs.add("exact")
            if kept.size:
                bounds_free(kept, left)
        elif kept.size <= SMALLEST_BOUND_POOL:
            left.extend(kept.tolist())  # the full queries settle them: their bounds rarely do
        else:
            bounds_free(kept[: kept.size // 2], left)
            bounds_free(kept[kept.size // 2:], left)

    def free_singly(values: np.ndarray) -> np.ndarray:
        nonlocal queries
        kept: list[int] = []
        misses = 0
        for i, v in enumerate(values.tolist()):
            if out_of_time() or misses >= SINGLE_MISSES:
                return np.concatenate([np.array(kept, dtype=int), values[i:]])
            queries += 1
            if query_for(np.array([v])).refuted().all():
                free[v], misses = True, 0
                proofs.add("exact")
            else:
                kept.append(v)
                misses += 1
        return np.array(kept, dtype=int)

    def robust_with(extra: np.ndarray) -> tuple[str, np.ndarray | None]:
        nonlocal queries
        work = query_work
        budget: float | None = query_time if extra.size == 1 else min(query_time, CHUNK_QUERY_TIME)
        if work is not None:  # counted work ends the query; the clock only at the overall limit
            budget = None
            if extra.size > 1:
                work = work.share(CHUNK_WORK_SHARE)
        left = None if deadline is None else deadline - time.monotonic()
        limits = [t for t in (budget, left) if t is not None]
        remaining = min(limits) if limits else None
        if remaining is not None and remaining <= 0:
            return "unknown", None
        queries += 1
        verdict = decide(query_for(extra), time_limit=remaining, backend=backend,
                         solve_options=solve_options, attack_steps=ATTACK_STEPS, lean=lean,
                         leaves=proof_leaves, work=work)
        if verdict.answer == "unsat":
            proofs.add(verdict.proof or "solver")
        elif verdict.answer == "sat" and verdict.x is not None:
            counterexamples.append(verdict.x)
        return verdict.answer, verdict.x

    anchor: list[Any] = [None, 0]  # the batched attack's start (a chunk's counterexample), its number
    attacked: dict[int, tuple[int, int]] = {}  # value -> (free values, anchor number) when last attacked

    def drop_necessary(chunk: np.ndarray) -> np.ndarray:
        nonlocal necessary
        state = (int(free.sum()), anchor[1])
        todo = np.array([v for v in chunk if attacked.get(int(v)) != state], dtype=int)
        shown = {}
        if todo.size:
            shown = necessary_by_attack(net, preprocess, np.where(free, low, x), np.where(free, high, x),
                                        low, high, todo, region, start=anchor[0])
        attacked.update((int(v), state) for v in todo)
        necessary += len(shown)
        counterexamples.extend(shown.values())
        return np.array([v for v in chunk if v not in shown], dtype=int)

    def try_free(chunk: np.ndarray) -> None:
        nonlocal necessary, undecided
        if out_of_time():
            undecided += chunk.size
            return
        chunk = drop_necessary(chunk)
        if not chunk.size:
            return
        answer, found = robust_with(chunk)
        if answer == "unsat":
            free[chunk] = True
        elif chunk.size == 1:
            necessary += answer == "sat"
            undecided += answer != "sat"
        else:
            if answer == "sat" and reuse_counterexamples:
                anchor[:] = [found, anchor[1] + 1]  # single values may break from the chunk's counterexample
                rest = drop_necessary(chunk)
                if rest.size < chunk.size:  # some shown necessary: ask again without them
                    try_free(rest)
                    return
            half = chunk.size // 2
            try_free(chunk[:half])
            try_free(chunk[half:])

    batch = batch or max(1, x.size // 16)
    order = by_sensitivity(net, preprocess, x, label, high - low)
    left: list[int] = []
    bounds_free(order, left)
    rest = np.array(left, dtype=int)
    if order_by_bounds and rest.size > 1 and not out_of_time():
        rest = by_bound_cost(query_for, x, rest)
    if alpha_steps and rest.size:
        rest = free_singly(rest)
    for s in range(0, rest.size, batch):
        try_free(rest[s:s + batch])
    return RobustExplanation(fixed=~free, label=label, eps=float(eps),
                             proof="exact" if proofs <= {"exact"} else "solver",
                             necessary=necessary, undecided=undecided, queries=queries,
                             seconds=time.monotonic() - start, counterexamples=tuple(counterexamples))


def by_sensitivity(net: FlatNetwork, preprocess: Preprocess, x: np.ndarray, label: int,
                    width: np.ndarray) -> np.ndarray:
    """Inputs ordered from least to most sensitive: |∂(margin)/∂x|·(range it may move)."""
    values = net.forward(preprocess(x[None]))
    runner_up = int(np.argsort(values[-1][0])[-2]) if net.num_outputs > 1 else label
    grad_out = np.zeros((1, net.num_outputs))
    grad_out[0, label] += 1.0
    grad_out[0, runner_up] -= 1.0
    g_affine = flat_gradient(net, values, grad_out)[0]
    g = preprocess.backward(g_affine, x.size)[0]
    return np.argsort(np.abs(g) * width, kind="stable")
