"""The search over masks smaller than a known one, for the whole-network encoder: one pass
over every mask of 0, 1, 2, … cells, while they are few enough, that both finds the first
size with a mask the float64 network accepts (greedy can miss the optimum) and, once the
problem's output rows are known, proves the sizes it evaluated in full ruled out.

Rigour: every layer's float64 values lie within a per-neuron bound ``E`` of the network's
exact values, for every mask evaluated. A linear layer adds its sums' rounding
(:func:`~smug_opt.exact.dot_error_bound` over the largest magnitude any evaluated mask gave,
or over the whole input for a layer that reads it) to ``|W|·E``; ReLU, clip and max
pooling do not enlarge it (1-Lipschitz); leaky ReLU and residual sums add their own
rounding. The problem's output rows lie within a given deviation of the network's exact ones
(:attr:`~smug_opt.encode.network_milp.NetworkEncoding.row_deviation`). A size is ruled out
when even its mask closest to acceptance fails an output row by more than all of it. One
bound over all evaluated masks, instead of one per mask, keeps the pass at the cost of the
float64 evaluation: a mask within that margin of acceptance only ends the proof at its size.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from smug_opt.bounds.rounding import ACCUMULATED
from smug_opt.encode.enumeration import MAX_ENUMERATED_MASKS, batched_combinations, mask_count
from smug_opt.encode.incremental import (
    IncrementalMasks,
    incremental_pays,
    incremental_work,
    linear_error_terms,
)
from smug_opt.encode.masked import MaskedNetwork, cell_masks
from smug_opt.exact import UNIT_ROUNDOFF, dot_error_bound

__all__ = ["SEARCH_WORK", "SmallMasks", "mask_slack", "searched_sizes", "smaller_masks"]

SEEDS = 64
"""How many of the largest size's best masks the search keeps (:attr:`SmallMasks.best`)."""

SEARCH_WORK = 2e10
"""Work (:attr:`~smug_opt.encode.masked.MaskedNetwork.mask_work` units) the search may
spend: it takes the sizes whose masks, counted from size 0, fit. A count, so that the
sizes it proves never depend on the machine's load: every mask of up to 2 of VeriVital's
max-pool CNN's ~200 cells (7e9, 10-30 s at load 8-10), not its 1.3M masks of 3 (5e11);
1 of cifar10_small's 1,024."""


@dataclass(frozen=True, eq=False)
class SmallMasks:
    """What :func:`smaller_masks` found.

    ``found``: the first mask the float64 network accepts, of the fewest cells, or None;
    ``closest``: per size evaluated in full (0, 1, …), the largest worst-row slack
    ``min_r (out_rows·scores − out_rhs)_r`` among its masks; ``row_error``: per output row,
    a bound on a float64 slack's distance to the network's exact one, over every mask
    evaluated; ``best``: the kept cells ``(rows, size)`` of the last size evaluated in full,
    its :data:`SEEDS` masks of largest worst-row slack, best first (a beam's seeds);
    ``evaluator``: the incremental evaluator the search used, for a later search on the
    same network (:func:`mask_slack`), or None where it evaluated masks directly."""

    found: np.ndarray | None
    closest: tuple[float, ...]
    row_error: np.ndarray
    best: np.ndarray = field(default_factory=lambda: np.zeros((1, 0), dtype=np.int64))
    evaluator: IncrementalMasks | None = None

    def proven_minimum(self, below: int, row_deviation: np.ndarray) -> int:
        """A proven lower bound on the cells of any mask the problem accepts, from the sizes
        below ``below`` evaluated in full: the first one a mask may satisfy the rows at, else
        how many were evaluated (0 when none). ``row_deviation``: per output row, how far
        the problem's slack may lie from the network's."""
        margin = float(np.max((self.row_error + row_deviation) * ACCUMULATED, initial=0.0))
        for k, value in enumerate(self.closest[:below]):
            if value >= -margin:
                return k
        return min(below, len(self.closest))


