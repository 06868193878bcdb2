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
"""

from smug_opt.bounds.cells import cell_domain, on_cells
from smug_opt.bounds.domain import Box, Domain, Masks
from smug_opt.bounds.propagation import METHODS, FlatBounds, propagate

__all__ = ["METHODS", "Box", "Domain", "FlatBounds", "Masks", "cell_domain", "on_cells", "propagate"]
