"""A branch-and-bound whose every pruning is rigorous: the proof that no solution beats an
incumbent, for problems without ReLUs.

Each node's LP (:class:`~smug_opt.safe_search.relaxation.Relaxation`, warm-started) gives
float duals; their safe bound ``F`` (Neumaier and Shcherbina 2004) prunes the node when no
solution below the incumbent ``U`` can lie under it: ``F > U − 1`` for an integral
objective, ``F >= U`` otherwise. An infeasible node is pruned only by a Farkas ray whose
safe evaluation is positive. Every incumbent is verified exactly (:func:`~smug_opt.verification.verify`).

**Reduced-cost fixing** (at every node): with reduced costs ``r`` of the safe bound, a free
binary whose ``r_j > 0`` would raise the bound by exactly ``r_j`` if set to 1 (see
:func:`~smug_opt.bounds.lp.safe_dual_bound`), so it is fixed to 0 in the node's subtree
when ``F + r_j`` (rounded down) prunes; ``r_j < 0`` fixes it to 1 likewise.

**Cover cuts** (:mod:`smug_opt.safe_search.covers`): rounds at the root (and optionally
at every node) add rows valid for every solution, each proven so in exact arithmetic, so the
LP stays a relaxation of the integer points and every bound above stays rigorous.

**HiGHS's root cuts** (:mod:`smug_opt.safe_search.verified_cuts`): once a search has run
``Settings.highs_cuts_after`` nodes, HiGHS's MIP root separates cuts on the problem and each
enters the LP only with the right-hand side a single row proves rigorously.

**Node propagation** (:mod:`smug_opt.safe_search.propagation`, off by default): before each
node's LP, the rows over binaries, the cuts, the objective cutoff and the dual proofs of
pruned nodes fix binaries or close the node, each deduction rigorous.

Node order: best bound first, diving into one child after each branching; or, with
``Settings.depth_first``, the last node queued first, so that after a dive the next LP
differs from the last in a few bounds (its warm start ~16 dual simplex iterations on the
headline instance, against ~75 after a jump across the tree). With the optimum as the
incumbent the order changes the tree only through what the pseudo-costs learn. Branching:
pseudo-costs, initialised by strong branching on a few candidates (a child whose safe
bound prunes fixes its variable the other way instead).

Kept as one module (the cuts, propagation and the LP live in their own) because node
processing, pruning, reduced-cost fixing and branching all read and write one search state
(the incumbent and its cutoff, the open nodes, pseudo-costs, the LP); split, each part would
take the whole state.
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from fractions import Fraction

import numpy as np

from smug_opt.deadline import Deadline
from smug_opt.exact_enumeration import best_point
from smug_opt.ir import Problem
from smug_opt.safe_search.covers import CoverSeparator, Cut, KnapsackRow, knapsack_rows
from smug_opt.safe_search.propagation import DualProofs, RowPropagator, cutoff_rows, propagate
from smug_opt.safe_search.relaxation import LpAnswer, Relaxation
from smug_opt.safe_search.verified_cuts import proven_root_cuts, remembered
from smug_opt.strengthen.rows import pattern_bits
from smug_opt.verification import Verification, decide_rows, verify

__all__ = ["SearchOutcome", "Settings", "search_in_one_process"]

LEAF_ENUMERATION = 10
"""A node without an LP answer whose free binaries are at most this many (and no other
variables) is settled by deciding its points exactly."""

_FRACTIONAL = 1e-6
"""A binary's LP value this far from 0 and 1 counts as fractional."""


