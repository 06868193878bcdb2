"""The stress case: the smallest input mask that keeps a whole ReLU MLP's prediction.

``min Σ_c M_c`` over cell binaries ``M`` such that, with ``z1 = W1ᵀ(M⊙x) + b1``,
``h_k = relu(z_k)``, ``z_{k+1} = W_{k+1}ᵀ h_k + b_{k+1}``, the label's logit beats every
other logit strictly (softmax and sigmoid are monotone, so logits are compared). The mask
applies to the first Dense layer's input; pixels that are zero there get no variable.

Kept as one module for now: the MLP reading (``MLP``, ``as_mlp``, ``verify_mask_in_model``)
is due to move into ``models/`` (issue 13), which brings this module under 400 lines.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from smug_opt.encode.bounds import NetworkBounds, network_bounds
from smug_opt.encode.enumeration import MAX_ENUMERATED_MASKS, combination_chunks, mask_count
from smug_opt.ir import Problem, ProblemBuilder
from smug_opt.models.grid import regular_grid
from smug_opt.models.mlp import MLP, as_mlp
from smug_opt.verification import verify

ENCODING_VERSION = 2
"""Bumped whenever :func:`full_network` builds other problems from the same inputs (2:
masks of fewer cells than the greedy one tried, ``min_cells`` from the affordable sizes);
cached suites of its problems carry it in their version, so they are rebuilt."""

__all__ = ["full_network", "solution_mask"]

_BOUND_MODES = ("lp", "interval", "none")


def full_network(model_or_layers: Any, x: np.ndarray, label: int | None = None, cell: int = 1, *,
                 bounds: str = "lp", margin: float = 0.0, shape: tuple[int, int] | None = None,
                 max_cells: int | str | None = "greedy", strengthen: bool = True,
                 name: str | None = None) -> Problem:
    """The stress-case problem for input ``x`` (any shape with as many values as the first
    Dense layer has inputs, after the model's Flatten/Rescaling).

    One binary per ``cell``×``cell`` block of the grid (``shape``, else ``x``'s first two
    axes, else one row) that holds a nonzero input; channels share it. ``label`` defaults
    to the model's float64 prediction on ``x``. Rows ``logit[label] − logit[l] > margin``
    for every ``l ≠ label``. ``bounds``: ``"lp"`` (interval then LP, see
    :mod:`smug_opt.encode.bounds`), ``"interval"``, or ``"none"`` (no pre-activation bounds
    declared and no neuron eliminated; variable boxes from interval arithmetic).

    ``max_cells`` adds the row ``Σ M <= K``, which cannot change the optimum when a mask of
    ``K`` cells is feasible, and lets the bounds count only ``K`` cells' contributions:
    ``"greedy"`` takes ``K`` from a greedy mask, or from a smaller one found by trying every
    mask of fewer cells while they are few enough to enumerate (the mask is checked in exact
    arithmetic against the problem and dropped if it fails), an int is taken as given, None
    adds no row.
    """
    mlp = as_mlp(model_or_layers, name)
    if bounds not in _BOUND_MODES:
        raise ValueError(f"bounds must be one of {', '.join(_BOUND_MODES)}, got {bounds!r}")
    if not (isinstance(cell, (int, np.integer)) and cell >= 1):
        raise ValueError(f"cell must be a positive int, got {cell!r}")
    if not np.isfinite(margin) or margin < 0:
        raise ValueError(f"margin must be a finite number >= 0, got {margin!r}")
    xa = mlp.dense_input(x)
    grid = mlp.mask_grid(cell, np.shape(x), shape)
    height, width = grid.spatial_shape[:2]
    channels = xa.size // (height * width)
    logits = mlp.logits(xa[None, :])
    label = _check_label(mlp, logits, label)

    # first layer over cells: A1[c, j] = Σ_{i in cell c} W1[i, j]·x_i, nonzero inputs only
    pixel_cell = grid.cell_of
    nonzero = np.flatnonzero(xa != 0)
    cells, member = np.unique(pixel_cell[nonzero], return_inverse=True)
    W1, b1 = mlp.layers[0]
    P = sp.csr_matrix((np.ones(nonzero.size), (member, np.arange(nonzero.size))),
                      shape=(cells.size, nonzero.size))
    A1 = np.asarray(P @ (xa[nonzero, None] * W1[nonzero]))
    hidden = list(mlp.layers[1:-1])
    W_out, b_out = mlp.layers[-1] if len(mlp.layers) > 1 else (A1, b1)
    out_rows, out_rhs = _output_rows(W_out, b_out, label, margin)

    network = _Network(A1, b1, hidden, out_rows, out_rhs, has_hidden=len(mlp.layers) > 1)
    greedy = network.greedy_mask() if max_cells == "greedy" else None
    candidates = [] if greedy is None else [network.fewer_cells(greedy)]
    if candidates and candidates[0].sum() < greedy.sum():
        candidates.append(greedy)  # the greedy mask, should exact arithmetic reject the smaller
    start = None
    for mask in candidates:  # the first mask exact arithmetic accepts is the start and cut-off
        limit = _cell_limit(max_cells, mask)
        builder, nb, neurons = network.build(bounds, limit, strengthen)
        if verify(builder.build(), np.concatenate([mask, np.zeros(builder.num_vars - mask.size)])).ok:
            start = mask
            break
    if start is None:  # float64 accepted masks exact arithmetic rejects (or none): no cut-off
        limit = _cell_limit(max_cells, None)
        builder, nb, neurons = network.build(bounds, limit, strengthen)
    builder.metadata.update({
        "encoding": "full-network",
        "model": mlp.name,
        "model_digest": mlp.digest,
        "layer_sizes": [mlp.num_inputs, *(int(W.shape[1]) for W, _ in mlp.layers)],
        "output_activation": mlp.output,
        "label": label,
        "predicted": int(mlp.predicted(logits)[0]),
        "margin": float(margin),
        "cell": int(cell),
        "grid": [height, width],
        "channels": channels,
        "cells": cells.tolist(),
        "nonzero_inputs": int(nonzero.size),
        "bounds": bounds,
        "greedy_cells": None if start is None else int(start.sum()),
        **({} if start is None else {"start": start.astype(int).tolist()}),  # solve's start
        "max_cells": limit,
        "strengthen": strengthen,
        "neurons": neurons,
        "unstable": int(sum(v["unstable"] for v in neurons)),
        "stable": int(sum(v["active"] + v["dead"] for v in neurons)),
        "bound_seconds": 0.0 if nb is None else nb.interval_seconds + nb.lp_seconds,
        "lps": 0 if nb is None else nb.lps,
        "min_cells": 0 if nb is None else nb.min_ones,
    })
    return builder.build()


def _cell_limit(max_cells: int | str | None, greedy: np.ndarray | None) -> int | None:
    if max_cells is None or max_cells == "greedy":
        return None if greedy is None else int(greedy.sum())
    if isinstance(max_cells, bool) or not isinstance(max_cells, (int, np.integer)) or max_cells < 0:
        raise ValueError(f"max_cells must be 'greedy', None or an int >= 0, got {max_cells!r}")
    return int(max_cells)


@dataclass(frozen=True, eq=False)
class _Network:
    """The masked network over cell binaries: ``z1 = A1ᵀM + b1``, later hidden layers,
    and output rows ``out_rows·v > out_rhs`` over the last hidden outputs (or over ``M``
    when there is no hidden layer)."""

    A1: np.ndarray
    b1: np.ndarray
    hidden: list[tuple[np.ndarray, np.ndarray]]
    out_rows: np.ndarray
    out_rhs: np.ndarray
    has_hidden: bool

    def slack(self, masks: np.ndarray) -> np.ndarray:
        """The smallest ``out_rows·v − out_rhs`` of each mask (a row of ``masks``), float64."""
        value = masks
        if self.has_hidden:
            value = np.maximum(masks @ self.A1 + self.b1, 0.0)
            for W, b in self.hidden:
                value = np.maximum(value @ W + b, 0.0)
        return (value @ self.out_rows.T - self.out_rhs).min(axis=1)

    @property
    def tolerance(self) -> float:
        """The output slack above which the float64 network is taken to accept a mask."""
        return 1e-9 * (1.0 + float(np.abs(self.out_rhs).max(initial=0.0)))

    def fewer_cells(self, mask: np.ndarray) -> np.ndarray:
        """``mask``, or the first mask of fewer cells the float64 network accepts, trying
        every mask of 0, 1, 2, … cells while their number fits
        :data:`~smug_opt.encode.enumeration.MAX_ENUMERATED_MASKS` (greedy can miss the optimum)."""
        n = self.A1.shape[0]
        for k in range(int(mask.sum())):
            if mask_count(n, k) > MAX_ENUMERATED_MASKS:
                break
            for idx in combination_chunks(n, k):
                trials = np.zeros((idx.shape[0], n))
                np.put_along_axis(trials, idx, 1.0, axis=1)
                slack = self.slack(trials)
                if slack.max() > self.tolerance:
                    return trials[int(np.argmax(slack))]
        return mask

    def greedy_mask(self) -> np.ndarray | None:
        """A small mask the float64 network accepts: add the cell that raises the worst
        output slack most until all are positive, then drop cells while that lasts.
        None if even the full mask fails."""
        n = self.A1.shape[0]
        tol = self.tolerance
        mask = np.zeros(n)
        while self.slack(mask[None, :])[0] <= tol:
            free = np.flatnonzero(mask == 0)
            if free.size == 0:
                return None
            trials = np.repeat(mask[None, :], free.size, axis=0)
            trials[np.arange(free.size), free] = 1.0
            mask[free[np.argmax(self.slack(trials))]] = 1.0
        while True:
            kept = np.flatnonzero(mask)
            if kept.size == 0:
                return mask
            trials = np.repeat(mask[None, :], kept.size, axis=0)
            trials[np.arange(kept.size), kept] = 0.0
            slack = self.slack(trials)
            if slack.max() <= tol:
                return mask
            mask[kept[np.argmax(slack)]] = 0.0

    def build(self, bounds: str, limit: int | None, strengthen: bool
              ) -> tuple[ProblemBuilder, NetworkBounds | None, list[dict[str, Any]]]:
        """A builder holding the problem (metadata still to add), its bounds and neuron counts."""
        n = self.A1.shape[0]
        builder = ProblemBuilder()
        binaries = builder.add_binaries(n)
        builder.set_objective(binaries, 1.0)
        if limit is not None:
            builder.add_constraints(np.ones((1, n)), binaries, "<=", float(limit))
        nb = None
        last, keep, neurons = binaries, np.ones(n, dtype=bool), []
        if self.has_hidden:
            nb = network_bounds(self.A1, self.b1, self.hidden, self.out_rows, self.out_rhs,
                                "interval" if bounds == "none" else bounds, max_ones=limit)
            last, keep, neurons = _add_hidden(builder, binaries, self.A1, self.b1, self.hidden, nb,
                                              declare=bounds != "none", strengthen=strengthen)
            if nb.min_ones > 0 and bounds != "none":  # enumeration proved smaller masks fail
                builder.add_constraints(np.ones((1, n)), binaries, ">=", float(nb.min_ones))
        builder.add_constraints(self.out_rows[:, keep], last, ">", self.out_rhs)
        return builder, nb, neurons


def _check_label(mlp: MLP, logits: np.ndarray, label: int | None) -> int:
    n_classes = max(mlp.num_outputs, 2)
    if label is None:
        top = logits[0]
        tied = top[0] == 0 if mlp.num_outputs == 1 else np.count_nonzero(top == top.max()) > 1
        if tied:
            raise ValueError(f"the model's logits on x tie for the top class ({top.tolist()}); "
                             f"give label explicitly")
        return int(mlp.predicted(logits)[0])
    if isinstance(label, bool) or not isinstance(label, (int, np.integer)) or not 0 <= label < n_classes:
        raise ValueError(f"label must be an int in [0, {n_classes}), got {label!r}")
    return int(label)


def _output_rows(W: np.ndarray, b: np.ndarray, label: int, margin: float) -> tuple[np.ndarray, np.ndarray]:
    """Rows ``D·v >= d`` meaning ``logit[label] − logit[l] > margin`` for ``l ≠ label``,
    where ``logits = Wᵀv + b`` (a single sigmoid output: ``±logit > margin``)."""
    if W.shape[1] == 1:
        sign = 1.0 if label == 1 else -1.0
        return sign * W.T, np.array([margin - sign * b[0]])
    others = np.delete(np.arange(W.shape[1]), label)
    return W[:, label][None, :] - W[:, others].T, margin - (b[label] - b[others])


def _add_hidden(builder: ProblemBuilder, binaries: np.ndarray, A1: np.ndarray, b1: np.ndarray,
                hidden: Sequence[tuple[np.ndarray, np.ndarray]], nb: NetworkBounds, *, declare: bool,
                strengthen: bool) -> tuple[np.ndarray, np.ndarray, list[dict[str, Any]]]:
    """Add every hidden layer's ReLUs (without the neurons the bounds prove dead, unless
    ``declare`` is off), layer by layer in neuron order. Returns the last layer's output
    variables, which of its neurons they are, and per layer the counts of dead, active and
    unstable neurons and the indices of the neurons kept (one ReLU each)."""
    prev_vars, prev_kept = binaries, np.ones(A1.shape[0], dtype=bool)
    neurons: list[dict[str, Any]] = []
    for k, (W, b) in enumerate([(A1, b1), *hidden]):
        lo, hi = nb.lo[k], nb.hi[k]
        dead, active = hi <= 0, lo >= 0
        kept = ~dead if declare else np.ones(lo.size, dtype=bool)
        out = builder.add_continuous(int(kept.sum()), np.maximum(lo[kept], 0.0), np.maximum(hi[kept], 0.0))
        weights = W[prev_kept]
        builder.add_relus(out, weights[:, kept].T, prev_vars, b[kept],
                          lo=lo[kept] if declare else -np.inf, hi=hi[kept] if declare else np.inf)
        # a neuron that only output-aware bounds prove dead is held off by a row, so that
        # every mask the reduced network accepts is one the real network accepts
        cut = dead & (nb.global_hi[k] > 0) if declare else np.zeros(lo.size, dtype=bool)
        if cut.any():
            builder.add_constraints(weights[:, cut].T, prev_vars, "<=", -b[cut])
        if strengthen:
            _add_upper_cuts(builder, out[~active[kept]], weights[:, kept & ~active], b[kept & ~active],
                            prev_vars)
        neurons.append({"layer": k, "n": int(lo.size), "dead": int(dead.sum()),
                        "active": int(active.sum()), "unstable": int((~dead & ~active).sum()),
                        "kept": np.flatnonzero(kept).tolist()})
        prev_vars, prev_kept = out, kept
    return prev_vars, prev_kept, neurons


def _add_upper_cuts(builder: ProblemBuilder, outputs: np.ndarray, weights: np.ndarray, b: np.ndarray,
                    inputs: np.ndarray) -> None:
    """Rows ``h_j − Σ_i max(0, w_ij)·v_i <= max(0, b_j)`` for ReLUs ``h_j`` of nonnegative
    inputs ``v`` (binaries or earlier ReLU outputs). They hold for every input, since
    ``max(0, b + Σ w v) <= max(0, b) + Σ max(0, w) v`` when ``v >= 0``, but big-M's LP
    relaxation misses them: it can raise ``h`` through a fractional phase variable alone.
    """
    if outputs.size == 0:
        return
    coefficients = np.hstack([np.eye(outputs.size), -np.maximum(weights, 0.0).T])
    builder.add_constraints(coefficients, np.concatenate([outputs, inputs]), "<=", np.maximum(b, 0.0))


def solution_mask(problem: Problem, values: np.ndarray) -> np.ndarray:
    """The boolean ``(H, W)`` pixel mask that a solution of a :func:`full_network`
    problem keeps (binaries 0..n_cells-1 are the cells listed in its metadata)."""
    meta = problem.metadata
    if meta.get("encoding") != "full-network":
        raise ValueError("solution_mask needs a problem built by full_network")
    height, width = meta["grid"]
    cell = int(meta["cell"])
    cells = np.asarray(meta["cells"], dtype=np.int64)
    values = np.asarray(values, dtype=np.float64).reshape(-1)
    kept = cells[np.round(values[: cells.size]) == 1]
    pixel_cell = regular_grid((height, width), cell).cell_of.reshape(height, width)
    return np.isin(pixel_cell, kept)
