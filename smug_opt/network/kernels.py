"""What each graph operation does: its per-example output shape and its float64 numpy
evaluation on a batch. :class:`~smug_opt.network.graph.Network` checks shapes with
:func:`output_shape` at construction and runs :func:`apply` in ``forward``; the readers use
:func:`output_shape` to give every node its shape.
"""

from __future__ import annotations

import numpy as np

from smug_opt.network.ops import (
    Add,
    AvgPool,
    Clip,
    Conv,
    Dense,
    Input,
    LeakyRelu,
    MaxPool,
    Op,
    Pad,
    Relu,
    Reshape,
    Scale,
    Transpose,
)

__all__ = ["apply", "output_shape", "pooled_size"]


def pooled_size(size: int, kernel: int, stride: int, dilation: int, before: int, after: int) -> int:
    """Output length of one spatial axis of a convolution or pooling window (floor mode)."""
    return (size + before + after - (kernel - 1) * dilation - 1) // stride + 1


def _image(shape: tuple[int, ...], what: str) -> tuple[int, int, int]:
    if len(shape) != 3:
        raise ValueError(f"{what} needs a (C, H, W) input, got shape {shape}")
    return shape  # type: ignore[return-value]


def _spatial(h: int, w: int, kernel: tuple[int, int], strides: tuple[int, int],
             pads: tuple[int, int, int, int], dilations: tuple[int, int], what: str) -> tuple[int, int]:
    oh = pooled_size(h, kernel[0], strides[0], dilations[0], pads[0], pads[2])
    ow = pooled_size(w, kernel[1], strides[1], dilations[1], pads[1], pads[3])
    if oh < 1 or ow < 1:
        raise ValueError(f"{what}: a {kernel} window does not fit a padded {h}x{w} input")
    return oh, ow


def output_shape(op: Op, shapes: list[tuple[int, ...]], target: tuple[int, ...] | None = None
                 ) -> tuple[int, ...]:
    """The per-example shape ``op`` gives on inputs of ``shapes``; ``target`` is the shape a
    :class:`Reshape` asks for. Raises ``ValueError`` saying what does not fit."""
    kind = type(op).__name__
    expected = 2 if isinstance(op, Add) else 0 if isinstance(op, Input) else 1
    if len(shapes) != expected:
        raise ValueError(f"{kind} takes {expected} inputs, got {len(shapes)}")
    if isinstance(op, Input):
        raise ValueError("Input is node 0 only")
    shape = shapes[0]
    if isinstance(op, Dense):
        if op.weight.ndim != 2 or op.bias.shape != (op.weight.shape[0],):
            raise ValueError(f"Dense weight {op.weight.shape} and bias {op.bias.shape} do not match")
        if shape != (op.weight.shape[1],):
            raise ValueError(f"Dense with weight {op.weight.shape} needs a vector of "
                             f"{op.weight.shape[1]}, got shape {shape}")
        return (op.weight.shape[0],)
    if isinstance(op, Conv):
        c, h, w = _image(shape, "Conv")
        out, per_group, kh, kw = op.weight.shape
        if op.groups < 1 or c % op.groups or out % op.groups or per_group * op.groups != c:
            raise ValueError(f"Conv weight {op.weight.shape} with groups={op.groups} does not fit "
                             f"{c} input channels")
        if op.bias.shape != (out,):
            raise ValueError(f"Conv bias {op.bias.shape} does not match {out} output channels")
        return (out, *_spatial(h, w, (kh, kw), op.strides, op.pads, op.dilations, "Conv"))
    if isinstance(op, (MaxPool, AvgPool)):
        c, h, w = _image(shape, kind)
        return (c, *_spatial(h, w, op.kernel, op.strides, op.pads, (1, 1), kind))
    if isinstance(op, Scale):
        for name, array in (("scale", op.scale), ("shift", op.shift)):
            try:
                fits = np.broadcast_shapes(array.shape, shape) == shape
            except ValueError:
                fits = False
            if not fits:
                raise ValueError(f"Scale {name} of shape {array.shape} does not broadcast to {shape}")
        return shape
    if isinstance(op, (Relu, LeakyRelu, Clip)):
        return shape
    if isinstance(op, Reshape):
        if target is None or int(np.prod(target)) != int(np.prod(shape)):
            raise ValueError(f"Reshape of {shape} to {target}: the sizes differ")
        return tuple(target)
    if isinstance(op, Transpose):
        if sorted(op.perm) != list(range(len(shape))):
            raise ValueError(f"Transpose perm {op.perm} is not a permutation of {len(shape)} axes")
        return tuple(shape[p] for p in op.perm)
    if isinstance(op, Pad):
        c, h, w = _image(shape, "Pad")
        top, left, bottom, right = op.pads
        return (c, h + top + bottom, w + left + right)
    if isinstance(op, Add):
        if shapes[0] != shapes[1]:
            raise ValueError(f"Add of shapes {shapes[0]} and {shapes[1]}: they must be equal")
        return shape
    raise ValueError(f"unknown operation {op!r}")