@dataclass(frozen=True)
class Settings:
    """Switches for the ablation."""

    reduced_cost_fixing: bool = True
    warm_start: bool = True
    strong_candidates: int = 8
    """Candidates without pseudo-costs whose children's LPs are solved per node (0: none)."""
    reliability: int = 1
    """A binary's pseudo-costs are trusted once each side has this many observations;
    until then it is a strong-branching candidate (reliability branching)."""
    max_nodes: int = 1_000_000
    max_lps: int = 1_000_000_000
    """LPs the search may solve: a work budget, unlike the deadline independent of load."""
    cut_rounds: int = 30
    """Rounds of cover cuts (:mod:`smug_opt.safe_search.covers`) at the root (0: none)."""
    node_cut_rounds: int = 0
    """Rounds of cover cuts at every other node (added to every node's LP: valid everywhere)."""
    propagation: bool = False
    """Node propagation (:mod:`smug_opt.safe_search.propagation`) of the rows over binaries,
    the cuts, the objective cutoff and dual proofs before each node's LP. Off: it shrinks
    trees (mlp-d1-c1-k16-g0.5: 819 -> 563 nodes) but costs more than the LPs it saves
    (benchmarks/certify/safe_search_mnist_first_layer.md)."""
    dual_proofs: int = 500
    """Dual proofs of pruned nodes kept for propagation (0: none)."""
    highs_cuts_after: int = 1000
    """After this many nodes (a search this long is a hard one), HiGHS's root cuts, each
    proven by a single row (:mod:`smug_opt.safe_search.verified_cuts`), join the LP once
    (negative: never)."""
    highs_cut_rounds: int = 1
    """Rounds of HiGHS's root when its cuts join, each on the cuts before it as rows
    (:func:`~smug_opt.safe_search.verified_cuts.proven_root_cuts`). One: on the headline
    instance's part five rounds took the tree from 25,537 to 13,953 nodes (one process,
    depth first) but cost nearly the CPU seconds they saved (~4 s a round: 54.6 against 57.6
    in all), and all before the tree is split among workers
    (benchmarks/certify/headline_search_cnn-d0-c1-k100-g0.5.md)."""
    depth_first: bool = False
    """Open nodes taken last in first out instead of best bound first: cheaper LPs, but the
    lowest open bound rises later (a search stopped early reports a lower one)."""
    workers: int = 1
    """Processes sharing the tree (:mod:`smug_opt.safe_search.parallel`): above 1, the
    search runs until :data:`~smug_opt.safe_search.parallel.OPEN_PER_WORKER` nodes per
    worker are open and HiGHS's cuts are in (past ``highs_cuts_after`` nodes, unless
    negative), then each worker searches a fixed share of them on its own."""

    def __post_init__(self) -> None:
        if self.workers < 1:
            raise ValueError(f"Settings.workers must be at least 1, got {self.workers}")


@dataclass(frozen=True)
class SearchOutcome:
    """``proven``: the tree closed, so ``best`` is optimal (None: the problem is
    infeasible); otherwise ``why`` says what stopped it, and ``bound`` (when known) is a
    rigorous lower bound on the objective of every solution better than ``best``: the
    lowest safe bound among the nodes left open."""

    proven: bool
    best: Verification | None
    nodes: int
    lps: int
    fixed_by_reduced_costs: int
    seconds: float
    why: str = ""
    closed_by_propagation: int = 0
    fixed_by_propagation: int = 0
    bound: float | None = None


@dataclass
class _Node:
    """Fixed binaries (-1 free, else the value) and the LP value its parent predicted."""

    fixed: np.ndarray
    estimate: float
    branched: tuple[int, int, float, float] | None = None  # (var, side, fraction, parent value)


@dataclass(frozen=True)
class _Cutoff:
    """What ``incumbent`` prunes: a bound above ``exact`` (integral objective; at least it
    otherwise), ``value`` its float64 rounding (``representable``: exactly), and the
    cutoff's rows for propagation (:func:`~smug_opt.safe_search.propagation.cutoff_rows`)."""

    incumbent: Verification
    exact: Fraction
    value: float
    representable: bool
    rows: RowPropagator


class _GaveUp(Exception):
    pass


