"""Bounds on the layers of a masked network, for the whole-network encoder: one interface
over the methods that compute them.

``method``:

- ``"crown"`` (default): linear bound propagation (:func:`smug_opt.bounds.propagate`)
  over the masks of at most the mask-size limit's cells;
- ``"crown+lp"``: on a plain ReLU MLP, then LPs for the most ambiguous neurons within a
  time budget, or every small mask evaluated where they are few enough (with a proven
  minimum size); on other networks, as ``"crown"``;
- ``"lp"``: on a plain ReLU MLP, interval bounds then one LP per ambiguous neuron and side
  (or every small mask evaluated); on other networks, as ``"crown"``;
- ``"interval"``: the encoder's own interval arithmetic over its variables' boxes only
  (always applied, and intersected with whatever is given here);
- ``"none"``: the encoder declares no ReLU bounds and drops no neuron (variable boxes and
  big-Ms still come from interval arithmetic).

On MLPs the methods are :func:`smug_opt.encode.bounds.network_bounds`'s. Every bound is
rigorous (outward-rounded); ``lo``/``hi`` hold for every mask that satisfies the problem
(its output rows and mask-size limit), ``global_lo``/``global_hi`` for every mask. On other
networks the bounds are the network's on its cells (:func:`smug_opt.bounds.cells.on_cells`),
which the encoder widens by its coefficients' rounding. On every network the proven minimum
mask size (beyond what an MLP's enumeration of every mask up to the limit proves) comes
after the encoding (:func:`minimum_size`), from the problem's own output rows.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import numpy as np
import scipy.sparse as sp

from smug_opt.bounds.rounding import ACCUMULATED, up
from smug_opt.encode.bounds import interval_bounds, network_bounds
from smug_opt.encode.deviation import product_deviation
from smug_opt.encode.enumeration import enumerated_bounds, mask_count
from smug_opt.encode.flat_enumeration import SmallMasks, smaller_masks
from smug_opt.encode.masked import MaskedNetwork, mlp_form

__all__ = ["BOUND_METHODS", "DEFAULT_BOUNDS", "LayerBounds", "layer_bounds", "minimum_size"]

BOUND_METHODS = ("crown", "crown+lp", "lp", "interval", "none")
DEFAULT_BOUNDS = "crown"

ENUMERATION_WORK = 2e10
"""Multiply-adds that ``"crown"`` may spend on MLPs evaluating every mask of at most the
mask-size limit's cells (about 2M masks of the 784-32-10 MLP, 75k of 784-256-256-10)."""


@dataclass(frozen=True, eq=False)
class LayerBounds:
    """Per flat-layer index, bounds on that layer's output values (layers absent: none
    given). ``min_ones``: every mask that satisfies the problem keeps at least this many
    cells (0: nothing proven). ``lps``: LPs solved; ``seconds``: time spent."""

    method: str
    lo: dict[int, np.ndarray] = field(default_factory=dict)
    hi: dict[int, np.ndarray] = field(default_factory=dict)
    global_lo: dict[int, np.ndarray] = field(default_factory=dict)
    global_hi: dict[int, np.ndarray] = field(default_factory=dict)
    min_ones: int = 0
    lps: int = 0
    seconds: float = 0.0
    source: str = "interval"

    @property
    def declared(self) -> bool:
        """Whether the encoder declares ReLU bounds and drops dead neurons."""
        return self.method != "none"


