"""Reading a :class:`~smug_opt.network.graph.Network`'s stem: the nodes from its input to the
first affine layer's activation, folded into one exact :class:`AffineLayer` in the
channels-last layout the rest of smug-opt uses.

Supported stem: ``Input → [Scale | Reshape | Transpose]* → [Pad] → Dense | Conv →
[Scale] → [Relu | Clip(0, hi) | LeakyRelu]``. The elementwise nodes before the affine
layer are applied exactly in float64 (the mask acts on their output: a masked pixel is 0
after the normalisation in front of the first layer); a zero Pad goes into the layer's
padding, a per-channel Scale after it (a folded BatchNorm) into its kernel and bias. Without
an activation right after it the first layer is ``linear``. Everything after is the head.

Layouts: the network computes channels first, smug-opt's inputs, masks and first layers are
channels last. An :class:`AxisView` maps one onto the other: a 3-D image tensor ``(C, H, W)``
is seen as ``(H, W, C)``; a Dense layer reading a flattened image reads it in ``H, W, C``
order (its weight columns permuted), so all channels of a pixel share its mask cell.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from smug_opt.models.activations import Activation
from smug_opt.models.base import AffineLayer, LayerKind
from smug_opt.network.graph import (
    Clip,
    Conv,
    Dense,
    LeakyRelu,
    Network,
    Node,
    Pad,
    Relu,
    Reshape,
    Scale,
    Transpose,
)

__all__ = ["AxisView", "NetworkStem", "channels_last_view", "read_network_stem"]

_Op = TypeVar("_Op")

_STEM_HELP = (
    "the input must reach the first affine layer (Dense or Conv) through a chain of Scale "
    "(elementwise normalisation), Reshape, Transpose and (last) zero Pad nodes"
)


@dataclass(frozen=True)
class AxisView:
    """How a per-example tensor of the network (``net_shape``) is seen by smug-opt
    (``view_shape``): ``net = view.reshape(grid).transpose(perm).reshape(net_shape)``."""

    view_shape: tuple[int, ...]
    grid: tuple[int, ...]
    perm: tuple[int, ...]
    net_shape: tuple[int, ...]

    @classmethod
    def identity(cls, shape: tuple[int, ...]) -> AxisView:
        return cls(shape, shape, tuple(range(len(shape))), shape)

    def to_net(self, batch: np.ndarray) -> np.ndarray:
        """A batch in the view's layout → the network's (numpy)."""
        batch = np.asarray(batch)
        moved = batch.reshape(len(batch), *self.grid).transpose(0, *(p + 1 for p in self.perm))
        return moved.reshape(len(batch), *self.net_shape)

    def to_view(self, batch: np.ndarray) -> np.ndarray:
        """A batch in the network's layout → the view's (numpy)."""
        batch = np.asarray(batch)
        permuted = tuple(self.grid[p] for p in self.perm)
        inverse = np.argsort(self.perm)
        back = batch.reshape(len(batch), *permuted).transpose(0, *(int(p) + 1 for p in inverse))
        return back.reshape(len(batch), *self.view_shape)


@dataclass(frozen=True, eq=False)
class NetworkStem:
    """The stem of a network as the adapter needs it.

    ``preprocessing``: the nodes after the input up to ``affine_input_node`` (whose output
    the first affine layer reads, before any Pad), applied in float64; ``activation_node``:
    the node whose output is ``h`` (the head reads only it); ``affine``/``activation``: the
    folded first layer and σ; ``input_view``: the raw input as smug-opt sees it;
    ``affine_view``: the affine input as :attr:`affine` reads it; ``image_grid``: ``(H, W)``
    or ``(H, W, C)`` when a Dense layer reads a flattened image (None otherwise).
    """

    preprocessing: tuple[Node, ...]
    affine_input_node: int
    activation_node: int
    affine: AffineLayer
    activation: Activation
    input_view: AxisView
    affine_view: AxisView
    image_grid: tuple[int, ...] | None


def read_network_stem(network: Network) -> NetworkStem:
    """Walk ``network`` from its input to the first affine layer's activation (module docs).

    A 3-D input's layout is the one its first Conv reads (through the stem's Transposes),
    whatever ``network.source_layout`` says; where no Conv says it (an image flattened into
    a Dense layer), ``network.source_layout`` (the reader's guess or the user's declaration).
    """
    nodes = network.nodes
    consumers = _consumers(nodes)
    perm: tuple[int, ...] | None = tuple(range(len(network.input_shape)))  # axes as raw input axes
    preprocessing: list[Node] = []
    affine_input = 0
    while True:
        index = _only_consumer(nodes, consumers, affine_input)
        node = nodes[index]
        if isinstance(node.op, (Dense, Conv, Pad)):
            break
        if not isinstance(node.op, (Scale, Reshape, Transpose)):
            raise ValueError(f"unsupported node before the first affine layer: {_describe(node)}; "
                             f"{_STEM_HELP}")
        if isinstance(node.op, Transpose) and perm is not None:
            perm = tuple(perm[p] for p in node.op.perm) if len(node.op.perm) == len(perm) else None
        elif isinstance(node.op, Reshape) and node.shape != nodes[affine_input].shape and len(node.shape) > 1:
            perm = None  # axes mixed: only a final flatten keeps them known
        preprocessing.append(node)
        affine_input = index
    pads = (0, 0, 0, 0)
    pad = nodes[index].op
    if isinstance(pad, Pad):
        if pad.value != 0:
            raise ValueError(f"{_describe(nodes[index])} pads with {pad.value}; only zero padding "
                             "before the first affine layer can be folded into it")
        top, left, bottom, right = (int(p) for p in pad.pads)
        pads = (top, left, bottom, right)
        index = _only_consumer(nodes, consumers, index)
        if not isinstance(nodes[index].op, Conv):
            raise ValueError(f"{_describe(nodes[index])} follows a Pad before the first affine "
                             f"layer; {_STEM_HELP}")
    affine_node = nodes[index]
    before = nodes[affine_input].shape
    raw = network.input_shape
    input_view = _input_view(raw, affine_node, perm, before, network.source_layout)
    if isinstance(affine_node.op, Conv):
        kernel, bias = _conv_kernel(affine_node)
        affine_view = channels_last_view(before)
    else:
        kernel, bias, affine_view = _dense_kernel(affine_node, before, perm, input_view, raw)
    last = index
    follower = _single_follower(nodes, consumers, last)
    if follower is not None and isinstance(nodes[follower].op, Scale):
        kernel, bias = _fold_scale(nodes[follower], affine_node, kernel, bias)
        last = follower
        follower = _single_follower(nodes, consumers, last)
    activation = Activation("linear")
    if follower is not None and isinstance(nodes[follower].op, (Relu, Clip, LeakyRelu)):
        activation = _activation(nodes[follower])
        last = follower
    affine = _affine_layer(affine_node, kernel, bias, pads, affine_view)
    _check_head_reads_only(nodes, last)
    image_grid = None
    if isinstance(affine_node.op, Dense) and affine_view.grid != affine_view.view_shape:
        image_grid = affine_view.grid
    return NetworkStem(tuple(preprocessing), affine_input, last, affine, activation, input_view,
                       affine_view, image_grid)


def _consumers(nodes: tuple[Node, ...]) -> dict[int, list[int]]:
    users: dict[int, list[int]] = {}
    for i, node in enumerate(nodes):
        for j in node.inputs:
            users.setdefault(j, []).append(i)
    return users


def _describe(node: Node) -> str:
    return f"{type(node.op).__name__} node {node.name!r}"


def _only_consumer(nodes: tuple[Node, ...], consumers: dict[int, list[int]], index: int) -> int:
    users = consumers.get(index, [])
    if len(users) != 1:
        if not users:
            raise ValueError(f"the network has no Dense or Conv node; {_STEM_HELP}")
        names = ", ".join(_describe(nodes[u]) for u in users)
        raise ValueError(f"{_describe(nodes[index])} feeds {len(users)} nodes ({names}) before the "
                         f"first affine layer; {_STEM_HELP}")
    return users[0]


def _single_follower(nodes: tuple[Node, ...], consumers: dict[int, list[int]], index: int) -> int | None:
    users = consumers.get(index, [])
    return users[0] if len(users) == 1 and len(nodes[users[0]].inputs) == 1 else None


def channels_last_view(shape: tuple[int, ...]) -> AxisView:
    """``(C, H, W)`` seen as ``(H, W, C)``."""
    c, h, w = shape
    return AxisView((h, w, c), (h, w, c), (2, 0, 1), shape)


def _input_view(raw: tuple[int, ...], affine: Node, perm: tuple[int, ...] | None,
                before: tuple[int, ...], layout: str) -> AxisView:
    """The raw input as smug-opt sees it: an image channels last, a vector with
    singleton axes as a plain vector, anything else as it is."""
    if len(raw) == 3:
        if isinstance(affine.op, Conv) and perm is not None and len(before) == 3:
            channel = perm[0]  # the file says it: the axis the first Conv reads as channels
        else:
            channel = 2 if layout == "channels_last" else 0
        if channel == 2:
            return AxisView.identity(raw)
        if channel != 0:
            raise ValueError(f"the network's input {raw} has its channels on axis {channel}; "
                             "only channels-first or channels-last images are supported")
        return channels_last_view(raw)
    if len(raw) > 1 and sum(size > 1 for size in raw) <= 1:
        n = math.prod(raw)
        return AxisView((n,), (n,), (0,), raw)
    return AxisView.identity(raw)


def _dense_kernel(node: Node, before: tuple[int, ...], perm: tuple[int, ...] | None,
                  input_view: AxisView, raw: tuple[int, ...]
                  ) -> tuple[np.ndarray, np.ndarray, AxisView]:
    """(in, out) kernel, bias and the affine input's view: a flattened image read in
    ``H, W, C`` order (columns permuted), else as it is."""
    op = _op(node, Dense)
    weight, bias = op.weight, op.bias
    n = weight.shape[1]
    if len(before) != 1 or before[0] != n:
        raise ValueError(f"{_describe(node)} has {n} inputs but reads a tensor of shape {before}")
    image = _flattened_image(input_view, perm, raw)
    if image is None:
        return weight.T.copy(), bias, AxisView.identity(before)
    grid, image_perm = image
    view = AxisView((n,), grid, image_perm, before)
    order = view.to_view(np.arange(n)[None])[0]  # the network index each view position holds
    return weight.T[order], bias, view


def _flattened_image(input_view: AxisView, perm: tuple[int, ...] | None, raw: tuple[int, ...]
                     ) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """``(grid, perm)`` of the image a Dense layer reads flattened: ``(H, W, C)`` (channels
    last) or ``(H, W)``, and the permutation from it to the flattened tensor's axes."""
    if perm is None or len(raw) < 2 or input_view.view_shape == (math.prod(raw),):
        return None
    # the flattened tensor's axis i is raw axis perm[i]; the view holds raw axes in view order
    view_axes = (1, 2, 0) if input_view.perm == (2, 0, 1) else tuple(range(len(raw)))
    position = {raw_axis: k for k, raw_axis in enumerate(view_axes)}
    return input_view.view_shape, tuple(position[p] for p in perm)