class _Search:
    def __init__(self, problem: Problem, incumbent: Verification | None, deadline: Deadline,
                 settings: Settings) -> None:
        if settings.highs_cuts_after > 0 and remembered(problem, ahead=True) is not None:
            settings = replace(settings, highs_cuts_after=0)  # computed while the solve ran: free now
        self.problem, self.settings, self.deadline = problem, settings, deadline
        self.lp = Relaxation(problem)
        self.binaries = np.flatnonzero(problem.binary)
        self.pure = self.binaries.size == problem.num_vars
        self.integral = problem.integral_objective
        self.best = incumbent if incumbent is not None and incumbent.ok else None
        n = self.binaries.size
        self.pc_sum = np.zeros((2, n))
        self.pc_count = np.zeros((2, n))
        self.nodes = self.fixings = 0
        cutting = settings.cut_rounds or settings.node_cut_rounds
        rows = knapsack_rows(problem) if cutting or settings.propagation else []
        self.covers = CoverSeparator(rows if cutting else [])
        self.rows = RowPropagator(rows if settings.propagation else [])
        self.proofs = DualProofs(problem.num_vars, settings.dual_proofs if settings.propagation else 0)
        self.closed_by_propagation = self.fixed_by_propagation = 0
        self.queue: list[tuple[float, int, _Node]] = []
        self.pushed = 0  # nodes ever queued: their order among equal estimates
        self.cuts: list[Cut] = []  # every cut the LP took, in order
        self._cutoff: _Cutoff | None = None
        self.current: _Node | None = None
        self.start = time.monotonic()

    # ----------------------------------------------------------------- pruning
    def cutoff(self) -> _Cutoff | None:
        """What the incumbent prunes (None without one); kept until the incumbent changes."""
        if self.best is None:
            return None
        if self._cutoff is None or self._cutoff.incumbent is not self.best:
            exact_t = self.best.objective - 1 if self.integral else self.best.objective
            rows = cutoff_rows(self.problem, self.best.objective) if self.settings.propagation else []
            self._cutoff = _Cutoff(self.best, exact_t, float(exact_t), Fraction(float(exact_t)) == exact_t,
                                   RowPropagator(rows))
        return self._cutoff

    def prunes(self, bound: float) -> bool:
        cut = self.cutoff()
        if cut is None or not math.isfinite(bound):
            return False
        if cut.representable:  # float64 compares exactly
            return bound > cut.value if self.integral else bound >= cut.value
        return Fraction(bound) > cut.exact if self.integral else Fraction(bound) >= cut.exact

    def prunes_all(self, bounds: np.ndarray) -> np.ndarray:
        """:meth:`prunes`, elementwise (exact: float comparisons only where they are)."""
        cut = self.cutoff()
        if cut is None:
            return np.zeros(bounds.shape, dtype=bool)
        t = cut.value
        if cut.representable:
            return np.isfinite(bounds) & ((bounds > t) if self.integral else (bounds >= t))
        screen = bounds >= math.nextafter(t, -math.inf)
        return screen & np.vectorize(self.prunes, otypes=[bool])(np.where(screen, bounds, -math.inf))

    def offer(self, x: np.ndarray) -> None:
        v = verify(self.problem, x)
        if v.ok and (self.best is None or v.objective < self.best.objective):
            self.best = v

    # ------------------------------------------------------------- propagation
    def propagated(self, fixed: np.ndarray) -> np.ndarray | None:
        """``fixed`` with what propagation deduces; None when it closes the node."""
        if not self.settings.propagation:
            return fixed
        cut = self.cutoff()
        lb, ub = self.bounds(fixed)
        deducers = [self.rows.deduce, *([cut.rows.deduce] if cut is not None else []),
                    lambda lo, hi: self.proofs.deduce(lo, hi, self.binaries, self.prunes_all)]
        if not propagate(lb, ub, deducers):
            self.closed_by_propagation += 1
            return None
        out = fixed.copy()
        out[(fixed == -1) & (lb[self.binaries] == 1)] = 1
        out[(fixed == -1) & (ub[self.binaries] == 0)] = 0
        self.fixed_by_propagation += int(np.count_nonzero(out != fixed))
        return out

    def keep_proof(self, duals: np.ndarray) -> None:
        if self.settings.propagation and self.settings.dual_proofs:
            self.proofs.add(self.lp.dual_parts(duals))

    # ------------------------------------------------------------------- nodes
    def bounds(self, fixed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        lb = np.array(self.problem.lb, dtype=np.float64)
        ub = np.array(self.problem.ub, dtype=np.float64)
        on, off = fixed == 1, fixed == 0
        lb[self.binaries[on]] = 1.0
        ub[self.binaries[off]] = 0.0
        return lb, ub

    def solve(self, fixed: np.ndarray) -> tuple[LpAnswer, np.ndarray, np.ndarray]:
        left = self.deadline.seconds_left(0.0)
        if left is not None and left <= 0:
            raise _GaveUp(f"time limit after {self.nodes} nodes")
        if self.nodes >= self.settings.max_nodes:
            raise _GaveUp(f"node limit ({self.settings.max_nodes})")
        if self.lp.lps >= self.settings.max_lps:
            raise _GaveUp(f"LP limit ({self.settings.max_lps}) after {self.nodes} nodes")
        lb, ub = self.bounds(fixed)
        answer = self.lp.solve(lb, ub, math.inf if left is None else left, warm=self.settings.warm_start)
        return answer, lb, ub

    def add_root_cuts(self, fixed: np.ndarray) -> None:
        """Rounds of cover cuts against the root LP point, while they raise its value."""
        if not self.covers.rows:
            return
        last = -math.inf
        for _ in range(self.settings.cut_rounds):
            answer, _, _ = self.solve(fixed)
            if answer.status != "optimal" or answer.value < last + 1e-6 * max(1.0, abs(last)):
                return
            last = answer.value
            assert answer.x is not None
            cuts = self.covers.separate(answer.x)
            if not cuts:
                return
            self.add_cuts(cuts)

    def add_highs_cuts(self) -> None:
        """HiGHS's root cuts on the problem (its rounds), those a single row proves (the rest dropped)."""
        left = self.deadline.seconds_left(0.0)
        try:
            cuts = proven_root_cuts(self.problem, math.inf if left is None else left,
                                    self.settings.highs_cut_rounds)
        except (ImportError, AttributeError):  # a HiGHS without the cut-pool callback
            return
        self.add_cuts(cuts)

    def add_cuts(self, cuts: list[Cut]) -> None:
        """Cuts (valid for every solution) into the LP and the propagated rows."""
        self.lp.add_cuts(cuts)
        self.cuts += cuts
        if self.settings.propagation:
            self.rows.add([KnapsackRow(c.cols, c.coefs, c.rhs, False) for c in cuts])

    def run(self, start: Sequence[_Node] = (), until_open: int = 0) -> list[_Node]:
        """Explore from the root (from the nodes ``start`` when given) until every node is
        closed (returns []); with ``until_open``, stop once that many nodes are open and
        HiGHS's cuts are in (when due) and return them, every one unexplored."""
        queue = self.queue
        node: _Node | None = None
        for waiting in start:
            self.push(waiting)
        if not start:
            node = _Node(np.full(self.binaries.size, -1, dtype=np.int8), -math.inf)
            if self.settings.cut_rounds:
                self.add_root_cuts(node.fixed)
        while True:
            if (until_open and len(queue) + (node is not None) >= until_open
                    and self.nodes > self.settings.highs_cuts_after):
                return [waiting for _, _, waiting in queue] + ([node] if node is not None else [])
            if node is None:
                while queue:
                    _, _, candidate = heapq.heappop(queue)
                    if not self.prunes(candidate.estimate):
                        node = candidate
                        break
                if node is None:
                    return []
            if self.nodes == self.settings.highs_cuts_after:
                self.add_highs_cuts()
            self.current = node
            children = self.process(node)
            node = None
            if children:
                node = children[0]
                for child in children[1:]:
                    self.push(child)

    def push(self, node: _Node) -> None:
        """Queue ``node``: by its estimate (best first), or last in first out (depth first)."""
        key = -self.pushed if self.settings.depth_first else node.estimate
        heapq.heappush(self.queue, (key, self.pushed, node))
        self.pushed += 1

    def process(self, node: _Node) -> list[_Node]:
        """Solve ``node``; the children to explore (the first to dive into)."""
        self.nodes += 1
        fixed = node.fixed
        rounds = self.settings.node_cut_rounds
        while True:  # repeated when strong branching fixes a variable
            narrowed = self.propagated(fixed)
            if narrowed is None:
                return []
            fixed = narrowed
            answer, lb, ub = self.solve(fixed)
            free = fixed == -1
            if answer.status == "unknown":  # no bound: the node is split (leaves are verified)
                if self.deadline.passed():
                    raise _GaveUp(f"time limit after {self.nodes} nodes")
                return self.fallback_branch(fixed)
            if answer.status == "infeasible":
                if self.lp.proves_infeasible(answer.ray, lb, ub):
                    return []
                return self.fallback_branch(fixed)
            assert answer.x is not None and answer.duals is not None
            self.learn(node, answer.value)
            bound, r = self.lp.safe_bound(answer.duals, lb, ub)
            if self.prunes(bound):
                self.keep_proof(answer.duals)
                return []
            if rounds > 0 and self.covers.rows:
                rounds -= 1
                cuts = self.covers.separate(answer.x, min_violation=0.05)
                if cuts:
                    self.add_cuts(cuts)
                    continue
            xb = answer.x[self.binaries]
            integral = np.all(np.minimum(np.abs(xb), np.abs(1 - xb)) <= 1e-9)
            if integral and self.pure:
                self.offer(np.round(answer.x))
                if self.prunes(bound) or not free.any():
                    return []
            if not free.any():  # HiGHS's point may stray from fixed bounds by its tolerance
                return self.fallback_branch(fixed)
            if self.settings.reduced_cost_fixing and self.best is not None:
                fixed = self.fix_by_reduced_costs(fixed, bound, r)
                free = fixed == -1
                if not free.any():
                    continue  # a leaf now: its LP decides it
            distance = np.minimum(xb - 0.0, 1.0 - xb)
            fractional = np.flatnonzero(free & (distance > _FRACTIONAL))
            if fractional.size == 0:
                return self.fallback_branch(fixed, answer.x)
            choice = self.choose(fractional, xb, answer.value, fixed)
            if choice is None:  # both sides of a candidate pruned: so is the node
                return []
            if isinstance(choice, np.ndarray):  # strong branching fixed some: solve again
                fixed = choice
                continue
            k = choice
            f = float(xb[k])
            first = 1 if f >= 0.5 else 0
            children = []
            for side in (first, 1 - first):
                child = fixed.copy()
                child[k] = side
                children.append(_Node(child, bound, (k, side, f if side == 0 else 1 - f, answer.value)))
            return children

    def outcome(self, proven: bool, why: str = "") -> SearchOutcome:
        return SearchOutcome(proven, self.best, self.nodes, self.lp.lps, self.fixings,
                             time.monotonic() - self.start, why, self.closed_by_propagation,
                             self.fixed_by_propagation, None if proven else self.open_bound())

    def open_bound(self) -> float | None:
        """The lowest safe bound among the nodes left open (None: unknown, or none open)."""
        estimates = [n.estimate for _, _, n in self.queue] + ([self.current.estimate] if self.current else [])
        low = min(estimates, default=math.inf)
        return low if math.isfinite(low) else None

    def fix_by_reduced_costs(self, fixed: np.ndarray, bound: float, r: np.ndarray) -> np.ndarray:
        """``fixed`` plus the free binaries whose other side the safe bound prunes."""
        rb = r[self.binaries]
        free = fixed == -1
        raised = np.nextafter(bound + np.abs(rb), -np.inf)  # the real bound with the side flipped
        fixing = free & (rb != 0) & self.prunes_all(raised)
        if not fixing.any():
            return fixed
        fixed = fixed.copy()
        fixed[fixing] = np.where(rb[fixing] > 0, 0, 1)
        self.fixings += int(fixing.sum())
        return fixed

    def learn(self, node: _Node, value: float) -> None:
        if node.branched is None:
            return
        k, side, fraction, parent = node.branched
        if fraction > 0 and math.isfinite(value) and math.isfinite(parent):
            self.pc_sum[side, k] += max(value - parent, 0.0) / fraction
            self.pc_count[side, k] += 1

    def pseudo_costs(self) -> np.ndarray:
        known = self.pc_count > 0
        mean = np.array([self.pc_sum[s][known[s]].sum() / max(known[s].sum(), 1) for s in (0, 1)])
        mean = np.where(mean > 0, mean, 1.0)
        return np.where(known, self.pc_sum / np.maximum(self.pc_count, 1), mean[:, None])

    def choose(self, fractional: np.ndarray, xb: np.ndarray, value: float, fixed: np.ndarray
               ) -> int | np.ndarray | None:
        """The binary to branch on, ``fixed`` with variables strong branching fixed, or
        None when strong branching pruned both sides of one (the node is closed)."""
        pc = self.pseudo_costs()
        f = xb[fractional]
        score = np.maximum(pc[0, fractional] * f, 1e-6) * np.maximum(pc[1, fractional] * (1 - f), 1e-6)
        order = fractional[np.argsort(-score, kind="stable")]
        unreliable = self.pc_count.min(axis=0) < self.settings.reliability
        unknown = order[unreliable[order]][:self.settings.strong_candidates].tolist()
        if not unknown or self.best is None:
            return int(order[0])
        best_k, best_score = int(order[0]), -1.0
        changed = fixed.copy()
        for k in unknown:
            gains = []
            for side in (0, 1):
                trial = changed.copy()
                trial[k] = side
                answer, tlb, tub = self.solve(trial)
                fraction = float(xb[k]) if side == 0 else 1.0 - float(xb[k])
                if answer.status == "infeasible" and self.lp.proves_infeasible(answer.ray, tlb, tub):
                    gains.append(math.inf)
                    continue
                if answer.status != "optimal":
                    gains.append(0.0)
                    continue
                assert answer.duals is not None
                if self.prunes(self.lp.safe_bound(answer.duals, tlb, tub)[0]):
                    self.keep_proof(answer.duals)
                    gains.append(math.inf)
                    continue
                gain = max(answer.value - value, 0.0)
                self.pc_sum[side, k] += gain / max(fraction, 1e-9)
                self.pc_count[side, k] += 1
                gains.append(gain)
            if math.isinf(gains[0]) and math.isinf(gains[1]):
                return None
            if math.isinf(gains[0]) or math.isinf(gains[1]):
                changed[k] = 1 if math.isinf(gains[0]) else 0
                continue
            score_k = max(gains[0], 1e-6) * max(gains[1], 1e-6)
            if score_k > best_score:
                best_k, best_score = k, score_k
        if not np.array_equal(changed, fixed):
            return changed
        return best_k

    def fallback_branch(self, fixed: np.ndarray, x: np.ndarray | None = None) -> list[_Node]:
        """Branch when the LP gives no fractional binary (an LP point on a strict row, or an
        infeasibility HiGHS did not prove): on a free binary of a row the rounded LP point
        violates exactly; a violated row with none free (binaries only) closes the node.
        Binaries only and at most :data:`LEAF_ENUMERATION` free: every point of the node is
        decided exactly instead (HiGHS may answer no LP of a badly scaled problem).

        The node is ``fixed`` as it is now, which may hold more than the LP that gave ``x``
        (reduced-cost fixing after it): its bounds and the point are taken from ``fixed``."""
        free = np.flatnonzero(fixed == -1)
        lb, _ = self.bounds(fixed)
        if self.pure and free.size <= LEAF_ENUMERATION:
            points = np.repeat(lb[None, :], 1 << free.size, axis=0)
            points[:, self.binaries[free]] = pattern_bits(free.size)
            found = best_point(self.problem, points, below=None if self.best is None else self.best.objective)
            if found is not None:
                self.best = found
            return []
        if free.size == 0:
            raise _GaveUp("a node with every binary fixed is not closed by its LP")
        k = int(free[0])
        if x is not None:
            point = np.round(x) if self.pure else x.copy()
            settled = self.binaries[fixed != -1]
            point[settled] = lb[settled]  # 0 or 1, as fixed
            violated = np.flatnonzero(~decide_rows(self.problem, point[None, :]).holds[0])
            position = np.full(self.problem.num_vars, -1)
            position[self.binaries] = np.arange(self.binaries.size)
            for i in violated.tolist():
                A = self.problem.A
                support = position[A.indices[A.indptr[i]:A.indptr[i + 1]]]
                support = support[support >= 0]
                open_ = support[fixed[support] == -1]
                if open_.size:
                    k = int(open_[0])
                    break
                if self.pure:  # the row's activity is the same at every point of the node
                    return []
        children = []
        for side in (0, 1):
            child = fixed.copy()
            child[k] = side
            children.append(_Node(child, -math.inf))
        return children


def search_in_one_process(problem: Problem, incumbent: Verification | None, deadline: Deadline,
                          settings: Settings) -> SearchOutcome:
    """:func:`~smug_opt.safe_search.parallel.search` in this process alone (``settings.workers``
    not read)."""
    s = _Search(problem, incumbent, deadline, settings)
    try:
        s.run()
    except _GaveUp as stop:
        return s.outcome(False, str(stop))
    return s.outcome(True)
