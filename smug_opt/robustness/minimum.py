"""Minimum-size verified explanations with a proven lower bound, by implicit hitting sets.

A counterexample ``x'`` that differs from ``x`` only on the values ``D`` shows that every
explanation fixes at least one value of ``D`` (freeing all of ``D`` breaks the label), so
the smallest set hitting every such ``D`` met so far is a lower bound on the minimum size.
Each round solves that hitting-set MILP through :func:`smug_opt.solve` (the project's
backends, verified answers); its optimum ``H`` is then grown into a robust set: while
fixing the current set is not robust, the query's counterexample is shrunk (its values set
back to ``x`` while a float64 forward pass still breaks the label) to a new ``D``, which
is fixed too. A robust ``H`` itself is a minimum explanation; a smaller robust set
improves the incumbent. The incumbent starts as the subset-minimal explanation, so the
answer is never larger than it; on a time limit the incumbent, the bound and the gap are
what was proven so far.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from smug_opt.backend_choice import DEFAULT_BACKEND, BackendChoice
from smug_opt.bounds.alpha_flat import default_steps
from smug_opt.network.flat import FlatNetwork, Preprocess
from smug_opt.query_work import Work
from smug_opt.robustness.attack import attack, flat_gradient
from smug_opt.robustness.bab import Leaves
from smug_opt.robustness.decide import decide
from smug_opt.robustness.explanation import RobustExplanation, label_changes
from smug_opt.robustness.query import RobustnessQuery
from smug_opt.threads import one_blas_thread

__all__ = ["MinimumExplanation", "minimum_explanation", "shrink_counterexample"]

BREAK_MARGIN = 1e-9
"""How far (relative to the scores' size) another class must exceed the label for a shrunk
counterexample to count: the lower bound rests on these float64 forward passes."""


@dataclass(frozen=True)
class MinimumExplanation:
    """``fixed``: the smallest robust set found (bool per model input, flat), ``size`` its
    size, ``lower_bound`` a proven lower bound on any explanation's size (``proven`` when
    they meet); ``proof`` of the robustness of ``fixed`` as in
    :class:`~smug_opt.robustness.explanation.RobustExplanation`; ``cores``: the value sets
    of which every explanation fixes one; ``rounds``: hitting-set MILPs solved."""

    fixed: np.ndarray
    lower_bound: int
    proof: str
    cores: int
    rounds: int
    queries: int
    seconds: float
    message: str = ""

    @property
    def size(self) -> int:
        return int(self.fixed.sum())

    @property
    def gap(self) -> int:
        return self.size - self.lower_bound

    @property
    def proven(self) -> bool:
        return self.gap == 0


def _breaks(net: FlatNetwork, preprocess: Preprocess, points: np.ndarray, label: int) -> np.ndarray:
    scores = net.forward(preprocess(points))[-1]
    others = np.delete(scores, label, axis=1).max(axis=1)
    scale = 1.0 + np.abs(scores).max(axis=1)
    return others - scores[:, label] > BREAK_MARGIN * scale


def shrink_counterexample(net: FlatNetwork, preprocess: Preprocess, x: np.ndarray, cx: np.ndarray,
                          label: int, low: np.ndarray | None = None, high: np.ndarray | None = None,
                          rounds: int = 3) -> np.ndarray | None:
    """The values on which a counterexample still differs from ``x`` after setting back as
    many of them as keep the label broken (least influential first, in halving chunks),
    then, given the box ``[low, high]``, pushing the values left free deeper into the
    unsafe region by PGD and setting back again (``rounds`` times, while that helps);
    None when ``cx`` does not break the label by float64 at all."""
    cx = np.array(cx, dtype=np.float64)
    if not _breaks(net, preprocess, cx[None], label)[0]:
        return None
    cx = _set_back(net, preprocess, x, cx, label)
    region = label_changes(net.num_outputs, label)
    if low is None or high is None:
        return np.flatnonzero(cx != x)
    for _ in range(rounds):
        free = cx != x
        if not free.any():
            break
        deeper = attack(net, preprocess, np.where(free, low, x), np.where(free, high, x), region,
                        steps=50, restarts=2, seed=0, start=cx, until=-np.inf)
        if not _breaks(net, preprocess, deeper.x[None], label)[0]:
            break
        shrunk = _set_back(net, preprocess, x, deeper.x, label)
        if np.count_nonzero(shrunk != x) >= np.count_nonzero(free):
            break
        cx = shrunk
    return np.flatnonzero(cx != x)


def _set_back(net: FlatNetwork, preprocess: Preprocess, x: np.ndarray, cx: np.ndarray, label: int
              ) -> np.ndarray:
    """``cx`` with as many values set back to ``x`` as keep the label broken."""
    moved = np.flatnonzero(cx != x)
    values = net.forward(preprocess(cx[None]))
    runner_up = int(np.delete(np.arange(net.num_outputs), label)[
        np.delete(values[-1][0], label).argmax()])
    grad_out = np.zeros((1, net.num_outputs))
    grad_out[0, label], grad_out[0, runner_up] = 1.0, -1.0
    g_affine = flat_gradient(net, values, grad_out)[0]
    g = preprocess.backward(g_affine, x.size)[0]
    order = moved[np.argsort(np.abs(g[moved] * (cx[moved] - x[moved])), kind="stable")]
    chunk = max(1, order.size // 8)
    while chunk >= 1 and order.size:
        kept = []
        for s in range(0, order.size, chunk):
            part = order[s:s + chunk]
            trial = cx.copy()
            trial[part] = x[part]
            if _breaks(net, preprocess, trial[None], label)[0]:
                cx = trial
            else:
                kept.append(part)
        order = np.concatenate(kept) if kept else order[:0]
        chunk //= 2
    return cx


def _hitting_set(cores: list[np.ndarray], n: int, backend: str | BackendChoice, time_limit: float
                 ) -> tuple[np.ndarray | None, int, str]:
    """The smallest set of values hitting every core (MILP through :func:`smug_opt.solve`),
    a proven lower bound on its size, and the solve's status."""
    import scipy.sparse as sp

    from smug_opt.ir import ProblemBuilder
    from smug_opt.solving import solve

    used = np.unique(np.concatenate(cores))
    column = np.full(n, -1)
    column[used] = np.arange(used.size)
    builder = ProblemBuilder(metadata={"encoding": "hitting-set", "cores": len(cores)})
    s = builder.add_binaries(used.size)
    rows = np.repeat(np.arange(len(cores)), [c.size for c in cores])
    cover = sp.csr_matrix((np.ones(rows.size), (rows, column[np.concatenate(cores)])),
                          shape=(len(cores), used.size))
    builder.add_constraints(cover, s, ">=", np.ones(len(cores)))
    builder.set_objective(s, 1.0)
    result = solve(builder.build(), backend, time_limit=max(time_limit, 1.0), isolate=False)
    bound = result.bound if result.bound is not None else 0.0
    lower = max(0, math.ceil(bound - 1e-6)) if math.isfinite(bound) else 0
    if result.x is None:
        return None, lower, result.status.name
    chosen = np.zeros(n, dtype=bool)
    chosen[used[np.asarray(result.x[: used.size]) > 0.5]] = True
    if result.status.name == "OPTIMAL":
        lower = max(lower, int(chosen.sum()))
    return chosen, lower, result.status.name