def _windows(x: np.ndarray, kernel: tuple[int, int], strides: tuple[int, int],
             dilations: tuple[int, int], out: tuple[int, ...]) -> np.ndarray:
    """``(B, C, kh, kw, OH, OW)``: the input cells every window tap reads (x already padded)."""
    (kh, kw), (sh, sw), (dh, dw), (oh, ow) = kernel, strides, dilations, out
    taps = [[x[:, :, i * dh: i * dh + sh * (oh - 1) + 1: sh, j * dw: j * dw + sw * (ow - 1) + 1: sw]
             for j in range(kw)] for i in range(kh)]
    return np.stack([np.stack(row, axis=2) for row in taps], axis=2)


def _pad(x: np.ndarray, pads: tuple[int, int, int, int], value: float) -> np.ndarray:
    top, left, bottom, right = pads
    return np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)), constant_values=value)


def apply(op: Op, inputs: list[np.ndarray], shape: tuple[int, ...]) -> np.ndarray:
    """``op`` on float64 batches ``inputs`` (batch axis first), giving ``(batch, *shape)``."""
    x = inputs[0]
    batch = x.shape[0]
    if isinstance(op, Dense):
        return x @ op.weight.T + op.bias
    if isinstance(op, Conv):
        out, per_group, kh, kw = op.weight.shape
        patches = _windows(_pad(x, op.pads, 0.0), (kh, kw), op.strides, op.dilations, shape[1:])
        g = op.groups
        patches = patches.reshape(batch, g, per_group, kh, kw, *shape[1:])
        weight = op.weight.reshape(g, out // g, per_group, kh, kw)
        y = np.einsum("bgcijyx,gocij->bgoyx", patches, weight, optimize=True)
        return y.reshape(batch, *shape) + op.bias[:, None, None]
    if isinstance(op, MaxPool):
        patches = _windows(_pad(x, op.pads, -np.inf), op.kernel, op.strides, (1, 1), shape[1:])
        return patches.max(axis=(2, 3))
    if isinstance(op, AvgPool):
        total = _windows(_pad(x, op.pads, 0.0), op.kernel, op.strides, (1, 1), shape[1:]).sum(axis=(2, 3))
        if op.count_include_pad:
            return total / (op.kernel[0] * op.kernel[1])
        ones = np.ones((1, 1, *x.shape[2:]))
        count = _windows(_pad(ones, op.pads, 0.0), op.kernel, op.strides, (1, 1), shape[1:]).sum(axis=(2, 3))
        return total / count
    if isinstance(op, Scale):
        return x * op.scale + op.shift
    if isinstance(op, Relu):
        return np.maximum(x, 0.0)
    if isinstance(op, LeakyRelu):
        return np.where(x >= 0, x, op.alpha * x)
    if isinstance(op, Clip):
        return np.clip(x, op.lo, op.hi)
    if isinstance(op, Reshape):
        return x.reshape(batch, *shape)
    if isinstance(op, Transpose):
        return np.transpose(x, (0, *(p + 1 for p in op.perm)))
    if isinstance(op, Pad):
        return _pad(x, op.pads, op.value)
    if isinstance(op, Add):
        return x + inputs[1]
    raise ValueError(f"cannot evaluate {op!r}")
