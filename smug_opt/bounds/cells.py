"""A network seen on its mask cells: the first affine layers composed with the map from
cell binaries to the input, so that bounds hold for the coefficients a problem uses.

An encoder writes the first layer over the cells as ``(W @ inputs)·M + b``, whose entries
are float64 products and sums of ``W`` and the input values, not the exact ones. Bounds
propagated on :func:`on_cells`'s network over :func:`cell_domain` are about exactly
those coefficients (``W @ inputs`` computed the same way), so they hold for the problem,
not only for the network.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from smug_opt.bounds.domain import Masks
from smug_opt.network.flat import FlatLayer, FlatNetwork

__all__ = ["cell_domain", "on_cells"]


def on_cells(network: FlatNetwork, inputs: sp.spmatrix) -> FlatNetwork:
    """``network`` with its input replaced by the cells: every linear layer reading the
    input gets the matrix ``layer.matrix @ inputs`` (``inputs``: ``(num_inputs, cells)``)."""
    inputs = sp.csr_matrix(inputs)
    if inputs.shape[0] != network.num_inputs:
        raise ValueError(f"inputs has {inputs.shape[0]} rows but the network takes "
                         f"{network.num_inputs} inputs")
    layers = [FlatLayer("input", (), inputs.shape[1], name=network.layers[0].name)]
    for layer in network.layers[1:]:
        if 0 in layer.inputs and layer.kind != "linear":
            raise ValueError(f"layer {layer.name or layer.kind!r} reads the input directly as a "
                             f"{layer.kind!r} layer: only linear layers can be composed with the cells")
        if layer.kind == "linear" and layer.inputs == (0,):
            layer = FlatLayer("linear", (0,), layer.size, name=layer.name,
                              matrix=sp.csr_matrix(layer.matrix @ inputs), bias=layer.bias)
        layers.append(layer)
    return FlatNetwork(tuple(layers), (inputs.shape[1],), network.output)


def cell_domain(num_cells: int, max_cells: int | None = None) -> Masks:
    """The masks over :func:`on_cells`'s input: each cell binary, at most ``max_cells`` ones."""
    return Masks(np.ones(num_cells), np.arange(num_cells), max_cells)