@one_blas_thread()
def minimum_explanation(net: FlatNetwork, preprocess: Preprocess, x: np.ndarray,
                        start: RobustExplanation, *, valid_range: tuple[float, float] = (0.0, 1.0),
                        time_limit: float = 60.0, query_time: float = 5.0,
                        backend: str | BackendChoice = DEFAULT_BACKEND,
                        solve_options: Mapping[str, Any] | None = None,
                        query_work: Work | None = None) -> MinimumExplanation:
    """The smallest explanation of ``start.label`` on ``x`` at ``start.eps`` that the
    hitting sets find within ``time_limit`` seconds (see the module docstring), starting
    from the subset-minimal ``start`` and its counterexamples. ``query_work``: each query
    ends at this work (:class:`~smug_opt.query_work.Work`) instead of ``query_time``."""
    begin = time.monotonic()
    deadline = begin + time_limit
    x = np.asarray(x, dtype=np.float64).reshape(-1)
    label, eps = start.label, start.eps
    low = np.minimum(np.maximum(x - eps, valid_range[0]), x)
    high = np.maximum(np.minimum(x + eps, valid_range[1]), x)
    region = label_changes(net.num_outputs, label)
    best, best_proof = start.fixed.copy(), start.proof
    cores: list[np.ndarray] = []
    for cx in start.counterexamples:
        if time.monotonic() >= deadline - 0.5:  # hundreds of them after a long traversal
            break
        core = shrink_counterexample(net, preprocess, x, cx, label, low, high)
        if core is not None and core.size:
            cores.append(core)
    lower, rounds, queries, message = 0, 0, 0, ""
    leaves: dict[int, Leaves] = {}  # per disjunct, the last proof's leaves (valid over any box)

    def query(fixed: np.ndarray) -> Any:
        nonlocal queries
        queries += 1
        q = RobustnessQuery(net, preprocess, np.where(fixed, x, low), np.where(fixed, x, high), region,
                            alpha_steps=default_steps(net))
        left = max(deadline - time.monotonic(), 0.1)
        return decide(q, time_limit=left if query_work is not None else min(query_time, left),
                      backend=backend, solve_options=solve_options, leaves=leaves, work=query_work)

    while time.monotonic() < deadline - 0.5 and lower < best.sum():
        if cores:
            hit, bound, status = _hitting_set(cores, x.size, backend, deadline - time.monotonic())
            rounds += 1
            lower = max(lower, bound)
            if hit is None or lower >= best.sum():
                message = "" if hit is not None else f"hitting set: {status}"
                break
        else:
            hit = np.zeros(x.size, dtype=bool)
        current, new_cores = hit.copy(), 0
        while time.monotonic() < deadline - 0.5:
            verdict = query(current)
            if verdict.answer == "unsat":
                if current.sum() < best.sum():
                    best, best_proof = current.copy(), verdict.proof or "solver"
                break
            core = (shrink_counterexample(net, preprocess, x, verdict.x, label, low, high)
                    if verdict.answer == "sat" and verdict.x is not None else None)
            if core is None or core.size == 0 or np.any(current[core]):
                message = f"a query ended {verdict.answer} {verdict.message}".strip()
                break
            cores.append(core)
            new_cores += 1
            current[core] = True
        if new_cores == 0 and (message or not np.array_equal(best, current)):
            break  # nothing learnt and H not robust: the queries stall
    if lower < best.sum() and not message:
        message = "time limit"
    return MinimumExplanation(fixed=best, lower_bound=min(lower, int(best.sum())), proof=best_proof,
                              cores=len(cores), rounds=rounds, queries=queries,
                              seconds=time.monotonic() - begin, message=message)
