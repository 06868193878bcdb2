"""Bounds are their own layer: a network and an input domain in, rigorous per-neuron
intervals out (sound in float64 by outward rounding), fastest method first.

- :mod:`smug_opt.bounds.domain`: input domains (:class:`Box`, :class:`Masks`);
- :mod:`smug_opt.bounds.propagation`: interval arithmetic and linear bound propagation
  (CROWN/DeepPoly back-substitution) over a :class:`~smug_opt.network.flat.FlatNetwork`;
- :mod:`smug_opt.bounds.cells`: a network on its mask cells (bounds about a problem's
  own first-layer coefficients);
- :mod:`smug_opt.bounds.lp`: LP tightening with safe (Neumaier–Shcherbina) duals;
- :mod:`smug_opt.bounds.relaxation`: the linear relaxations of ReLU, leaky ReLU, clip and
  max pooling; :mod:`smug_opt.bounds.rounding`: outward rounding.

Encoders and ``verify`` ask for bounds here; they do not compute them.

The names below are imported on first use (PEP 562): :mod:`smug_opt.bounds.lp`, which
certification uses on problems without networks, then does not pull in the network layer
(``bounds.cells`` imports :mod:`smug_opt.network` and the model zoo: ~0.15 s of CPU on the
first certification in a process).
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the real names for type checkers
    from smug_opt.bounds.cells import cell_domain, on_cells
    from smug_opt.bounds.domain import Box, Domain, Masks
    from smug_opt.bounds.propagation import METHODS, FlatBounds, propagate

__all__ = ["METHODS", "Box", "Domain", "FlatBounds", "Masks", "cell_domain", "on_cells", "propagate"]

_HOMES = {"cell_domain": "cells", "on_cells": "cells", "Box": "domain", "Domain": "domain",
          "Masks": "domain", "METHODS": "propagation", "FlatBounds": "propagation",
          "propagate": "propagation"}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'smug_opt.bounds' has no attribute {name!r}")
    return getattr(import_module(f"smug_opt.bounds.{home}"), name)
