"""Which neurons of a :class:`~smug_opt.network.flat.FlatNetwork` some inputs reach: a
neuron outside their forward cone is a function of the other inputs alone, so over two boxes
that differ only on these inputs it takes the same set of values, and an interval found for
it over one box holds over the other (:func:`~smug_opt.bounds.propagation.propagate`'s
``reuse``). On a convolutional network one input reaches a few dozen neurons per
convolution layer: an explanation's queries, whose boxes differ in one value or a few
dozen, recompute those and keep the rest."""

from __future__ import annotations

import numpy as np

from smug_opt.network.flat import FlatNetwork

__all__ = ["reached"]


def reached(network: FlatNetwork, changed: np.ndarray) -> list[np.ndarray]:
    """Per layer (0: the input), which of its outputs depend on some input in ``changed``
    (bool, one per network input)."""
    changed = np.asarray(changed, dtype=bool).reshape(-1)
    if changed.size != network.num_inputs:
        raise ValueError(f"{changed.size} inputs marked but the network takes {network.num_inputs}")
    masks = [changed]
    for layer in network.layers[1:]:
        source = masks[layer.inputs[0]]
        if layer.kind == "linear":
            weights = abs(layer.affine[0])
            masks.append(np.asarray(weights @ source.astype(np.float64)).reshape(-1) > 0)
        elif layer.kind == "maxpool":  # a window index -1 (padding) reads the appended False
            masks.append(np.append(source, False)[layer.pool_windows].any(axis=1))
        elif layer.kind == "add":
            masks.append(source | masks[layer.inputs[1]])
        elif layer.kind in ("relu", "leaky_relu", "clip"):
            masks.append(source.copy())
        else:
            raise ValueError(f"unknown flat layer kind {layer.kind!r}")
    return masks
