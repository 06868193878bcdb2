"""Lowering a structured :class:`~smug_opt.network.graph.Network` to the flat form
(:class:`~smug_opt.network.flat.FlatNetwork`) that bounds and encoders read.

The chain of Scale/Reshape/Transpose nodes from the input to the first other operation is
the :class:`~smug_opt.network.flat.Preprocess` (masks act after it: a masked value is 0
after normalisation). Every other linear operation is a sparse matrix, and a chain of them
read by nothing else is multiplied into ONE ``linear`` layer; MaxPool gives ``maxpool``
windows, Add an ``add`` layer, activations their own kinds.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp

from smug_opt.network.flat import FlatLayer, FlatNetwork, Preprocess
from smug_opt.network.graph import (
    Add,
    AvgPool,
    Clip,
    Conv,
    Dense,
    Input,
    LeakyRelu,
    MaxPool,
    Network,
    Node,
    Pad,
    Relu,
    Reshape,
    Scale,
    Transpose,
)

__all__ = ["linear_map", "lower", "pool_windows"]

_LINEAR = (Dense, Conv, Scale, AvgPool, Reshape, Transpose, Pad)
_PREPROCESS = (Scale, Reshape, Transpose)


def lower(network: Network) -> tuple[Preprocess, FlatNetwork]:
    """The preprocessing and the flat network: ``flat.forward(pre(x))[-1]`` equals
    ``network.forward(x)`` (float64, up to rounding)."""
    nodes = network.nodes
    consumers = [[j for j, node in enumerate(nodes) if i in node.inputs] for i in range(len(nodes))]
    last = len(nodes) - 1
    affine_input = 0
    while (affine_input < last and len(consumers[affine_input]) == 1
           and isinstance(nodes[consumers[affine_input][0]].op, _PREPROCESS)
           and consumers[affine_input][0] != last):
        affine_input = consumers[affine_input][0]
    pre = _preprocess(nodes[: affine_input + 1])
    layer_of = {affine_input: 0}
    layers = [FlatLayer("input", (), int(np.prod(nodes[affine_input].shape)), nodes[affine_input].name)]
    pending: dict[int, tuple[int, sp.csr_matrix, np.ndarray]] = {}
    for index in range(affine_input + 1, len(nodes)):
        node = nodes[index]
        op = node.op
        if isinstance(op, _LINEAR):
            source = node.inputs[0]
            matrix, bias = linear_map(op, nodes[source].shape, node.shape)
            if source in pending:
                layer, before, before_bias = pending.pop(source)
                matrix, bias = (matrix @ before).tocsr(), matrix @ before_bias + bias
            else:
                layer = layer_of[source]
            fuses = (index != last and len(consumers[index]) == 1
                     and isinstance(nodes[consumers[index][0]].op, _LINEAR))
            if fuses:
                pending[index] = (layer, matrix, bias)
                continue
            matrix.sum_duplicates()
            layers.append(FlatLayer("linear", (layer,), matrix.shape[0], node.name, matrix=matrix, bias=bias))
        else:
            layers.append(_layer(node, nodes, [layer_of[i] for i in node.inputs]))
        layer_of[index] = len(layers) - 1
    flat = FlatNetwork(tuple(layers), nodes[affine_input].shape, network.output)
    return pre, flat


def _preprocess(chain: Sequence[Node]) -> Preprocess:
    """The elementwise map of a Scale/Reshape/Transpose chain from the input."""
    shape = chain[0].shape
    index: np.ndarray = np.arange(int(np.prod(shape))).reshape(shape)
    scale: np.ndarray = np.ones(shape)
    shift: np.ndarray = np.zeros(shape)
    for node in chain[1:]:
        op = node.op
        if isinstance(op, Scale):
            scale, shift = scale * op.scale, shift * op.scale + op.shift
        elif isinstance(op, Reshape):
            index, scale, shift = (a.reshape(node.shape) for a in (index, scale, shift))
        elif isinstance(op, Transpose):  # the chain holds only _PREPROCESS ops
            index, scale, shift = (np.transpose(a, op.perm) for a in (index, scale, shift))
    return Preprocess(index.ravel().copy(), scale.ravel().copy(), shift.ravel().copy())


def _layer(node: Node, nodes: tuple[Node, ...], inputs: list[int]) -> FlatLayer:
    op, size = node.op, int(np.prod(node.shape))
    if isinstance(op, Relu):
        return FlatLayer("relu", tuple(inputs), size, node.name)
    if isinstance(op, LeakyRelu):
        return FlatLayer("leaky_relu", tuple(inputs), size, node.name, alpha=op.alpha)
    if isinstance(op, Clip):
        return FlatLayer("clip", tuple(inputs), size, node.name, lo=op.lo, hi=op.hi)
    if isinstance(op, MaxPool):
        windows = pool_windows(nodes[node.inputs[0]].shape, op.kernel, op.strides, op.pads)
        return FlatLayer("maxpool", tuple(inputs), size, node.name, windows=windows)
    if isinstance(op, Add):
        return FlatLayer("add", tuple(inputs), size, node.name)
    if isinstance(op, Input):
        raise ValueError("an Input node after node 0")
    raise ValueError(f"cannot lower {type(op).__name__} node {node.name!r}")


def _taps(shape: tuple[int, ...], kernel: tuple[int, int], strides: tuple[int, int],
          pads: tuple[int, int, int, int], dilations: tuple[int, int], out: tuple[int, int]
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For every output cell (oy, ox) and tap (i, j): the input row, column and whether it
    is inside the input; arrays (OH, OW, kh, kw)."""
    oy = np.arange(out[0])[:, None, None, None]
    ox = np.arange(out[1])[None, :, None, None]
    i = np.arange(kernel[0])[None, None, :, None]
    j = np.arange(kernel[1])[None, None, None, :]
    rows = oy * strides[0] - pads[0] + i * dilations[0]
    cols = ox * strides[1] - pads[1] + j * dilations[1]
    inside = (rows >= 0) & (rows < shape[1]) & (cols >= 0) & (cols < shape[2])
    rows, cols = np.broadcast_arrays(rows, cols)
    return rows, cols, np.broadcast_to(inside, rows.shape)


