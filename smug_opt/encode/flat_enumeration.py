"""A proven minimum mask size for any masked flat network, by evaluating every smaller
mask with a rigorous bound on its float64 error.

Each layer's float64 values carry a bound ``eps`` on their distance to the exact values
of the problem's network: a linear layer adds its sums' rounding
(:func:`~smug_opt.exact.dot_error_bound`) to ``|W|·eps``; ReLU, clip and max pooling do
not enlarge it (they are 1-Lipschitz); leaky ReLU and residual sums add their own
rounding. The problem's output rows lie within a given deviation of the network's exact
ones (its coefficients are float64 sums and products of the network's:
:attr:`~smug_opt.encode.network_milp.NetworkEncoding.row_deviation`). A mask is ruled out
only when its output rows fail by more than all of it.
"""

from __future__ import annotations

import math
import time

import numpy as np
import scipy.sparse as sp

from smug_opt.bounds.rounding import ACCUMULATED
from smug_opt.encode.enumeration import batched_combinations, mask_count
from smug_opt.encode.masked import MaskedNetwork
from smug_opt.exact import UNIT_ROUNDOFF, dot_error_bound

__all__ = ["fewest_cells"]


def fewest_cells(network: MaskedNetwork, below: int, max_masks: int, row_deviation: np.ndarray,
                 seconds: float = math.inf) -> int:
    """A proven lower bound on the cells of any mask the problem accepts: the masks of
    ``0, 1, …, j`` cells are evaluated, ``j < below`` the largest size whose masks number at
    most ``max_masks`` in all; the fewest cells of a mask that may be accepted, else
    ``j + 1`` (0 when nothing fits). ``row_deviation``: per output row, how far the problem's
    slack may lie from the network's. When ``seconds`` run out during size ``k``, the sizes
    below ``k`` were all evaluated: ``k``."""
    n = network.num_cells
    j = min(below - 1, n)
    while j >= 0 and mask_count(n, j) > max_masks:
        j -= 1
    rows = network.batch_rows()
    deadline = time.monotonic() + seconds
    for k in range(j + 1):
        for idx in batched_combinations(n, k, rows=rows):
            if time.monotonic() > deadline:
                return k
            masks = np.zeros((idx.shape[0], n))
            np.put_along_axis(masks, idx, 1.0, axis=1)
            if _may_accept(network, masks, row_deviation).any():
                return k
    return max(j + 1, 0)


def _may_accept(network: MaskedNetwork, masks: np.ndarray, row_deviation: np.ndarray) -> np.ndarray:
    """Whether each mask may satisfy the output rows, given its values' error bounds."""
    values, errors = _values_and_errors(network, masks)
    scores, eps = values[-1], errors[-1]
    D = network.out_rows
    magnitude = np.abs(scores) @ np.abs(D).T + np.abs(network.out_rhs)
    slack = scores @ D.T - network.out_rhs
    bound = (eps @ np.abs(D).T + dot_error_bound(D.shape[1], magnitude) + row_deviation) * ACCUMULATED
    return np.all(slack >= -bound, axis=1)


def _values_and_errors(network: MaskedNetwork, masks: np.ndarray
                       ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    layers = network.net.layers
    values: list[np.ndarray] = [np.asarray(network.inputs @ masks.T).T]  # xa·m: exact
    errors: list[np.ndarray] = [np.zeros_like(values[0])]
    for layer, matrix in zip(layers[1:], network.linear_matrices, strict=True):
        v, e = values[layer.inputs[0]], errors[layer.inputs[0]]
        if layer.kind == "linear":
            assert matrix is not None  # linear_matrices holds one for every linear layer
            bias = layer.affine[1]
            if layer.inputs[0] == 0:
                v, e = masks, np.zeros_like(masks)
            absolute = abs(matrix) if sp.issparse(matrix) else np.abs(matrix)
            # scipy.sparse is untyped: issparse does not narrow matrix to a sparse one
            terms = (np.diff(matrix.indptr) if sp.issparse(matrix)  # type: ignore[union-attr]
                     else np.full(matrix.shape[0], matrix.shape[1]))
            out = np.asarray(matrix @ v.T).T + bias
            magnitude = np.asarray(absolute @ np.abs(v).T).T + np.abs(bias)
            err = np.asarray(absolute @ e.T).T + dot_error_bound(terms + 1, magnitude)
        elif layer.kind == "add":
            w, f = values[layer.inputs[1]], errors[layer.inputs[1]]
            out = v + w
            err = e + f + 2 * UNIT_ROUNDOFF * np.abs(out)
        elif layer.kind == "maxpool":
            padded = np.concatenate([v, np.full((v.shape[0], 1), -np.inf)], axis=1)
            out = padded[:, layer.windows].max(axis=2)
            e_padded = np.concatenate([e, np.zeros((e.shape[0], 1))], axis=1)
            err = e_padded[:, layer.windows].max(axis=2)
        elif layer.kind == "relu":
            out, err = np.maximum(v, 0.0), e
        elif layer.kind == "leaky_relu":
            out = np.where(v >= 0, v, layer.alpha * v)
            err = e + 2 * UNIT_ROUNDOFF * np.abs(out)
        elif layer.kind == "clip":
            out, err = np.clip(v, layer.lo, layer.hi), e
        else:
            raise ValueError(f"no rule for flat layer kind {layer.kind!r}")
        values.append(out)
        errors.append(err)
    return values, errors
