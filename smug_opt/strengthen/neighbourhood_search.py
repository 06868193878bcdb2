"""A primal heuristic for the large strengthened parts: large-neighbourhood search.

On a bias-free stem the bound of the one large part comes from z3's core-guided MaxSAT,
which finds its own good solutions only when it proves them; HiGHS, its partner in the
part race, stops improving a few units above the optimum (ResNet50's 2,661-cell part:
584-589 against 575) while its bound stays at the root's. This search replaces HiGHS there:
HiGHS's first solutions (two improving ones, a deterministic amount of work) give the start;
then, window after window, every cell outside a window of :data:`WINDOW_CELLS` cells
connected through shared rows is fixed at the incumbent and z3 solves the rest (small
pseudo-Boolean problems are its ground: ~2 s a window at load 9). Every improvement is
verified exactly against the part. It runs in a thread beside the part's solve
(:class:`NeighbourhoodSearch`); each window's work is bounded by z3's resource count
(:data:`WINDOW_RLIMIT`), so the sequence of incumbents does not depend on the machine's
load, only how far along it the part's time limit lets it go.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from smug_opt.backend import SolveOptions, Status
from smug_opt.deadline import Deadline
from smug_opt.ir import Problem, ProblemBuilder, Sense
from smug_opt.verification import Verification, verify

__all__ = [
    "MIN_CELLS",
    "MIN_SECONDS",
    "WINDOW_CELLS",
    "WINDOW_RLIMIT",
    "WINDOW_Z3_EXTRAS",
    "NeighbourhoodSearch",
    "restricted",
    "usable",
    "window",
]

MIN_CELLS = 1000
"""Parts with at least this many cells get the search (instead of HiGHS in their race)."""

WINDOW_CELLS = 500
"""Cells set free per window: on ResNet50's large part windows of 500 reached its optimum
575 from HiGHS's 587 in 10 windows (45 s at load 9), windows of 250 ended at 576 in the same
time, HiGHS as the window solver (100 cells, 0.24 s a window) at 578 in 90 s."""

WINDOW_RLIMIT = 5_000_000
"""z3's resource limit per window (its deterministic work count): the windows that improved
ResNet50's incumbent used 1.3-5.0 M; a window that does not finish within 8 M (11 s at
load 9) did not improve it."""

WINDOW_Z3_EXTRAS = {"maxres.max_core_size": 1000, "core.minimize": True, "rlimit": WINDOW_RLIMIT}
"""z3's settings per window: core batches as on the parts (``PART_Z3_EXTRAS``), minimal cores
as on the parts below ``MIN_CELLS`` cells (a window has ``WINDOW_CELLS``: on ResNet50's large
part the search reached 580 / 578 / 576 after 7 / 9 / 12 windows with them, 583 / 582 / 579
without; 576 on 20 CPU s against 577 on 23), the work limit."""

MIN_SECONDS = 0.1
"""Time left below which no further solve starts."""

LEVELS = (0, 1)
"""The backends' levels tried, until one's solution holds exactly: 0 writes strict rows
outward (a relaxation; a large part has a few strict rows left), 1 inward."""

SEED = 0
"""The seed of the windows' centres: each drawn among the cells no window of the current
pass has covered yet (so a pass covers the part once; random centres kept re-solving
optimal regions)."""


def usable() -> bool:
    """Whether HiGHS and z3, which the search runs on, are both installed."""
    from smug_opt.registry import available_backends

    return {"highs", "z3"} <= set(available_backends())


@dataclass
class _Best:
    check: Verification | None = None
    windows: int = 0


class NeighbourhoodSearch:
    """Searches ``problem`` (binary-only) in a daemon thread until :meth:`stop` or
    ``deadline``; :meth:`stop` returns the best solution found with its exact verification
    (None: none). ``start``: a solution to begin from (verified first; else HiGHS's first
    ones). Each candidate is verified once, against ``problem``."""

    def __init__(self, problem: Problem, deadline: Deadline, start: np.ndarray | None = None) -> None:
        if not problem.binary.all():
            raise ValueError("neighbourhood search needs a binary-only problem")
        self.problem = problem
        self.deadline = deadline
        self.start = start
        self._integral = problem.integral_objective
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._best = _Best()
        self._solving: Any = None  # the z3 model being solved, to interrupt on stop
        self._thread = threading.Thread(target=self._run, name="neighbourhood-search", daemon=True)

    def __enter__(self) -> NeighbourhoodSearch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()

    def stop(self) -> tuple[Verification | None, int]:
        """Stop searching; the best solution's exact verification (None: none found) and
        the windows solved."""
        self._stop.set()
        with self._lock:
            solving = self._solving
            if solving is not None and getattr(solving, "opt", None) is not None:
                solving.opt.ctx.interrupt()
            return self._best.check, self._best.windows

    # ------------------------------------------------------------------ search
    def _offer(self, check: Verification | None) -> np.ndarray | None:
        """Keep a verified point if it is better than the best; the kept point."""
        if check is None or not check.ok:
            return None
        with self._lock:
            if self._best.check is not None and check.objective >= self._best.check.objective:
                return None
            self._best.check = check
        return check.x

    def _running(self) -> bool:
        return not self._stop.is_set() and not self.deadline.passed(MIN_SECONDS)

    def _run(self) -> None:
        try:
            self._search()
        except Exception:  # a heuristic: its failure leaves the part's own solve as it is
            self._stop.set()

    def _search(self) -> None:
        p = self.problem
        if self.start is not None:
            self._offer(verify(p, self.start))
        self._offer(_highs_start(p, self.deadline))
        with self._lock:
            if self._best.check is None:
                return
            x = self._best.check.x
        pattern = (p.A != 0).astype(np.int32)
        adjacency = (pattern.T @ pattern).tocsr()
        rng = np.random.default_rng(SEED)
        covered = np.zeros(p.num_vars, dtype=bool)
        while self._running():
            if covered.all():  # every cell was in a window: the next pass
                covered[:] = False
            free = window(adjacency, int(rng.choice(np.flatnonzero(~covered))), WINDOW_CELLS)
            covered[free] = True
            y = self._solve_window(x, free)
            with self._lock:
                self._best.windows += 1
            better = self._offer(y)
            if better is not None:
                x = better

    def _solve_window(self, x: np.ndarray, free: np.ndarray) -> Verification | None:
        """``x`` with the cells ``free`` re-optimised by z3, verified against the problem
        (None: no solution within its work)."""
        from smug_opt.registry import backend_class

        sub = restricted(self.problem, x, free)
        options = SolveOptions(time_limit=_seconds(self.deadline), extras=WINDOW_Z3_EXTRAS)
        backend = backend_class("z3")()
        for level in LEVELS:
            model = backend.lower(sub, options, level)
            with self._lock:
                if self._stop.is_set():
                    return None
                self._solving = model
            try:
                raw = _optimized(backend, model, sub, options)
            finally:
                with self._lock:
                    self._solving = None
            if raw is None:
                continue
            y = x.copy()
            y[free] = np.round(raw)
            if self._integral and self.problem.objective @ y >= self.problem.objective @ x:
                return None  # no better than x (integer costs: exact sums): nothing to verify
            check = verify(self.problem, y)
            if check.ok:
                return check
        return None


def window(adjacency: sp.csr_matrix, centre: int, size: int) -> np.ndarray:
    """Up to ``size`` cells reached breadth-first from ``centre`` in ``adjacency`` (cells
    sharing a row), sorted."""
    order, seen, queue = [centre], {centre}, deque([centre])
    while queue and len(order) < size:
        cell = queue.popleft()
        for other in adjacency.indices[adjacency.indptr[cell]:adjacency.indptr[cell + 1]].tolist():
            if other not in seen:
                seen.add(other)
                order.append(other)
                queue.append(other)
                if len(order) >= size:
                    break
    return np.array(sorted(order), dtype=np.int64)


def restricted(problem: Problem, x: np.ndarray, free: np.ndarray) -> Problem:
    """``problem`` over the cells ``free`` with every other cell fixed at ``x``: the rows
    that read a free cell, their right-hand sides moved by the fixed cells' terms (in
    floats: a solution is verified against ``problem`` before it counts)."""
    fixed = np.ones(problem.num_vars, dtype=bool)
    fixed[free] = False
    A = problem.A
    rows = np.unique(A[:, free].tocoo().row)
    read = A[rows]
    moved = problem.rhs[rows] - read[:, fixed] @ x[fixed]
    builder = ProblemBuilder()
    cells = builder.add_binaries(free.size)
    builder.add_constraints(read[:, free], cells, [Sense(int(s)) for s in problem.senses[rows]], moved)
    builder.set_objective(cells, problem.objective[free])
    return builder.build()


def _highs_start(problem: Problem, deadline: Deadline) -> Verification | None:
    """HiGHS's second improving solution of ``problem`` (its first is near-trivial),
    verified."""
    from smug_opt.registry import backend_class

    options = SolveOptions(time_limit=_seconds(deadline), extras={"mip_max_improving_sols": 2})
    backend = backend_class("highs")()
    for level in LEVELS:
        raw = _optimized(backend, backend.lower(problem, options, level), problem, options)
        check = None if raw is None else verify(problem, np.round(raw))
        if check is not None and check.ok:
            return check
    return None


def _seconds(deadline: Deadline) -> float | None:
    left = deadline.remaining()
    return None if left is None else max(left, MIN_SECONDS)


def _optimized(backend: Any, model: Any, problem: Problem, options: SolveOptions) -> np.ndarray | None:
    """One backend's level-0 solve of ``model`` in this thread, without the core's loop:
    the caller verifies what it returns."""
    raw = backend.optimize(model, problem, options, lambda x, objective: None)
    if raw.status not in (Status.OPTIMAL, Status.FEASIBLE) or raw.x is None:
        return None
    return np.asarray(raw.x, dtype=np.float64)