def pool_windows(shape: tuple[int, ...], kernel: tuple[int, int], strides: tuple[int, int],
                 pads: tuple[int, int, int, int]) -> np.ndarray:
    """``(C·OH·OW, kh·kw)`` flat input indices of every pooling window of a ``(C, H, W)``
    input, ``-1`` where a tap falls in the padding."""
    from smug_opt.network.kernels import pooled_size

    c, h, w = shape
    out = (pooled_size(h, kernel[0], strides[0], 1, pads[0], pads[2]),
           pooled_size(w, kernel[1], strides[1], 1, pads[1], pads[3]))
    rows, cols, inside = _taps(shape, kernel, strides, pads, (1, 1), out)
    spatial = np.where(inside, rows * w + cols, -1).reshape(out[0] * out[1], -1)
    channel = np.arange(c)[:, None, None] * (h * w)
    return np.where(spatial[None] >= 0, spatial[None] + channel, -1).reshape(c * out[0] * out[1], -1)


def linear_map(op: Dense | Conv | Scale | AvgPool | Reshape | Transpose | Pad,
               in_shape: tuple[int, ...], out_shape: tuple[int, ...]) -> tuple[sp.csr_matrix, np.ndarray]:
    """``(matrix, bias)`` of a linear operation on flat row-major vectors."""
    n_in, n_out = int(np.prod(in_shape)), int(np.prod(out_shape))
    if isinstance(op, Dense):
        return sp.csr_matrix(op.weight), op.bias.copy()
    if isinstance(op, Scale):
        scale = np.broadcast_to(op.scale, in_shape).ravel()
        return sp.diags(scale, format="csr"), np.broadcast_to(op.shift, in_shape).ravel().copy()
    if isinstance(op, Reshape):
        return sp.identity(n_in, format="csr"), np.zeros(n_out)
    if isinstance(op, Transpose):
        source = np.transpose(np.arange(n_in).reshape(in_shape), op.perm).ravel()
        return _selection(source, n_in), np.zeros(n_out)
    if isinstance(op, Pad):
        _, h, w = in_shape
        top, left = op.pads[0], op.pads[1]
        source = np.full(out_shape, -1)
        source[:, top: top + h, left: left + w] = np.arange(n_in).reshape(in_shape)
        source = source.ravel()
        return _selection(source, n_in), np.where(source < 0, op.value, 0.0)
    if isinstance(op, AvgPool):
        windows = pool_windows(in_shape, op.kernel, op.strides, op.pads)
        valid = windows >= 0
        count = np.full(len(windows), float(windows.shape[1])) if op.count_include_pad else valid.sum(1)
        rows = np.broadcast_to(np.arange(len(windows))[:, None], windows.shape)[valid]
        weights = np.broadcast_to((1.0 / count)[:, None], windows.shape)[valid]
        return sp.csr_matrix((weights, (rows, windows[valid])), shape=(n_out, n_in)), np.zeros(n_out)
    return _conv_matrix(op, in_shape, out_shape), np.repeat(op.bias, out_shape[1] * out_shape[2])


def _selection(source: np.ndarray, n_in: int) -> sp.csr_matrix:
    """Row ``r`` picks input ``source[r]`` (none where it is ``-1``)."""
    rows = np.flatnonzero(source >= 0)
    return sp.csr_matrix((np.ones(len(rows)), (rows, source[rows])), shape=(len(source), n_in))


def _conv_matrix(op: Conv, in_shape: tuple[int, ...], out_shape: tuple[int, ...]) -> sp.csr_matrix:
    c, h, w = in_shape
    out_channels, per_group, kh, kw = op.weight.shape
    oh, ow = out_shape[1:]
    rows, cols, inside = _taps(in_shape, (kh, kw), op.strides, op.pads, op.dilations, (oh, ow))
    y, x, i, j = (a[inside] for a in np.indices((oh, ow, kh, kw)))
    spatial_in = rows[inside] * w + cols[inside]
    spatial_out = y * ow + x
    o = np.arange(out_channels)[:, None, None]  # (O, Cg, taps)
    ci = np.arange(per_group)[None, :, None]
    group = o // (out_channels // op.groups)
    row = np.broadcast_to(o * (oh * ow) + spatial_out[None, None, :], (out_channels, per_group, len(y)))
    col = np.broadcast_to((group * per_group + ci) * (h * w) + spatial_in[None, None, :], row.shape)
    values = op.weight[:, :, i, j]  # (O, Cg, taps)
    keep = values != 0
    return sp.csr_matrix((values[keep], (row[keep], col[keep])), shape=(int(np.prod(out_shape)), c * h * w))
