"""Bounds on the layers of a masked network, for the whole-network encoder: one interface
over the methods that compute them.

``method``:

- ``"interval"``: no bounds beyond the encoder's own interval arithmetic over its
  variables' boxes (always applied, and intersected with whatever is given here);
- ``"lp"``: on a plain ReLU MLP, :func:`smug_opt.encode.bounds.network_bounds` (every mask
  of up to the mask-size limit evaluated when they are few enough, else one LP per
  ambiguous neuron and side, and the smaller sizes enumerated to prove a minimum size);
  on other networks, the interval bounds;
- ``"none"``: the encoder declares no ReLU bounds and drops no neuron (variable boxes and
  max-pool big-Ms still come from interval arithmetic).

Every bound is rigorous (outward-rounded); ``lo``/``hi`` hold for every mask that
satisfies the problem (its output rows and mask-size limit), ``global_lo``/``global_hi``
for every mask.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from smug_opt.encode.bounds import network_bounds
from smug_opt.encode.masked import MaskedNetwork, mlp_form

__all__ = ["BOUND_METHODS", "LayerBounds", "layer_bounds"]

BOUND_METHODS = ("lp", "interval", "none")


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


def layer_bounds(network: MaskedNetwork, method: str = "lp", max_ones: int | None = None) -> LayerBounds:
    """Bounds for ``method`` (see the module docstring) under at most ``max_ones`` cells."""
    if method not in BOUND_METHODS:
        raise ValueError(f"bounds must be one of {', '.join(BOUND_METHODS)}, got {method!r}")
    layers = mlp_form(network.net)
    if method == "none" or layers is None or len(layers) == 1:
        return LayerBounds(method)
    start = time.perf_counter()
    first, *rest = layers
    A1 = np.asarray((first[0] @ network.inputs).todense()).T
    hidden = [(np.asarray(W.todense()).T, b) for W, b in rest[:-1]]
    W_out, b_out = rest[-1]
    rows = np.asarray((W_out.T @ network.out_rows.T).T)
    rhs = network.out_rhs - network.out_rows @ b_out
    nb = network_bounds(A1, first[1], hidden, rows, rhs, method, max_ones=max_ones)
    indices = [1 + 2 * k for k in range(len(nb.lo))]  # the linear layers the ReLUs read
    return LayerBounds(method, dict(zip(indices, nb.lo, strict=True)), dict(zip(indices, nb.hi, strict=True)),
                       dict(zip(indices, nb.global_lo, strict=True)),
                       dict(zip(indices, nb.global_hi, strict=True)),
                       min_ones=nb.min_ones, lps=nb.lps, seconds=time.perf_counter() - start,
                       source="enumeration" if method == "lp" and nb.lps == 0 else method)