INCREMENTAL_SEARCH_WORK = 7e10
""":data:`SEARCH_WORK` for incremental evaluation (:func:`~smug_opt.encode.incremental.incremental_work`
units), whose count weighs the layers it computes directly as dense products at full cost
while they run as BLAS products: on ``cifar10_small`` it evaluates a mask of 2 cells 5×
faster than the direct pass (67 against 351 µs at load 9) for a count only 1.8× lower
(116k against 206k), so 7e10 takes about the time 2e10 of direct evaluation does; it
reaches every mask of up to 2 of its 1,024 cells (6.1e10)."""


def searched_sizes(network: MaskedNetwork) -> int:
    """How many mask sizes (0, 1, …) the search may evaluate in full on ``network``: those
    whose masks, counted from size 0, fit the budget (:data:`SEARCH_WORK`, or
    :data:`INCREMENTAL_SEARCH_WORK` where the evaluation is incremental, each mask's work as
    its evaluator counts it) and :data:`MAX_ENUMERATED_MASKS`."""
    n = network.num_cells
    incremental = incremental_pays(network)
    budget = INCREMENTAL_SEARCH_WORK if incremental else SEARCH_WORK
    total = 0.0
    for k in range(n + 1):
        work = incremental_work(network, k) if incremental else network.mask_work
        total += math.comb(n, k) * max(work, 1.0)
        if total > budget or mask_count(n, k) > MAX_ENUMERATED_MASKS:
            return k
    return n + 1


def smaller_masks(network: MaskedNetwork, below: int, max_masks: int | None = None) -> SmallMasks:
    """Every mask of ``0, 1, …`` cells, fewer than ``below``, evaluated once, for the sizes
    that fit the search's budget (:func:`searched_sizes`) and whose masks counted from size 0
    number at most ``max_masks``; it stops at the first size with a mask the float64 network
    accepts (the batch's best such mask is ``found``). Chain networks whose changes stay
    sparse are evaluated incrementally (:class:`~smug_opt.encode.incremental.IncrementalMasks`),
    others directly. Deterministic: no wall-clock budget."""
    n = network.num_cells
    sizes = searched_sizes(network)
    evaluator = IncrementalMasks(network) if incremental_pays(network) else None
    rows = network.batch_rows()
    largest = [np.zeros(layer.size) for layer in network.net.layers]  # max |value| seen per neuron
    tracked = _magnitudes_needed(network)
    closest: list[float] = []
    found = None
    seeds = np.zeros((1, 0), dtype=np.int64)
    for k in range(min(below, n + 1, sizes)):
        if max_masks is not None and mask_count(n, k) > max_masks:
            break
        best = -math.inf
        leaders = _Leaders(k)
        for idx in batched_combinations(n, k, rows=rows):
            if evaluator is not None:
                scores = evaluator.scores(idx, largest)
            else:
                values = network.values(cell_masks(idx, n))
                for layer in tracked:
                    np.maximum(largest[layer], np.abs(values[layer]).max(axis=0), out=largest[layer])
                scores = values[-1]
            slack = (scores @ network.out_rows.T - network.out_rhs).min(axis=1)
            best = max(best, float(slack.max()))
            leaders.add(idx, slack)
            if slack.max() > network.tolerance:
                found = cell_masks(idx[int(np.argmax(slack))][None, :], n)[0]
                break
        if found is not None:
            break
        closest.append(best)
        seeds = leaders.cells
    incremental = frozenset() if evaluator is None else evaluator.incremental
    return SmallMasks(found, tuple(closest), _row_error(network, largest, incremental), seeds, evaluator)


class _Leaders:
    """The :data:`SEEDS` masks of one size with the largest slack seen so far (ties: the
    first seen, so the result does not depend on batch sizes)."""

    def __init__(self, size: int) -> None:
        self.cells = np.zeros((0, size), dtype=np.int64)
        self.slack = np.zeros(0)

    def add(self, idx: np.ndarray, slack: np.ndarray) -> None:
        cells = np.vstack([self.cells, idx])
        slacks = np.concatenate([self.slack, slack])
        order = np.argsort(-slacks, kind="stable")[:SEEDS]
        self.cells, self.slack = cells[order], slacks[order]


