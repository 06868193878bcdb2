"""The stress case: the smallest input mask that keeps a whole network's prediction.

``min Σ_c M_c`` over cell binaries ``M`` such that the network, run on the affine input
(what its first affine layer reads) with the cells outside ``M`` set to 0, scores the label
above every other class by more than a margin (softmax and sigmoid are monotone, so class
scores are compared). The network is a :class:`~smug_opt.network.flat.FlatNetwork` (dense
and convolutional layers, ReLU, leaky ReLU, clip, max pooling, residual sums; a ReLU on
the scores is part of it), or a ReLU MLP (Keras Dense stack, ``(W, b)`` layers) read into
one. Inputs that are zero in ``x`` get no binary. The constraints are built by
:mod:`smug_opt.encode.network_milp`, bounds come from :mod:`smug_opt.encode.layer_bounds`,
the start mask from :mod:`smug_opt.encode.masks`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from smug_opt.encode.flat_enumeration import SmallMasks, mask_slack, searched_sizes, smaller_masks
from smug_opt.encode.incremental import incremental_pays
from smug_opt.encode.layer_bounds import (
    BOUND_METHODS,
    DEFAULT_BOUNDS,
    LayerBounds,
    layer_bounds,
    minimum_size,
)
from smug_opt.encode.masked import MaskedNetwork, flat_digest, flat_mlp
from smug_opt.encode.masks import BEAM_WIDTH, beam_mask, greedy_mask
from smug_opt.encode.network_milp import encode_network
from smug_opt.encode.pattern_milp import encode_patterns, pattern_applies
from smug_opt.errors import ParameterError
from smug_opt.ir import Problem, ProblemBuilder
from smug_opt.models.base import top_tie
from smug_opt.models.grid import regular_grid
from smug_opt.network.flat import FlatNetwork, Preprocess
from smug_opt.network.graph import Network
from smug_opt.network.lower import lower
from smug_opt.verification import verify

ENCODING_VERSION = 14
"""Bumped whenever :func:`full_network` builds other problems from the same inputs (2:
masks of fewer cells than the greedy one tried, ``min_cells`` from the affordable sizes;
3: one encoder over flat networks, layer values as expressions over the variables;
4: propagated bounds on the network on its cells, proven minimum sizes on any network;
5: crown proves minimum sizes on MLPs too, the searches over small masks have time budgets;
6: bounds widened by the coefficients' proven rounding instead of a relative margin;
7: a beam search for a mask smaller than greedy's where the smaller ones are too many to try;
8: the minimum-size proofs may spend 5e9 multiply-adds on MLPs (was 2e9), 45 s elsewhere (was 20);
9: one pass over the smaller masks both searches and proves, with error bounds over all of them;
10: the small-mask search and the beam search budgeted by work counts only, no seconds;
11: one-hidden-layer networks of local neurons encoded by subset binaries, no ReLUs;
12: chain networks' small masks evaluated incrementally within their own budget (cifar10_small: every
mask of up to 2 cells), an MLP's minimum size counting its output rows' rounding;
13: on those chain networks, a beam search grown from the small-mask search's best masks of its
largest size, evaluated incrementally, where the smaller masks are too many to enumerate;
14: no binary for a cell whose inputs reach no output (cifar10_small: 124 of its 1,024 cells));
cached suites of its problems carry it in their version, so they are rebuilt."""

BEAM_WORK = 5e9
"""Work (:attr:`~smug_opt.encode.masked.MaskedNetwork.mask_work` units) for the beam search
for a smaller mask where the smaller masks are too many to enumerate
(:func:`~smug_opt.encode.masks.beam_mask`): its width is what fits, at most
:data:`~smug_opt.encode.masks.BEAM_WIDTH` (64 on 784-256-256-10, about 2 s, where it finds the
3-pixel masks greedy misses; about 23 on VeriVital's max-pool CNN), and it is skipped below
:data:`MIN_BEAM_WIDTH`. A work count, not seconds, so that the start mask never depends on
load. Chain networks evaluated incrementally (``cifar10_small``) take the seeded beam of
:data:`SEEDED_BEAM_WORK` instead."""

MIN_BEAM_WIDTH = 16

SEEDED_BEAM_WORK = 1.2e11
"""Work (:func:`~smug_opt.encode.flat_enumeration.mask_slack`'s units) for the beam search
that grows the search's best masks of its largest size (:attr:`SmallMasks.best
<smug_opt.encode.flat_enumeration.SmallMasks.best>`) on chain networks evaluated
incrementally, at width :data:`~smug_opt.encode.masks.BEAM_WIDTH`: the sizes it may try
are those whose masks, counted from the seeds' size up, fit: on ``cifar10_small`` (1,024 cells,
seeds of 2) the masks of 3 to 15 cells, about 65k a size at 70-120 µs each."""

__all__ = ["ENCODING_VERSION", "TiedPrediction", "full_network", "predicted_label", "solution_mask"]


@dataclass(frozen=True, eq=False)
class _Subject:
    """The network to encode and what the problem's metadata says about it."""

    net: FlatNetwork
    xa: np.ndarray
    cell_of: np.ndarray
    grid: tuple[int, int]
    name: str
    digest: str
    layer_sizes: list[int]


def full_network(model_or_layers: Any, x: np.ndarray, label: int | None = None, cell: int = 1, *,
                 bounds: str = DEFAULT_BOUNDS, margin: float = 0.0, shape: tuple[int, int] | None = None,
                 max_cells: int | str | None = "greedy", strengthen: bool = True,
                 name: str | None = None, preprocess: Preprocess | None = None) -> Problem:
    """The stress-case problem for input ``x``.

    ``model_or_layers``: a :class:`~smug_opt.network.flat.FlatNetwork` (``x`` its affine
    input, or the model's input mapped by ``preprocess``; masks act on the ``(H, W)``
    cells of an input of shape ``(C, H, W)``, channels sharing a cell), a
    :class:`~smug_opt.network.graph.Network` as the readers give it (``x`` its input in its
    own layout; lowered here, its preprocessing applied), a ReLU MLP (a Keras Dense stack
    or ``(W, b)`` layers; ``x`` any shape with as many values as the first Dense layer
    reads, after the model's Flatten/Rescaling; the grid is ``shape``, else ``x``'s first
    two axes, else one row), or any other model smug-opt reads (a Keras CNN, a
    ``torch.nn.Module``, a model file or embedded name: its Network, by
    :func:`~smug_opt.models.resolve.network_of`).

    One binary per ``cell``×``cell`` block that holds a nonzero input. ``label`` defaults
    to the network's float64 prediction on ``x``. Rows ``score[label] − score[l] > margin``
    for every ``l ≠ label``. ``bounds``: one of
    :data:`~smug_opt.encode.layer_bounds.BOUND_METHODS` (see
    :mod:`smug_opt.encode.layer_bounds`).

    ``max_cells`` adds the row ``Σ M <= K``, which cannot change the optimum when a mask of
    ``K`` cells is feasible, and lets the bounds count only ``K`` cells' contributions:
    ``"greedy"`` takes ``K`` from a greedy mask, or from a smaller one found by trying every
    mask of fewer cells while they are few enough to enumerate (the same pass proves the
    sizes it rules out), else by a beam search (the
    mask is checked in exact arithmetic against the problem and dropped if it fails), an int
    is taken as given, None adds no row.
    """
    if bounds not in BOUND_METHODS:
        raise ValueError(f"bounds must be one of {', '.join(BOUND_METHODS)}, got {bounds!r}")
    if not (isinstance(cell, (int, np.integer)) and cell >= 1):
        raise ParameterError("cell", f"must be a positive int, got {cell!r}")
    if not np.isfinite(margin) or margin < 0:
        raise ValueError(f"margin must be a finite number >= 0, got {margin!r}")
    subject = _subject(model_or_layers, x, cell, shape, name, preprocess)
    net, xa = subject.net, subject.xa
    scores = net.forward(xa[None, :])[-1]
    label = _check_label(scores, label)
    network = MaskedNetwork.build(net, xa, subject.cell_of, label, margin)

    greedy = greedy_mask(network) if max_cells == "greedy" else None
    search = None if greedy is None else smaller_masks(network, int(greedy.sum()))
    candidates: list[np.ndarray] = []
    if greedy is not None and search is not None:
        candidates.append(greedy if search.found is None else search.found)
    below = 0 if greedy is None else int(greedy.sum())
    if below > 1 and searched_sizes(network) < below and search is not None:
        if incremental_pays(network):
            if search.found is None:
                candidates = [_seeded_beam(network, candidates[0], search)]
        else:
            levels = network.num_cells * (below - 1)
            width = min(BEAM_WIDTH, network.affordable_masks(BEAM_WORK) // max(levels, 1))
            if width >= MIN_BEAM_WIDTH:
                candidates = [beam_mask(network, candidates[0], width)]
    if greedy is not None and candidates[0].sum() < greedy.sum():
        candidates.append(greedy)  # the greedy mask, should exact arithmetic reject the smaller
    start = None
    for mask in candidates:  # the first mask exact arithmetic accepts is the start and cut-off
        limit = _cell_limit(max_cells, mask)
        built = _build(network, bounds, limit, strengthen, search)
        if verify(built.builder.build(), built.start(mask)).ok:
            start = mask
            break
    if start is None:  # float64 accepted masks exact arithmetic rejects (or none): no cut-off
        limit = _cell_limit(max_cells, None)
        built = _build(network, bounds, limit, strengthen, search)
    builder, lb, neurons = built.builder, built.bounds, built.neurons
    builder.metadata.update({
        "encoding": "full-network",
        "encoding_version": ENCODING_VERSION,
        "model": subject.name,
        "model_digest": subject.digest,
        "layer_sizes": subject.layer_sizes,
        "output_activation": net.output,
        "label": label,
        "predicted": _predicted(scores),
        "margin": float(margin),
        "cell": int(cell),
        "grid": list(subject.grid),
        "channels": xa.size // (subject.grid[0] * subject.grid[1]),
        "cells": network.cells.tolist(),
        "nonzero_inputs": int(np.count_nonzero(xa)),
        "bounds": bounds,
        "bounds_source": lb.source,
        "greedy_cells": None if start is None else int(start.sum()),
        **({} if start is None else {"start": _start_list(built.start(start), network.num_cells)}),
        "max_cells": limit,
        "strengthen": strengthen,
        "neurons": neurons,
        "maxpools": built.maxpools,
        "unstable": int(sum(v["unstable"] for v in neurons)),
        "stable": int(sum(v["active"] + v["dead"] for v in neurons)),
        "bound_seconds": lb.seconds,
        "lps": lb.lps,
        "min_cells": lb.min_ones,
    })
    return builder.build()


@dataclass(frozen=True, eq=False)
class _Built:
    """A builder holding the problem (metadata still to add), its bounds, neuron counts and
    max pools, and how a cell mask extends to all its variables (the rest 0, or recomputed
    by the verifier: ReLU outputs)."""

    builder: ProblemBuilder
    bounds: LayerBounds
    neurons: list[dict[str, Any]]
    maxpools: list[dict[str, Any]]
    start: Callable[[np.ndarray], np.ndarray]


def _build(network: MaskedNetwork, bounds: str, limit: int | None, strengthen: bool,
           search: SmallMasks | None) -> _Built:
    """The problem under the mask-size ``limit`` (``search``: the smaller masks already
    evaluated, None to evaluate them here): subset binaries where
    :func:`~smug_opt.encode.pattern_milp.pattern_applies`, else the ReLU encoding."""
    n = network.num_cells
    builder = ProblemBuilder()
    binaries = builder.add_binaries(n)
    builder.set_objective(binaries, 1.0)
    if limit is not None:
        builder.add_constraints(np.ones((1, n)), binaries, "<=", float(limit))
    if pattern_applies(network):
        return _build_patterns(builder, network, bounds, limit, search)
    lb = layer_bounds(network, bounds, max_ones=limit)
    encoding = encode_network(builder, network, lb, declare=lb.declared, strengthen=strengthen,
                              max_ones=limit)
    assert encoding.row_deviation is not None  # encode_network states its output rows
    lb = minimum_size(network, lb, limit, encoding.row_deviation, search)
    if lb.min_ones > 0 and lb.declared:  # enumeration proved smaller masks fail
        builder.add_constraints(np.ones((1, n)), binaries, ">=", float(lb.min_ones))
    return _Built(builder, lb, encoding.neurons, encoding.maxpools,
                  lambda mask: np.concatenate([mask, np.zeros(builder.num_vars - mask.size)]))


def _build_patterns(builder: ProblemBuilder, network: MaskedNetwork, bounds: str, limit: int | None,
                    search: SmallMasks | None) -> _Built:
    """The subset-binary encoding (:mod:`smug_opt.encode.pattern_milp`), its minimum size
    from the masks of fewer than ``limit`` cells against its own rows' deviation."""
    start = time.perf_counter()
    encoding = encode_patterns(builder, network)
    min_ones = 0
    if limit is not None:
        min_ones = (search or smaller_masks(network, limit)).proven_minimum(limit, encoding.row_deviation)
    if min_ones > 0:
        builder.add_constraints(np.ones((1, network.num_cells)), np.arange(network.num_cells), ">=",
                                float(min_ones))
    source = f"patterns ({len(encoding.groups)} cell sets)" + (
        f", sizes below {min_ones} ruled out" if min_ones else "")
    lb = LayerBounds(bounds, min_ones=min_ones, seconds=time.perf_counter() - start, source=source)
    return _Built(builder, lb, encoding.neurons, [], lambda mask: encoding.values(mask, builder.num_vars))


def _seeded_beam(network: MaskedNetwork, mask: np.ndarray, search: SmallMasks) -> np.ndarray:
    """``mask``, or a smaller accepted mask grown from the search's best masks of its largest
    size, for as many sizes as :data:`SEEDED_BEAM_WORK` pays."""
    slack, work = mask_slack(network, search.evaluator)
    size, spent, levels = search.best.shape[1], 0.0, 0
    while size + levels + 1 < mask.sum():
        spent += BEAM_WIDTH * network.num_cells * work(size + levels + 1)
        if spent > SEEDED_BEAM_WORK:
            break
        levels += 1
    if levels == 0:
        return mask
    return beam_mask(network, mask, BEAM_WIDTH, seeds=search.best, slack=slack, levels=levels)


def _start_list(values: np.ndarray, num_cells: int) -> list[int]:
    """The start as the problem's metadata keeps it: the cell mask alone when the binaries
    it sets are the cells (the rest recomputed), else every variable (all binaries)."""
    ints = np.round(values).astype(int)
    return ints[:num_cells].tolist() if not ints[num_cells:].any() else ints.tolist()


def _subject(model: Any, x: np.ndarray, cell: int, shape: tuple[int, int] | None, name: str | None,
             preprocess: Preprocess | None) -> _Subject:
    if isinstance(model, FlatNetwork):
        return _flat_subject(model, x, cell, shape, name, preprocess)
    if isinstance(model, Network):
        if preprocess is not None:
            raise ValueError("preprocess applies to a FlatNetwork; a Network carries its own")
        pre, flat = lower(model)
        if shape is None and len(flat.input_shape) == 1 and len(model.input_shape) == 3:
            return _image_mlp_subject(model, pre, flat, x, cell, name)
        return _flat_subject(flat, x, cell, shape, name or model.name, pre)
    from smug_opt.models.mlp import as_mlp

    if preprocess is not None:
        raise ValueError("preprocess applies to a FlatNetwork; a model reads its own input")
    try:
        mlp = as_mlp(model, name)
    except ValueError:  # not a Dense stack: a Keras CNN, a torch module, a model file
        if isinstance(model, (list, tuple)):
            raise
        from smug_opt.models.resolve import network_of

        return _subject(network_of(model), x, cell, shape, name, None)
    xa = mlp.dense_input(x)
    grid = mlp.mask_grid(cell, np.shape(x), shape)
    net = flat_mlp(mlp.layers, mlp.output)
    height, width = grid.spatial_shape[:2]
    return _Subject(net, xa, grid.cell_of, (height, width), mlp.name, mlp.digest,
                    [mlp.num_inputs, *(int(W.shape[1]) for W, _ in mlp.layers)])


def _flat_subject(net: FlatNetwork, x: np.ndarray, cell: int, shape: tuple[int, int] | None,
                  name: str | None, preprocess: Preprocess | None) -> _Subject:
    x = np.asarray(x)
    if x.dtype.kind not in "biuf" or not np.all(np.isfinite(x)):
        raise ValueError("x must be finite numbers")
    xa = (preprocess(x.reshape(1, -1))[0] if preprocess is not None
          else np.asarray(x, dtype=np.float64).reshape(-1))
    if xa.size != net.num_inputs:
        raise ValueError(f"x gives {xa.size} affine inputs (shape {x.shape}) but the network reads "
                         f"{net.num_inputs}")
    if len(net.input_shape) == 3:
        channels, height, width = net.input_shape
        if shape is not None and tuple(shape) != (height, width):
            raise ValueError(f"shape {shape} is not the network's input grid {(height, width)}")
    else:
        height, width = shape if shape is not None else (1, net.num_inputs)
        if height * width != net.num_inputs:
            raise ValueError(f"a {height}x{width} grid does not hold the {net.num_inputs} inputs")
        channels = 1
    pixel_cell = regular_grid((int(height), int(width)), cell).cell_of
    return _Subject(net, xa, np.tile(pixel_cell, channels), (int(height), int(width)),
                    name or "network", flat_digest(net), [layer.size for layer in net.layers])


def _image_mlp_subject(model: Network, pre: Preprocess, flat: FlatNetwork, x: np.ndarray, cell: int,
                       name: str | None) -> _Subject:
    """A network whose first affine layer is a Dense on an image input (an MLP on
    ``(C, H, W)`` or ``(H, W, C)``): its cells are the image's, each affine input in the cell
    of the pixel it comes from in the model's own layout (channels sharing a cell)."""
    last = model.source_layout == "channels_last"
    shape = model.input_shape
    spatial, channels = (shape[:2], shape[2]) if last else (shape[1:], shape[0])
    pixel = regular_grid(spatial, cell, channels if last else 1).cell_of
    model_cells = pixel if last else np.tile(pixel, channels)
    subject = _flat_subject(flat, x, 1, None, name or model.name, pre)
    return replace(subject, cell_of=model_cells[pre.index], grid=(int(spatial[0]), int(spatial[1])))


def _predicted(scores: np.ndarray) -> int:
    return int(scores[0, 0] > 0) if scores.shape[1] == 1 else int(np.argmax(scores[0]))


class TiedPrediction(ValueError):
    """The network's scores on an input tie for the top class: it predicts no label to keep."""


def predicted_label(model_or_layers: Any, x: np.ndarray, *, shape: tuple[int, int] | None = None,
                    preprocess: Preprocess | None = None) -> int:
    """The label :func:`full_network` keeps by default: the network's float64 prediction on
    ``x`` (arguments as there); :class:`TiedPrediction` when its scores tie for the top."""
    subject = _subject(model_or_layers, x, 1, shape, None, preprocess)
    return _check_label(subject.net.forward(subject.xa[None, :])[-1], None)


def _check_label(scores: np.ndarray, label: int | None) -> int:
    n_classes = max(scores.shape[1], 2)
    if label is None:
        # one logit s scores the two classes (0, s)
        tie = top_tie(np.concatenate([[0.0], scores[0]]) if scores.shape[1] == 1 else scores[0])
        if tie is not None:
            raise TiedPrediction(f"the model's logits on x tie for the top class ({tie}); "
                                 "give label explicitly")
        return _predicted(scores)
    if isinstance(label, bool) or not isinstance(label, (int, np.integer)) or not 0 <= label < n_classes:
        raise ValueError(f"label must be an int in [0, {n_classes}), got {label!r}")
    return int(label)


def _cell_limit(max_cells: int | str | None, greedy: np.ndarray | None) -> int | None:
    if max_cells is None or max_cells == "greedy":
        return None if greedy is None else int(greedy.sum())
    if isinstance(max_cells, bool) or not isinstance(max_cells, (int, np.integer)) or max_cells < 0:
        raise ValueError(f"max_cells must be 'greedy', None or an int >= 0, got {max_cells!r}")
    return int(max_cells)


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
