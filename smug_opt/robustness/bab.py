"""Branch and bound over ReLU splits (β-CROWN style) for one disjunct of a robustness query
on a :class:`~smug_opt.bounds.relu_chain.ReluChain`.

A domain is the box with some unstable ReLUs fixed active or inactive. Each is bounded by
:func:`~smug_opt.bounds.alpha_crown.optimise` (α and β, warm-started from its parent's):
a domain where some row of the disjunct is rigorously positive (non-negative for a strict
row) holds no counterexample and is closed. The others are split by filtered smart
branching (:mod:`~smug_opt.robustness.bab_domains`): the ``CANDIDATES`` unsplit unstable
neurons with the largest BaBSR-like scores (the bound lost
to the neuron's relaxation: the upper chord's intercept times the negative part of its
coefficient, plus the lower slope's gap times the positive part) each give two children
bounded once with the parent's α and β, and the neuron whose worse child bounds best is
split (on ``mnistfc`` 256x2 prop_1_0.03: 2.5x fewer domains than the top score alone),
in batches, depth first (the queue stays short; every domain is closed before ``unsat`` is
said, so the order only changes how soon a counterexample shows). From the box corners that
minimise the open domains' bounds (each tried), a short gradient descent from the weakest
domains' (each one's corner for its row with the largest bound, the hardest to meet) looks
for a counterexample (float64 forward pass of the chain); the caller confirms it on the model.
A domain with every unstable ReLU split (the chain is affine on it) that the bounds leave
open has its LP's optimum tried as a counterexample; if that fails it stays open (the
answer can no longer be ``unsat``) while the search goes on among the others.
The intervals of the layers below stay those of the whole box (valid on every subdomain;
the split neurons' own are the split's half), or with ``refine_layers`` each child's are
re-bounded above its split (:mod:`~smug_opt.bounds.refine`; off by default: on ``mnistfc``
256x4 prop_0_0.03 disjunct 7, 1,979 domains in 15.2 CPU s against 3,395 in 13.4 s), and
with ``shallow_first`` the shallowest layer's neurons are split first (FSB among them):
then each split tightens every layer above it, which closes the deep ``mnistfc`` disjuncts
that splitting by score leaves open (``verify`` uses both; see
:mod:`~smug_opt.robustness.decide`).

An ``unsat`` answer returns the closed leaves of its tree (:class:`Leaves`; a search cut by
the time limit, its closed and open ones): split decisions do not depend on the box, so
the leaves of a tree cover any box, and a
later search over another box (the next query of an explanation) may start from them
(``start``) with their α and β: leaves whose splits contradict a neuron the new box makes
stable are dropped (the sibling subtrees cover their points), the others bounded at once.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from enum import Enum

import numpy as np
import torch

from smug_opt.bounds.alpha_crown import optimise
from smug_opt.bounds.refine import refine
from smug_opt.bounds.relu_chain import ChainBounds
from smug_opt.deadline import Deadline
from smug_opt.robustness.bab_domains import Domains, Stack
from smug_opt.threads import one_thread

__all__ = ["BabResult", "Leaves", "Unfinished", "branch_and_bound", "default_steps"]

BATCH = 128
"""Domains split per round (each gives two)."""
ROOT_STEPS = 60
STEPS_PER_LAYER = 5
"""α/β steps per new domain, from its parent's α and β (a split's β starts at 0), for each
ReLU layer beyond the first (at least 5). On ``mnistfc`` 256x4 prop_0_0.03 (CPU seconds of
this process, load ~9): disjunct 4 closed with 1,223 domains in 4.0 s with 5 steps, 347 in
2.4 s with 10, 273 in 2.9 s with 20; disjunct 0 open after 7.9 s (6,641 domains) with 5,
closed in 3.8 s (431) with 15; disjunct 7 open after 14.5 s with 10, closed in 11.1 s
(3,395) with 15. On 256x2 prop_1_0.03 15 steps closed the nine disjuncts with the same
domains as 5, in 13 s instead of 8."""


DESCENTS = 8
"""Open domains per round whose corner starts a descent towards a counterexample (every
open domain's corner is tried as it is)."""
DESCENT_STEPS = 10
DESCENT_SIZE = 0.1
"""The descent's first step, as a share of the box's width (then decaying linearly)."""
MAX_DOMAINS = 200_000
"""Open domains kept at most (then ``unknown``)."""
MAX_LEAVES = 1024
"""Closed leaves an ``unsat`` answer returns at most (a larger tree returns none)."""
MAX_OPEN_LEAVES = 4096
"""Open domains a search cut by its time limit returns at most, to be continued from
(bounded in one batch)."""


def default_steps(bounds: ChainBounds) -> int:
    """α/β steps per new domain on ``bounds``' chain (see :data:`STEPS_PER_LAYER`)."""
    return STEPS_PER_LAYER * max(1, len(bounds.chain.widths) - 1)


@dataclass(frozen=True, eq=False)
class Leaves:
    """Domains of a finished tree: ``splits[i]`` ``(B, n_i)`` in {-1, 0, 1} per ReLU layer,
    and the α and β ``(B, R, n_i)`` that bounded each."""

    splits: list[torch.Tensor]
    alphas: list[torch.Tensor]
    betas: list[torch.Tensor]

    @property
    def count(self) -> int:
        return int(self.splits[0].shape[0])

    def for_box(self, bounds: ChainBounds) -> Leaves:
        """The leaves still needed over ``bounds``' box: those whose splits agree with
        every neuron it makes stable (see the module docstring)."""
        keep = torch.ones(self.count, dtype=torch.bool)
        for i, s in enumerate(self.splits):
            keep &= ~torch.any(((s < 0) & (bounds.lo[i] >= 0)) | ((s > 0) & (bounds.hi[i] <= 0)), dim=-1)
        return Leaves([t[keep] for t in self.splits], [t[keep] for t in self.alphas],
                      [t[keep] for t in self.betas])


class Unfinished(Enum):
    """Why a search ended ``"unknown"``."""

    TIME_LIMIT = "time limit"
    WORK_LIMIT = "work limit"
    DOMAIN_LIMIT = "domain limit"
    LINEAR_REGIONS_OPEN = "linear regions open"


@dataclass(frozen=True)
class BabResult:
    """``status``: ``"unsat"`` (every domain closed: no counterexample in the disjunct),
    ``"candidate"`` (``x``, an affine input whose float64 chain outputs lie in the
    disjunct, to confirm) or ``"unknown"`` (``unfinished`` says why, ``message`` in words)."""

    status: str
    seconds: float
    domains: int
    x: np.ndarray | None = None
    message: str = ""
    unfinished: Unfinished | None = None
    leaves: Leaves | None = None
    """For ``unsat``, the tree's closed leaves; for ``unknown`` at the time or work limit (no
    linear region left open), its closed and open ones, which cover the box too; None beyond
    :data:`MAX_LEAVES`."""
    open_leaves: Leaves | None = None
    """For ``unknown`` at the time or work limit (no linear region left open), the open domains: a
    later search of the same box and disjunct started from them (``start``) finishes this
    one; None beyond :data:`MAX_OPEN_LEAVES`."""


def _refuted(bound: torch.Tensor, strict: torch.Tensor) -> torch.Tensor:
    """Per domain: whether some row's lower bound shows the disjunct unreachable."""
    return torch.any(torch.where(strict, bound >= 0, bound > 0), dim=-1)


def branch_and_bound(bounds: ChainBounds, matrix: np.ndarray, rhs: np.ndarray, strict: np.ndarray,
                     deadline: Deadline, *, batch: int = BATCH, root_steps: int = ROOT_STEPS,
                     steps: int | None = None, start: Leaves | None = None,
                     work: int | None = None, refine_layers: int | None = 0,
                     shallow_first: bool = False) -> BabResult:
    """Decide whether some input of ``bounds``' box has chain outputs ``y`` with
    ``matrix·y <= rhs`` (``<`` on the ``strict`` rows), by branch and bound (``root_steps``:
    α-CROWN's steps on the root domain, before any split; ``steps``: on each new domain,
    by default :func:`default_steps`;
    ``start``: domains bounded instead of the root: the leaves of an earlier ``unsat`` tree
    of the same disjunct over another box, or the :attr:`~BabResult.open_leaves` of a search
    of this box cut by its time limit; ``work``: domains bounded at most (beside the root or
    the ``start``'s, bounded first), a limit that does not depend on the clock: the search
    then ends as at the time limit, with its leaves;
    ``refine_layers``: how many layers above each new split have their intervals re-bounded
    per domain (:func:`~smug_opt.bounds.refine.refine`; 0: none, the box's serve every
    domain; None: all); ``shallow_first``: split the shallowest layer's unstable neurons
    first (FSB among them), for use with ``refine_layers``: each split then tightens every
    layer above it)."""
    with one_thread():
        return _branch_and_bound(bounds, matrix, rhs, strict, deadline, batch, root_steps,
                                 default_steps(bounds) if steps is None else steps, start, work,
                                 refine_layers, shallow_first)


def _branch_and_bound(bounds: ChainBounds, matrix: np.ndarray, rhs: np.ndarray, strict: np.ndarray,
                      deadline: Deadline, batch: int, root_steps: int, steps: int,
                      warm: Leaves | None, work: int | None, refine_layers: int | None,
                      shallow_first: bool) -> BabResult:
    start = time.monotonic()
    refining = refine_layers is None or refine_layers > 0
    top = len(bounds.chain.weights) - 1
    C = torch.from_numpy(np.array(matrix, dtype=np.float64))
    d = torch.from_numpy(np.array(rhs, dtype=np.float64))
    strict_t = torch.from_numpy(np.array(strict, dtype=bool))
    R = C.shape[0]
    widths = bounds.chain.widths

    def done(status: str, count: int, **kw) -> BabResult:
        return BabResult(status, time.monotonic() - start, count, **kw)

    def reaches(x: torch.Tensor) -> torch.Tensor:
        y = bounds.forward(x)
        excess = y @ C.T - d
        return torch.all(torch.where(strict_t, excess < 0, excess <= 0), dim=-1)

    closed: list[tuple[list[torch.Tensor], list[torch.Tensor], list[torch.Tensor]]] = []
    closed_count = 0
    count, stuck = 0, 0
    stack = Stack(bounds, C, d, shallow_first)

    def close(s, a, b, keep: torch.Tensor) -> None:
        """Keep the closed domains ``keep`` of a bounded batch, while the leaves stay few."""
        nonlocal closed_count
        closed_count += int(keep.numel())
        if closed_count <= MAX_LEAVES and keep.numel():
            closed.append(([t[keep] for t in s], [t[keep].to(torch.float32) for t in a],
                           [t[keep].to(torch.float32) for t in b]))

    def bound_batch(s, a, b, n_steps: int, parents: Domains | None = None) -> BabResult | None:
        """Bound the domains ``s`` (warm α ``a``, β ``b``; children of ``parents``, if
        given): close the refuted, try the others' corners and descents, push the rest; a
        candidate, if one reaches the disjunct."""
        nonlocal count
        on = bounds
        if refining and parents is not None:  # each child's intervals re-bounded above its split
            inherited = parents.child_intervals()
            start_from = bounds if inherited is None else bounds.per_domain(*inherited)
            on = refine(start_from, s, parents.choice[0].repeat(2), layers=refine_layers)
        elif refining and any(bool(torch.any(t != 0)) for t in s):  # a start's leaves: all their splits
            on = refine(bounds, s, torch.zeros(s[0].shape[0], dtype=torch.long), layers=refine_layers)
        found = optimise(on, top, C, d, steps=n_steps, alphas=a, betas=b, splits=s,
                         stop_above=torch.zeros(R, dtype=torch.float64), deadline=deadline)
        count += s[0].shape[0]
        refuted = _refuted(found.bound, strict_t)
        close(s, found.alphas, found.betas or b, torch.nonzero(refuted).flatten())
        if bool(refuted.all()):
            return None
        keep = torch.nonzero(~refuted).flatten()
        subset = [t[keep] for t in s]
        open_alphas = [t[keep] for t in found.alphas]
        open_betas = None if found.betas is None else [t[keep] for t in found.betas]
        on = on.select(keep)
        corners = on.minimiser(top, C, open_alphas, open_betas, subset)
        every = corners.reshape(-1, corners.shape[-1])  # (domains x rows, n_in)
        hit = torch.nonzero(reaches(every)).flatten()
        if hit.numel():
            return done("candidate", count, x=every[int(hit[0])].numpy().copy())
        open_bound = found.bound[keep]
        worst = torch.argsort(open_bound.max(dim=-1).values)[:DESCENTS]  # nearest a counterexample
        binding = open_bound[worst].argmax(dim=-1)  # each one's row hardest to meet: its corner starts
        x = _descend(bounds, C, d, strict_t, corners[worst, binding])
        if x is not None:
            return done("candidate", count, x=x)
        stack.push(subset, open_alphas, [t[keep] for t in b] if open_betas is None else open_betas,
                   open_bound, [t[keep] for t in found.coefficients], on)
        return None

    warm = None if warm is None else warm.for_box(bounds)
    if warm is not None and warm.count:
        first = bound_batch(warm.splits, [t.to(torch.float64) for t in warm.alphas],
                            [t.to(torch.float64) for t in warm.betas], steps)
    else:  # the root: no split yet
        first = bound_batch([torch.zeros(1, n, dtype=torch.int8) for n in widths],
                            [bounds.initial_alpha(i, 1, R) for i in range(top)],
                            [torch.zeros(1, R, n, dtype=torch.float64) for n in widths], root_steps)
    if first is not None:
        return first
    while stack.size:
        spent = work is not None and count + 2 > work  # a split bounds two children
        if spent or deadline.passed():  # the closed and open leaves cover the box: the next search's start
            partial = None if stuck else _leaves(closed + stack.domains(), closed_count + stack.size)
            still = None if stuck else _leaves(stack.domains(), stack.size, limit=MAX_OPEN_LEAVES)
            why = Unfinished.WORK_LIMIT if spent else Unfinished.TIME_LIMIT
            return done("unknown", count, message=f"{why.value} ({stack.size} domains open)",
                        unfinished=why, leaves=partial, open_leaves=still)
        if stack.size > MAX_DOMAINS:
            return done("unknown", count, message=f"over {MAX_DOMAINS} domains open",
                        unfinished=Unfinished.DOMAIN_LIMIT)
        parents = stack.pop(batch if work is None else max(1, min(batch, (work - count) // 2)))
        linear = parents.choice[0] < 0
        if bool(linear.any()):  # linear regions: each LP's optimum is a candidate, if any
            for x in _linear_region_points(bounds, parents, matrix, rhs):
                if bool(reaches(torch.from_numpy(x)[None])[0]):
                    return done("candidate", count, x=x)
            stuck += int(linear.sum())  # left open: no unsat, but the search goes on
            parents = parents.subset(~linear)
            if parents.choice[0].numel() == 0:
                continue
        candidate = bound_batch(*parents.children(), steps, parents)
        if candidate is not None:
            return candidate
    if stuck:
        return done("unknown", count, message=f"{stuck} domains with every ReLU split stay open",
                    unfinished=Unfinished.LINEAR_REGIONS_OPEN)
    return done("unsat", count, leaves=_leaves(closed, closed_count))


def _leaves(closed, count: int, limit: int = MAX_LEAVES) -> Leaves | None:
    """The domains ``closed`` (per batch: splits, α, β), joined (None beyond ``limit``)."""
    if count > limit or not closed:
        return None
    fields = zip(*closed, strict=True)  # splits, alphas, betas: per batch, a list over layers
    return Leaves(*[[torch.cat(parts) for parts in zip(*field, strict=True)] for field in fields])


def _descend(bounds: ChainBounds, C: torch.Tensor, d: torch.Tensor, strict: torch.Tensor,
             starts: torch.Tensor, steps: int = DESCENT_STEPS) -> np.ndarray | None:
    """A short projected sign-gradient descent on the disjunct's worst row from each start
    (the corners minimising open domains' bounds: where counterexamples are likeliest);
    the first point whose float64 chain outputs reach the disjunct, if any."""
    width = bounds.x_hi - bounds.x_lo
    x = starts.clone()
    for step in range(steps + 1):
        x.requires_grad_(True)
        excess = bounds.forward(x) @ C.T - d
        reached = torch.all(torch.where(strict, excess < 0, excess <= 0), dim=-1)
        if bool(reached.any()):
            return x.detach()[int(torch.nonzero(reached)[0])].numpy().copy()
        if step == steps:
            break
        (grad,) = torch.autograd.grad(excess.max(dim=-1).values.sum(), x)
        size = DESCENT_SIZE * width * (1.0 - step / steps)
        x = torch.minimum(torch.maximum(x.detach() - size * grad.sign(), bounds.x_lo), bounds.x_hi)
    return None


def _linear_region_points(bounds: ChainBounds, domains: Domains, matrix: np.ndarray,
                          rhs: np.ndarray) -> list[np.ndarray]:
    """For each domain with no neuron left to split (the chain is affine on it): the input
    of the box, inside the splits' constraints, minimising the disjunct's first row with
    the others as constraints (HiGHS; a float point, to be checked)."""
    from scipy.optimize import linprog

    points = []
    x_lo, x_hi = bounds.x_lo.numpy(), bounds.x_hi.numpy()
    for b in torch.nonzero(domains.choice[0] < 0).flatten().tolist():
        A, c = np.eye(x_lo.size), np.zeros(x_lo.size)  # the current layer's input: A·x + c
        rows, limits = [], []
        for i, (W, bias) in enumerate(zip(bounds.chain.weights[:-1], bounds.chain.biases[:-1], strict=True)):
            zA, zc = np.asarray(W.numpy() @ A), np.asarray(W.numpy() @ c) + bias.numpy()
            split = domains.splits[i][b].numpy()
            lo = bounds.lo[i] if domains.intervals is None else domains.intervals[0][i][b]
            on = (lo.numpy() >= 0) | (split > 0)
            sign = np.where(split > 0, -1.0, np.where(split < 0, 1.0, 0.0))  # active: -z <= 0
            fixed = sign != 0
            rows.append(sign[fixed, None] * zA[fixed])
            limits.append(-sign[fixed] * zc[fixed])
            A, c = on[:, None] * zA, on * zc
        W, bias = bounds.chain.weights[-1].numpy(), bounds.chain.biases[-1].numpy()
        out_A, out_c = matrix @ np.asarray(W @ A), matrix @ (np.asarray(W @ c) + bias)
        rows.append(out_A[1:])
        limits.append(rhs[1:] - out_c[1:])
        result = linprog(out_A[0], A_ub=np.vstack(rows), b_ub=np.concatenate(limits),
                         bounds=list(zip(x_lo, x_hi, strict=True)), method="highs")
        if result.status == 0:
            points.append(np.clip(result.x, x_lo, x_hi))
    return points