def mask_slack(network: MaskedNetwork, evaluator: IncrementalMasks | None
               ) -> tuple[Callable[[np.ndarray], np.ndarray], Callable[[int], float]]:
    """How the search evaluates masks, for others to reuse: the worst-row slack of masks
    given as kept cells ``(batch, k)``, and one mask of ``k`` cells' work
    (:attr:`~smug_opt.encode.masked.MaskedNetwork.mask_work` units), with ``evaluator``
    (:attr:`SmallMasks.evaluator`), else direct
    (:meth:`~smug_opt.encode.masked.MaskedNetwork.cells_slack`)."""
    if evaluator is None:
        return network.cells_slack, lambda k: network.mask_work
    scratch = [np.zeros(layer.size) for layer in network.net.layers]  # magnitudes: not needed here

    def slack(idx: np.ndarray) -> np.ndarray:
        scores = evaluator.scores(idx, scratch)
        return (scores @ network.out_rows.T - network.out_rhs).min(axis=1)

    return slack, lambda k: incremental_work(network, k)


def _magnitudes_needed(network: MaskedNetwork) -> list[int]:
    """The layers (after the input) whose values' magnitudes :func:`_row_error` reads: those
    a linear layer reads, residual sums, leaky ReLUs and the scores."""
    layers = network.net.layers
    needed = {len(layers) - 1}
    for k, layer in enumerate(layers):
        if layer.kind == "linear":
            needed.add(layer.inputs[0])
        elif layer.kind in ("add", "leaky_relu"):
            needed.add(k)
    return sorted(needed - {0})


def _row_error(network: MaskedNetwork, largest: list[np.ndarray], incremental: frozenset[int]
               ) -> np.ndarray:
    """Per output row, a bound on a float64 slack's distance to the exact one over masks
    whose float64 values never exceed ``largest`` in magnitude (on the layers
    :func:`_magnitudes_needed` names, the empty mask's included; layer 0: the input, whose
    masked values ``xa·m`` are exact and at most ``|xa|``); the linear layers in
    ``incremental`` computed from their input's change
    (:func:`~smug_opt.encode.incremental.linear_error_terms`)."""
    layers = network.net.layers
    largest = [np.abs(network.xa), *largest[1:]]
    errors: list[np.ndarray] = [np.zeros(network.xa.size)]
    for layer in layers[1:]:
        source = layer.inputs[0]
        e = errors[source]
        if layer.kind == "linear":
            W, bias = layer.affine  # a layer on the input: its original weights over |xa|
            absolute = abs(sp.csr_matrix(W))
            terms = np.diff(sp.csr_matrix(W).indptr) + 1
            if len(errors) in incremental:
                terms = linear_error_terms(terms)
            magnitude = np.asarray(absolute @ largest[source]).reshape(-1) + np.abs(bias)
            err = np.asarray(absolute @ e).reshape(-1) + dot_error_bound(terms, magnitude)
        elif layer.kind == "add":
            err = e + errors[layer.inputs[1]] + 2 * UNIT_ROUNDOFF * largest[len(errors)]
        elif layer.kind == "maxpool":
            err = np.concatenate([e, [0.0]])[layer.pool_windows].max(axis=1)
        elif layer.kind in ("relu", "clip"):
            err = e
        elif layer.kind == "leaky_relu":
            err = max(1.0, abs(layer.alpha)) * e + 2 * UNIT_ROUNDOFF * largest[len(errors)]
        else:
            raise ValueError(f"no rule for flat layer kind {layer.kind!r}")
        errors.append(np.asarray(err, dtype=np.float64))
    D = np.abs(network.out_rows)
    magnitude = D @ largest[-1] + np.abs(network.out_rhs)
    return (D @ errors[-1] + dot_error_bound(D.shape[1] + 1, magnitude)) * ACCUMULATED
