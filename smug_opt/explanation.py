"""SMUG explanations: Integrated Gradients pick first-layer neurons, a solver finds the
smallest mask that keeps them active, and the kept cells scored by those attributions form
the saliency map (Sahoo et al., "Scaling Symbolic Methods using Gradients for Neural Model
Explanation", ICLR 2021). ``smug_base`` skips the solver and keeps every cell in the
selected neurons' receptive fields.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from smug_opt.backend_choice import DEFAULT_BACKEND, BackendChoice
from smug_opt.parameters import Method, SmugParameters

if TYPE_CHECKING:
    from smug_opt.encode.first_layer import FirstLayerEncoding
    from smug_opt.ir import Problem
    from smug_opt.models.grid import CellGrid
    from smug_opt.models.integrated_gradients import Attribution
    from smug_opt.result import SolveResult

__all__ = ["METHODS", "Explanation", "display_scale", "explain"]

METHODS = tuple(m.value for m in Method)
"""The method names (kept for callers that check a name; :class:`Method` is the type)."""

@dataclass(frozen=True, eq=False)
class Explanation:
    """A mask and a saliency map for one input.

    ``mask`` (bool) and ``saliency`` (raw scores: the summed IG of the selected neurons
    whose receptive field covers a kept cell; 0 elsewhere) are drawn on the adapter's mask
    grid: ``(H, W)`` for images (also for an MLP that reads a picture), ``(T,)`` for text,
    ``(n,)`` for flat data (or the ``grid_shape`` asked for). Both are None when the
    solver returned no solution; ``result`` then says why. ``cell_mask`` is the solver's
    0/1 vector over cells.
    """

    method: str
    target: int
    mask: np.ndarray | None
    saliency: np.ndarray | None
    cell_mask: np.ndarray | None
    cell_scores: np.ndarray
    neurons: np.ndarray
    attributions: Attribution
    grid: CellGrid
    problem: Problem
    result: SolveResult | None
    params: Mapping[str, Any]
    times: Mapping[str, float] = field(default_factory=dict)
    fixed: np.ndarray | None = None
    """Cells kept by construction and not counted (``always_keep``, e.g. text padding)."""

    @property
    def ok(self) -> bool:
        return self.mask is not None

    @property
    def mask_size(self) -> int | None:
        """Kept cells, not counting the ``fixed`` ones (None without a mask)."""
        if self.cell_mask is None:
            return None
        free = self.cell_mask if self.fixed is None else self.cell_mask[~self.fixed]
        return int(free.sum())

    @property
    def sparsity(self) -> float | None:
        """Kept fraction of the input's grid points."""
        return None if self.mask is None else float(self.mask.mean())

    def record(self) -> dict[str, Any]:
        """A JSON-ready summary: parameters, solver outcome, sizes and times."""
        r = self.result
        return {
            "method": self.method, "target": self.target, **dict(self.params),
            "neurons_used": int(self.neurons.size), "cells": int(self.grid.num_cells),
            "cells_always_kept": 0 if self.fixed is None else int(self.fixed.sum()),
            "mask_size": self.mask_size, "sparsity": self.sparsity,
            "ig_completeness_error": float(self.attributions.completeness_error),
            "backend": None if r is None else r.backend,
            "solver": None if r is None else r.solver,
            "status": "NO_SOLVER" if r is None else r.status.name,
            "objective": None if r is None else r.objective,
            "bound": None if r is None else r.bound,
            "gap": None if r is None else r.gap,
            "verified": None if r is None else r.verified,
            "proof": None if r is None else r.proof,
            "exactness": None if r is None else r.exactness("mask"),
            "solver_message": None if r is None else r.message,
            "race": [] if r is None else [dict(asdict(e), status=str(e.status)) for e in r.race],
            "times": {**dict(self.times), **({} if r is None else {
                "lower": r.times.lower, "solve": r.times.solve, "verify": r.times.verify,
                "solve_total": r.times.total})},
        }

    def save(self, out_dir: str | Path) -> Path:
        """Write ``mask.npy``, ``saliency.npy``, ``cell_mask.npy`` and ``record.json``."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        if self.mask is not None and self.saliency is not None and self.cell_mask is not None:
            np.save(out / "mask.npy", self.mask)
            np.save(out / "saliency.npy", self.saliency)
            np.save(out / "cell_mask.npy", self.cell_mask.reshape(self.grid.shape))
        (out / "record.json").write_text(json.dumps(self.record(), indent=2) + "\n")
        return out


def display_scale(scores: np.ndarray) -> np.ndarray:
    """Non-zero scores mapped linearly to [0.5, 1] (zeros stay 0), as the paper displays."""
    s = np.asarray(scores, dtype=np.float64)
    out = np.zeros_like(s)
    nz = s != 0
    if nz.any():
        lo, hi = s[nz].min(), s[nz].max()
        out[nz] = 1.0 if hi == lo else 0.5 + 0.5 * (s[nz] - lo) / (hi - lo)
    return out


def explain(
    model: Any,
    x: np.ndarray,
    *,
    params: SmugParameters | None = None,
    method: Method | str | None = None,
    k: int | None = None,
    gamma: float | None = None,
    cell: int | tuple[int, ...] | None = None,
    steps: int | None = None,
    backend: str | BackendChoice = DEFAULT_BACKEND,
    target: int | None = None,
    time_limit: float | None = 60.0,
    memory_limit_mb: float | None = None,
    grid_shape: tuple[int, ...] | None = None,
    solver_options: Mapping[str, Any] | None = None,
    ig_batch: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    always_keep: np.ndarray | None = None,
    attributions: Attribution | None = None,
) -> Explanation:
    """Explain ``model``'s prediction on one input ``x`` with SMUG (or SMUG_base).

    ``model``: a model adapter, a :class:`~smug_opt.network.graph.Network`, a Keras model, a
    PyTorch ``nn.Module``, or a spec: an embedded model's name, a ``.keras``/``.h5``,
    ``.onnx`` or ``.pt2`` file, or ``package.module:factory``
    (:func:`smug_opt.models.resolve.as_adapter`, which also declares an input's layout and range).
    The SMUG parameters are ``params`` (default: the model's own,
    :func:`smug_opt.models.catalog.describe`), with any of ``method``, ``k``,
    ``gamma``, ``cell`` and ``steps`` given here replacing theirs; a masked value becomes
    ``params.baseline``'s (:mod:`smug_opt.mask_baseline`), and the record says how many
    selected rows the empty mask already satisfies (``empty_mask_rows``). ``k`` neurons with
    the largest positive IG attribution (``steps`` points, in batches of ``ig_batch``,
    default sized from the model's memory footprint; ``progress(done, total)`` after
    each) are kept above ``gamma`` times their original pre-activation by a
    mask of ``cell``-sized cells, solved on ``backend`` within ``time_limit`` seconds and a
    solver worker's budget of ``memory_limit_mb`` MB (None: the default, :func:`smug_opt.solve`).
    ``x`` has the model's input shape, or holds as many values in the shape the data came
    in (a 28×28 picture for an ``Input(784)`` MLP); the adapter draws the mask grid from
    the model and that shape, unless ``grid_shape`` says it. ``solver_options`` go to
    :func:`smug_opt.solve` (threads, seed, relative_gap, extras, ...). ``always_keep``
    (bool, the mask grid's shape): positions that are not part of the input proper (text
    padding); a cell made only of them is kept by construction and not counted.
    ``attributions``: the IG of this model, input and target at these ``steps`` computed
    before (another explanation's ``attributions``: SMUG and SMUG_base of one input share
    it), used instead of computing it again; one of another shape, target or steps raises.
    """
    from smug_opt.encode.first_layer import encode_first_layer
    from smug_opt.mask_baseline import baseline_affine_input
    from smug_opt.models.catalog import describe, smug_parameters
    from smug_opt.models.integrated_gradients import integrated_gradients, top_k_neurons
    from smug_opt.models.resolve import as_adapter

    p = smug_parameters(model, params, method=method, k=k, gamma=gamma, cell=cell, steps=steps)
    if p.method is Method.ROBUST:
        raise ValueError("method robust is a verified explanation with its own parameters (eps): "
                         "call smug_opt.robustness.explain_robust(model, x, eps=...)")
    adapter = as_adapter(model)
    data_shape = np.shape(x)
    picture = np.asarray(x)
    x = adapter.model_input(x)
    if grid_shape is None:
        grid = adapter.mask_grid(p.cell, data_shape)
    else:
        from smug_opt.models.grid import cell_grid

        grid = cell_grid(adapter.affine, p.cell, grid_shape)
    t0 = time.perf_counter()
    o, h = adapter.first_layer(x)
    if attributions is None:
        attribution = integrated_gradients(adapter, x, target=target, steps=p.steps, batch_size=ig_batch,
                                           progress=progress)
    else:
        attribution = _reused(attributions, h.shape, target, p.steps)
    neurons = top_k_neurons(attribution, p.k, eligible=o.reshape(-1) > 0)
    t1 = time.perf_counter()
    baseline = baseline_affine_input(adapter, p.baseline, picture, pixel_mean=describe(model).pixel_mean)
    encoding = encode_first_layer(adapter.affine, adapter.affine_input(x), neurons, gamma=p.gamma,
                                  grid=grid, baseline=baseline)
    t2 = time.perf_counter()
    ig = attribution.values.reshape(-1)[neurons]
    cell_scores = np.asarray(encoding.receptive.T @ ig).ravel()
    used = {"k": p.k, "gamma": p.gamma, "cell": list(encoding.grid.cell), "steps": p.steps,
            "baseline": p.baseline.value, "empty_mask_rows": encoding.empty_mask_rows}
    times = {"ig": t1 - t0, "encode": t2 - t1}
    result = None
    fixed = None if always_keep is None else _fixed_cells(encoding.grid, always_keep)
    problem = encoding.problem if fixed is None else _keep_cells(encoding.problem, fixed)
    cell_mask: np.ndarray | None
    if p.method is Method.SMUG_BASE:
        cell_mask = (np.asarray(encoding.receptive.sum(axis=0)).ravel() > 0).astype(np.float64)
        if fixed is not None:
            cell_mask[fixed] = 1.0
    else:
        from smug_opt.solving import solve

        result = solve(problem, backend, time_limit=time_limit, memory_limit_mb=memory_limit_mb,
                       **dict(solver_options or {}))
        cell_mask = None if result.x is None else np.round(result.x[: encoding.grid.num_cells])
    explanation = _explanation(p.method.value, attribution, neurons, encoding, cell_scores, cell_mask,
                               result, used, times)
    return replace(explanation, problem=problem, fixed=fixed)


def _reused(attribution: Attribution, shape: tuple[int, ...], target: int | None, steps: int) -> Attribution:
    """``attribution``, checked to be of the first layer's ``shape``, ``target`` and ``steps``."""
    wrong = [f"{what} {got} (expected {want})" for what, got, want in (
        ("shape", tuple(attribution.values.shape), tuple(shape)), ("steps", attribution.steps, steps),
        ("target", attribution.target, attribution.target if target is None else target))
        if got != want]
    if wrong:
        raise ValueError(f"the attributions given do not fit this explanation: {'; '.join(wrong)}")
    return attribution


def _fixed_cells(grid: CellGrid, always_keep: np.ndarray) -> np.ndarray:
    """The cells made only of ``always_keep`` positions."""
    keep = np.asarray(always_keep, dtype=bool)
    if keep.shape != tuple(grid.spatial_shape):
        raise ValueError(f"always_keep must have the mask grid's shape {tuple(grid.spatial_shape)}, "
                         f"got {keep.shape}")
    cell_of = np.asarray(grid.cell_of).reshape(-1)
    return np.bincount(cell_of[~keep.reshape(-1)], minlength=grid.num_cells) == 0


def _keep_cells(problem: Problem, fixed: np.ndarray) -> Problem:
    """``problem`` with the ``fixed`` cells forced to 1 and left out of the objective."""
    import scipy.sparse as sp

    cells = np.flatnonzero(fixed)
    if cells.size == 0:
        return problem
    rows = sp.csr_matrix((np.ones(cells.size), (np.arange(cells.size), cells)),
                         shape=(cells.size, problem.num_vars))
    objective = np.array(problem.objective, dtype=np.float64)
    objective[cells] = 0.0
    return replace(problem.with_constraints(rows, ">=", np.ones(cells.size)), objective=objective)


def _explanation(
    method: str,
    attribution: Attribution,
    neurons: np.ndarray,
    encoding: FirstLayerEncoding,
    cell_scores: np.ndarray,
    cell_mask: np.ndarray | None,
    result: SolveResult | None,
    params: dict[str, Any],
    times: dict[str, float],
) -> Explanation:
    grid = encoding.grid
    mask = saliency = None
    if cell_mask is not None:
        mask = grid.expand(cell_mask > 0.5)
        saliency = grid.expand(cell_scores * cell_mask)
    return Explanation(
        method=method, target=attribution.target, mask=mask, saliency=saliency,
        cell_mask=cell_mask, cell_scores=cell_scores, neurons=neurons, attributions=attribution,
        grid=grid, problem=encoding.problem, result=result, params=params, times=times,
    )