def _conv_kernel(node: Node) -> tuple[np.ndarray, np.ndarray]:
    """OIHW with groups → a full HWIO kernel (each group's filters read its channels only)."""
    op = _op(node, Conv)
    out_channels, per_group, kh, kw = op.weight.shape
    groups = int(op.groups)
    if out_channels % groups:
        raise ValueError(f"{_describe(node)}: {out_channels} filters do not split into {groups} groups")
    kernel = np.zeros((kh, kw, per_group * groups, out_channels))
    step = out_channels // groups
    for g in range(groups):
        block = op.weight[g * step:(g + 1) * step].transpose(2, 3, 1, 0)
        kernel[:, :, g * per_group:(g + 1) * per_group, g * step:(g + 1) * step] = block
    return kernel, np.asarray(op.bias, dtype=np.float64)


def _fold_scale(node: Node, affine: Node, kernel: np.ndarray, bias: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
    """A Scale after the affine layer, constant over positions (BatchNorm), folded in."""
    shape, op = affine.shape, _op(node, Scale)
    scale = np.broadcast_to(op.scale, shape).reshape(shape[0], -1)
    shift = np.broadcast_to(op.shift, shape).reshape(shape[0], -1)
    if len(shape) > 1 and not (np.all(scale == scale[:, :1]) and np.all(shift == shift[:, :1])):
        raise ValueError(f"{_describe(node)} after the first affine layer varies over positions; "
                         "only a per-channel scale (a BatchNorm) can be folded into it")
    scale, shift = scale[:, 0], shift[:, 0]
    return kernel * scale, bias * scale + shift


def _activation(node: Node) -> Activation:
    op = node.op
    if isinstance(op, Relu):
        return Activation("relu")
    if isinstance(op, LeakyRelu):
        return Activation("leaky_relu", negative_slope=float(op.alpha))
    op = _op(node, Clip)
    if op.lo != 0 or not op.hi > 0:
        raise ValueError(f"{_describe(node)} clips to [{op.lo:g}, {op.hi:g}]; a first-layer "
                         "activation must be non-decreasing on [0, inf) with 0 at 0: Relu, "
                         "LeakyRelu or Clip(0, hi) (ReLU6); see smug_opt.models.activations")
    if math.isinf(op.hi):
        return Activation("relu")
    return Activation("relu6") if op.hi == 6 else Activation("relu", max_value=float(op.hi))


def _affine_layer(node: Node, kernel: np.ndarray, bias: np.ndarray, extra: tuple[int, int, int, int],
                  view: AxisView) -> AffineLayer:
    if isinstance(node.op, Dense):
        return AffineLayer(LayerKind.DENSE, kernel, bias, (), (), (), view.view_shape, (kernel.shape[-1],))
    op = _op(node, Conv)
    top, left, bottom, right = (a + b for a, b in zip(op.pads, extra, strict=True))
    out_c, out_h, out_w = node.shape
    return AffineLayer(LayerKind.CONV2D, kernel, bias, tuple(op.strides), tuple(op.dilations),
                       ((top, bottom), (left, right)), view.view_shape, (out_h, out_w, out_c))


def _op(node: Node, kind: type[_Op]) -> _Op:
    """``node``'s operation, which the caller knows to be a ``kind``."""
    if not isinstance(node.op, kind):
        raise TypeError(f"{_describe(node)} is not a {kind.__name__}")
    return node.op


def _check_head_reads_only(nodes: tuple[Node, ...], last: int) -> None:
    """Every node after the activation reads only ``h`` or later nodes."""
    for node in nodes[last + 1:]:
        early = [j for j in node.inputs if j < last]
        if early:
            raise ValueError(f"{_describe(node)} reads {_describe(nodes[early[0]])}, which comes "
                             "before the first layer's activation; SMUG needs every path from the "
                             "input to the output to pass through it (no skip connection around it)")
    if last == len(nodes) - 1:
        raise ValueError("the network has no nodes after the first layer's activation; SMUG "
                         "needs a head that scores classes")