def layer_bounds(network: MaskedNetwork, method: str = DEFAULT_BOUNDS,
                 max_ones: int | None = None) -> LayerBounds:
    """Bounds for ``method`` (see the module docstring) under at most ``max_ones`` cells."""
    if method not in BOUND_METHODS:
        raise ValueError(f"bounds must be one of {', '.join(BOUND_METHODS)}, got {method!r}")
    if method in ("none", "interval"):
        return LayerBounds(method)
    layers = mlp_form(network.net)
    if layers is None:
        return _propagated(network, method, max_ones)
    if len(layers) == 1:
        return LayerBounds(method)
    start = time.perf_counter()
    first, *rest = layers
    A1 = np.asarray((first[0] @ network.inputs).todense()).T
    hidden = [(np.asarray(W.todense()).T, b) for W, b in rest[:-1]]
    W_out, b_out = rest[-1]
    rows = np.asarray((W_out.T @ network.out_rows.T).T)
    rhs = network.out_rhs - network.out_rows @ b_out
    every_mask = interval_bounds(A1, first[1], hidden)
    margin = _row_margin(network, W_out, b_out, np.maximum(every_mask[1][-1], 0.0))
    nb = network_bounds(A1, first[1], hidden, rows, rhs, method, max_ones=max_ones, row_margin=margin,
                        global_bounds=every_mask)
    lo, hi, min_ones = list(nb.lo), list(nb.hi), nb.min_ones
    enumerated = method != "crown" and nb.lps == 0 and max_ones is not None
    if method == "crown" and max_ones is not None and _affordable(A1, hidden, max_ones):
        found = enumerated_bounds(A1, first[1], hidden, rows, rhs, max_ones, margin)
        if found is not None:  # every small mask evaluated: as tight as bounds can be
            lo = [np.minimum(np.maximum(a, e), b) for a, b, e in zip(lo, hi, found[0], strict=True)]
            hi = [np.maximum(np.minimum(b, e), a) for a, b, e in zip(lo, hi, found[1], strict=True)]
            min_ones, enumerated = found[2], True
    indices = [1 + 2 * k for k in range(len(lo))]  # the linear layers the ReLUs read
    return LayerBounds(method, dict(zip(indices, lo, strict=True)), dict(zip(indices, hi, strict=True)),
                       dict(zip(indices, nb.global_lo, strict=True)),
                       dict(zip(indices, nb.global_hi, strict=True)),
                       min_ones=min_ones, lps=nb.lps, seconds=time.perf_counter() - start,
                       source=f"{method} (mlp{', enumeration' if enumerated else ''})")


def _row_margin(network: MaskedNetwork, W_out: sp.csr_matrix, b_out: np.ndarray, reach: np.ndarray
                ) -> np.ndarray:
    """Per output row, how far the enumeration's rows (``fl(out_rows·W_out)`` and its
    right-hand side) and the problem's (the encoder's, computed alike) may each lie from the
    network's exact ones, over last hidden values within ``[0, reach]``: twice the
    product's rounding bound (:func:`~smug_opt.encode.deviation.product_deviation`)."""
    one = product_deviation(sp.csr_matrix(network.out_rows), W_out, reach, b_out, network.out_rhs)
    return up(2.0 * one * ACCUMULATED)


def _affordable(A1: np.ndarray, hidden: list[tuple[np.ndarray, np.ndarray]], max_ones: int) -> bool:
    """Whether evaluating every mask of at most ``max_ones`` cells fits
    :data:`ENUMERATION_WORK` multiply-adds."""
    return mask_count(A1.shape[0], max_ones) * _mask_work(A1, hidden, max_ones) <= ENUMERATION_WORK


def _mask_work(A1: np.ndarray, hidden: list[tuple[np.ndarray, np.ndarray]], max_ones: int) -> int:
    """Multiply-adds to evaluate one mask of at most ``max_ones`` cells."""
    return A1.shape[1] * max(max_ones, 1) + sum(W.size for W, _ in hidden)


def _propagated(network: MaskedNetwork, method: str, max_ones: int | None) -> LayerBounds:
    """Linear bound propagation over the masks, every layer, on the network on its cells."""
    from smug_opt.bounds import propagate
    from smug_opt.bounds.cells import cell_domain, on_cells

    start = time.perf_counter()
    found = propagate(on_cells(network.net, network.inputs), cell_domain(network.num_cells, max_ones),
                      method="crown")
    lo = {k: found.lo[k] for k in range(1, len(found.lo))}
    hi = {k: found.hi[k] for k in range(1, len(found.hi))}
    return LayerBounds(method, lo, hi, seconds=time.perf_counter() - start, source="crown")


def minimum_size(network: MaskedNetwork, bounds: LayerBounds, max_ones: int | None,
                 row_deviation: np.ndarray, search: SmallMasks | None = None) -> LayerBounds:
    """``bounds`` with a proven minimum mask size: from every mask of fewer than
    ``max_ones`` cells that fits the search's budget, evaluated with error bounds
    (``search``, when the encoder already ran
    :func:`~smug_opt.encode.flat_enumeration.smaller_masks` with at least ``max_ones``, else
    here), against the problem's output rows, which lie within ``row_deviation`` of the
    network's (:attr:`NetworkEncoding.row_deviation
    <smug_opt.encode.network_milp.NetworkEncoding.row_deviation>`); kept as it is where
    ``bounds`` already rule out every smaller size (an MLP's enumeration up to the limit)."""
    if max_ones is None or bounds.method in ("none", "interval") or bounds.min_ones >= max_ones:
        return bounds
    start = time.perf_counter()
    min_ones = (search or smaller_masks(network, max_ones)).proven_minimum(max_ones, row_deviation)
    if min_ones <= bounds.min_ones:
        return bounds
    return replace(bounds, min_ones=min_ones, seconds=bounds.seconds + time.perf_counter() - start,
                   source=f"{bounds.source}, sizes below {min_ones} ruled out")
