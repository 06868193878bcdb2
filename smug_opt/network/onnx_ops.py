"""How each ONNX operator on a computed tensor becomes graph nodes (the translations
:mod:`smug_opt.network.onnx_reader` applies): a function per operator taking the reader
(``add`` a node, ``shape`` of a value), the node's name, its inputs (node indices or
constant arrays, None where omitted) and its attributes."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from smug_opt.network.graph import (
    Add,
    AvgPool,
    Clip,
    Conv,
    Dense,
    LeakyRelu,
    MaxPool,
    Pad,
    Relu,
    Reshape,
    Scale,
    Transpose,
)

__all__ = ["TRANSLATE"]

_Reader = Any  # the reader: add(name, op, inputs, target=None) -> int; shape(value) -> tuple


def _tensor(value: Any, what: str = "the data input") -> int:
    if not isinstance(value, int):
        raise ValueError(f"{what} must be computed from the network's input, not a constant")
    return value


def _constant(value: Any, what: str) -> np.ndarray:
    if not isinstance(value, np.ndarray):
        raise ValueError(f"{what} must be a constant (an initializer or Constant), not computed "
                         "from the input")
    return np.asarray(value, dtype=np.float64)


def _per_example(constant: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """A constant operand broadcast as ONNX does against a (batch, *shape) tensor, without
    the batch axis."""
    if constant.ndim == len(shape) + 1:
        if constant.shape[0] != 1:
            raise ValueError(f"a constant of shape {constant.shape} varies along the batch axis")
        constant = constant[0]
    if constant.ndim > len(shape) + 1 or np.broadcast_shapes(constant.shape, shape) != shape:
        raise ValueError(f"a constant of shape {constant.shape} does not broadcast to {shape}")
    return constant


def _gemm(r: _Reader, name: str, inputs: list, attrs: dict) -> int:
    x = _tensor(inputs[0])
    if attrs.get("transA", 0):
        raise ValueError("transA=1 would transpose the batch axis")
    b = _constant(inputs[1], "B (the weights)")
    weight = (b if attrs.get("transB", 0) else b.T) * float(attrs.get("alpha", 1.0))
    bias = np.zeros(weight.shape[0])
    if len(inputs) > 2 and inputs[2] is not None:
        c = _constant(inputs[2], "C (the bias)")
        bias = np.broadcast_to(c.reshape(-1) if c.size == weight.shape[0] else c, bias.shape)
        bias = bias * float(attrs.get("beta", 1.0))
    return r.add(name, Dense(weight, bias), (x,))


_MATMUL_MAX_WEIGHTS = 1 << 24
"""The most weights of the block-diagonal Dense a MatMul over the last axis of a tensor of
rank > 1 becomes (one block per leading position)."""


def _matmul(r: _Reader, name: str, inputs: list, attrs: dict) -> int:
    """``x @ W`` with a constant matrix ``W``: a Dense on a vector; on a tensor of shape
    ``(..., K)`` (``nn.Linear`` on a 3-D input exports so) the same ``W`` at every leading
    position, as one block-diagonal Dense between reshapes."""
    weight = _constant(inputs[1], "the second operand (the weights)")
    if weight.ndim != 2:
        raise ValueError(f"the weights have shape {weight.shape}; only a matrix is read")
    x = _tensor(inputs[0])
    shape = r.shape(x)
    k, n = weight.shape
    if len(shape) == 1:
        return r.add(name, Dense(weight.T, np.zeros(n)), (x,))
    if shape[-1] != k:
        raise ValueError(f"the weights have shape {weight.shape}; the input's last axis is {shape[-1]}")
    positions = math.prod(shape[:-1])
    if positions * positions * k * n > _MATMUL_MAX_WEIGHTS:
        raise ValueError(f"a MatMul over the last axis of a tensor of shape {shape} would be a Dense of "
                         f"{positions * k} x {positions * n} weights; at most {_MATMUL_MAX_WEIGHTS} are read")
    flat = r.add(f"{name}/flatten", Reshape(), (x,), (positions * k,))
    dense = r.add(name, Dense(np.kron(np.eye(positions), weight.T), np.zeros(positions * n)), (flat,))
    return r.add(f"{name}/reshape", Reshape(), (dense,), (*shape[:-1], n))


def _arithmetic(op: str):
    def translate(r: _Reader, name: str, inputs: list, attrs: dict) -> int:
        a, b = inputs
        if isinstance(a, int) and isinstance(b, int):
            if op == "Add":
                return r.add(name, Add(), (a, b))
            if op == "Sub":
                negated = r.add(f"{name}/negate", Scale(-np.ones(()), np.zeros(())), (b,))
                return r.add(name, Add(), (a, negated))
            raise ValueError(f"{op} of two computed tensors is not piecewise linear")
        x = a if isinstance(a, int) else b
        c = _per_example(_constant(b if x is a else a, "the constant operand"), r.shape(x))
        one, zero = np.ones(()), np.zeros(())
        if op == "Add":
            scale = Scale(one, c)
        elif op == "Mul":
            scale = Scale(c, zero)
        elif op == "Sub":
            scale = Scale(one, -c) if x is a else Scale(-one, c)
        elif x is a:  # Div by a constant
            scale = Scale(1.0 / c, zero)
        else:
            raise ValueError("a constant divided by a computed tensor is not piecewise linear")
        return r.add(name, scale, (x,))

    return translate


def _prelu(r: _Reader, name: str, inputs: list, attrs: dict) -> int:
    slope = np.unique(_constant(inputs[1], "the slope"))
    if slope.size != 1:
        raise ValueError(f"{slope.size} different slopes; only one slope for every value is read")
    return r.add(name, LeakyRelu(float(slope[0])), (_tensor(inputs[0]),))


def _clip(r: _Reader, name: str, inputs: list, attrs: dict) -> int:
    lo, hi = attrs.get("min", -np.inf), attrs.get("max", np.inf)
    if len(inputs) > 1 and inputs[1] is not None:
        lo = _constant(inputs[1], "min")
    if len(inputs) > 2 and inputs[2] is not None:
        hi = _constant(inputs[2], "max")
    lo, hi = float(lo), float(hi)
    op = Relu() if lo == 0 and hi == np.inf else Clip(lo, hi)
    return r.add(name, op, (_tensor(inputs[0]),))


def _window(r: _Reader, x: int, attrs: dict, kernel: tuple[int, int]
            ) -> tuple[tuple[int, int], tuple[int, int, int, int], tuple[int, int]]:
    """Strides, pads (top, left, bottom, right) and dilations of a 2-D Conv or pool (a
    pool's ``ceil_mode``: :func:`_ceil_extra`)."""
    shape = r.shape(x)
    if len(shape) != 3 or len(kernel) != 2:
        raise ValueError(f"only 2-D windows on (C, H, W) inputs are read; the input has shape {shape}")
    strides = tuple(attrs.get("strides", (1, 1)))
    dilations = tuple(attrs.get("dilations", (1, 1)))
    auto_pad = attrs.get("auto_pad", "NOTSET")
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        pads = []
        for size, k, s, d in zip(shape[1:], kernel, strides, dilations, strict=True):
            total = max((math.ceil(size / s) - 1) * s + (k - 1) * d + 1 - size, 0)
            small, large = total // 2, total - total // 2
            pads.append((small, large) if auto_pad == "SAME_UPPER" else (large, small))
        pads_t = (pads[0][0], pads[1][0], pads[0][1], pads[1][1])
    elif auto_pad in ("NOTSET", "VALID"):
        pads_t = tuple(attrs.get("pads", (0, 0, 0, 0))) if auto_pad == "NOTSET" else (0, 0, 0, 0)
    else:
        raise ValueError(f"auto_pad {auto_pad!r} is not an ONNX value")
    return strides, pads_t, dilations  # type: ignore[return-value]


def _ceil_extra(shape: tuple[int, ...], attrs: dict, kernel: tuple[int, int], strides: tuple[int, int],
                pads: tuple[int, int, int, int]) -> tuple[int, int]:
    """How far a pool's last windows reach past the padded input at the bottom and right
    under ``ceil_mode`` (0 without it), a window that would start in the end padding
    dropped (PyTorch's and onnxruntime's rule). These cells never win a max and never count
    in a mean, even where the padding does (``count_include_pad``)."""
    if not attrs.get("ceil_mode", 0):
        return (0, 0)
    return (_ceil_overhang(shape[1], pads[0], pads[2], kernel[0], strides[0], 1),
            _ceil_overhang(shape[2], pads[1], pads[3], kernel[1], strides[1], 1))


def _ceil_overhang(n: int, before: int, after: int, k: int, s: int, d: int) -> int:
    """How far ``ceil_mode``'s last window reaches past the padded input of size ``n``."""
    span = (k - 1) * d + 1
    out = -(-(n + before + after - span) // s) + 1
    if (out - 1) * s >= n + before:  # the last window would start in the end padding: dropped
        out -= 1
    return max((out - 1) * s + span - (n + before + after), 0)


def _conv(r: _Reader, name: str, inputs: list, attrs: dict) -> int:
    x = _tensor(inputs[0])
    weight = _constant(inputs[1], "the kernel")
    if weight.ndim != 4:
        raise ValueError(f"the kernel has shape {weight.shape}; only 2-D convolutions are read")
    bias = _constant(inputs[2], "the bias") if len(inputs) > 2 and inputs[2] is not None \
        else np.zeros(weight.shape[0])
    strides, pads, dilations = _window(r, x, attrs, weight.shape[2:])
    return r.add(name, Conv(weight, bias, strides, pads, dilations, int(attrs.get("group", 1))), (x,))


def _batch_norm(r: _Reader, name: str, inputs: list, attrs: dict) -> int:
    x = _tensor(inputs[0])
    if attrs.get("training_mode", 0):
        raise ValueError("training_mode=1: only inference statistics are read")
    gamma, beta, mean, var = (_constant(v, what) for v, what in
                              zip(inputs[1:5], ("scale", "B", "mean", "var"), strict=True))
    scale = gamma / np.sqrt(var + float(attrs.get("epsilon", 1e-5)))
    channel_shape = (-1,) + (1,) * (len(r.shape(x)) - 1)
    shift = (beta - mean * scale).reshape(channel_shape)
    return r.add(name, Scale(scale.reshape(channel_shape), shift), (x,))


def _pool(kind: str):
    def translate(r: _Reader, name: str, inputs: list, attrs: dict) -> int:
        x = _tensor(inputs[0])
        if kind == "global":
            _, h, w = r.shape(x)
            return r.add(name, AvgPool((h, w), (1, 1)), (x,))
        kernel = tuple(attrs["kernel_shape"])
        strides, pads, dilations = _window(r, x, attrs, kernel)
        if dilations != (1, 1):
            raise ValueError(f"dilations {dilations} in pooling are not read")
        extra = _ceil_extra(r.shape(x), attrs, kernel, strides, pads)
        counted = bool(attrs.get("count_include_pad", 0)) and any(pads)
        if any(extra) and counted:  # the padding counts, the overhang does not: pad first
            x = r.add(f"{name}/pad", Pad(pads, 0.0), (x,))
            pads = (0, 0, 0, 0)
        pads = (pads[0], pads[1], pads[2] + extra[0], pads[3] + extra[1])
        if kind == "max":
            return r.add(name, MaxPool(kernel, strides, pads), (x,))
        return r.add(name, AvgPool(kernel, strides, pads, counted and not any(extra)), (x,))

    return translate


def _reduce_mean(r: _Reader, name: str, inputs: list, attrs: dict) -> int:
    """A mean over the spatial axes of an NCHW tensor: global average pooling."""
    x = _tensor(inputs[0])
    shape = r.shape(x)
    axes = attrs.get("axes")
    if len(inputs) > 1 and inputs[1] is not None:
        axes = [int(a) for a in np.asarray(inputs[1]).reshape(-1)]
    if len(shape) != 3 or axes is None or sorted(a % 4 for a in axes) != [2, 3]:
        raise ValueError(f"only a mean over the spatial axes (2, 3) of an NCHW tensor is read, got axes "
                         f"{axes} of a tensor with per-example shape {shape}")
    index = r.add(name, AvgPool(shape[1:], (1, 1)), (x,))
    return index if attrs.get("keepdims", 1) else r.add(f"{name}/squeeze", Reshape(), (index,), (shape[0],))


def _reshaped(r: _Reader, name: str, x: int, full: tuple[int, ...]) -> int:
    """A Reshape to the (batch-first) ``full`` shape computed for batch 1."""
    if not full or full[0] != 1:
        raise ValueError(f"the result {full} (for batch 1) merges or moves the batch axis")
    return r.add(name, Reshape(), (x,), tuple(full[1:]))


def _reshape(r: _Reader, name: str, inputs: list, attrs: dict) -> int:
    x = _tensor(inputs[0])
    if "shape" in attrs:
        target = list(attrs["shape"])
    else:
        if isinstance(inputs[1], int):
            raise ValueError("the target shape must be a constant")
        target = [int(v) for v in np.asarray(inputs[1]).reshape(-1)]
    full = (1, *r.shape(x))
    if not attrs.get("allowzero", 0):
        target = [full[i] if v == 0 else v for i, v in enumerate(target)]
    return _reshaped(r, name, x, np.empty(full).reshape(target).shape)


def _flatten(r: _Reader, name: str, inputs: list, attrs: dict) -> int:
    x = _tensor(inputs[0])
    full = (1, *r.shape(x))
    axis = int(attrs.get("axis", 1))
    axis = axis + len(full) if axis < 0 else axis
    return _reshaped(r, name, x, (math.prod(full[:axis]), math.prod(full[axis:])))


def _squeeze(r: _Reader, name: str, inputs: list, attrs: dict, op: str) -> int:
    x = _tensor(inputs[0])
    axes = attrs.get("axes")
    if len(inputs) > 1 and inputs[1] is not None:
        axes = [int(v) for v in np.asarray(inputs[1]).reshape(-1)]
    dummy = np.empty((1, *r.shape(x)))
    if op == "Unsqueeze":
        if axes is None:
            raise ValueError("Unsqueeze names no axes (neither an input nor an attribute)")
        result = np.expand_dims(dummy, tuple(axes))
    else:
        result = dummy.squeeze(tuple(axes)) if axes is not None else dummy[0].squeeze()[None]
    return _reshaped(r, name, x, result.shape)


def _transpose(r: _Reader, name: str, inputs: list, attrs: dict) -> int:
    x = _tensor(inputs[0])
    perm = list(attrs.get("perm", range(len(r.shape(x)), -1, -1)))
    if perm[0] != 0:
        raise ValueError(f"perm {perm} moves the batch axis")
    return r.add(name, Transpose(tuple(p - 1 for p in perm[1:])), (x,))


def _pad(r: _Reader, name: str, inputs: list, attrs: dict) -> int:
    x = _tensor(inputs[0])
    if attrs.get("mode", "constant") != "constant":
        raise ValueError(f"mode {attrs['mode']!r}: only constant padding is read")
    rank = len(r.shape(x)) + 1
    pads = attrs.get("pads")
    value = float(attrs.get("value", 0.0))
    if len(inputs) > 1:
        pads = [int(v) for v in np.asarray(inputs[1]).reshape(-1)]
        if len(inputs) > 2 and inputs[2] is not None:
            value = float(_constant(inputs[2], "constant_value").reshape(-1)[0])
        if len(inputs) > 3 and inputs[3] is not None:
            axes = [int(a) % rank for a in np.asarray(inputs[3]).reshape(-1)]
            full = [0] * (2 * rank)
            for k, axis in enumerate(axes):
                full[axis], full[rank + axis] = pads[k], pads[len(axes) + k]
            pads = full
    if pads is None:
        raise ValueError("Pad names no pads (neither an input nor an attribute)")
    if rank != 4 or any(pads[i] for i in (0, 1, 4, 5)):
        raise ValueError(f"pads {pads}: only padding of the spatial axes of an NCHW tensor is read")
    if min(pads) < 0:
        raise ValueError(f"pads {pads}: negative padding (cropping) is not read")
    return r.add(name, Pad((pads[2], pads[3], pads[6], pads[7]), value), (x,))


TRANSLATE = {
    # operator type -> translation (Identity, Dropout, Softmax, Sigmoid: in the reader)
    "Gemm": _gemm,
    "MatMul": _matmul,
    **{op: _arithmetic(op) for op in ("Add", "Sub", "Mul", "Div")},
    "Relu": lambda r, name, inputs, attrs: r.add(name, Relu(), (_tensor(inputs[0]),)),
    "LeakyRelu": lambda r, name, inputs, attrs: r.add(name, LeakyRelu(float(attrs.get("alpha", 0.01))),
                                                      (_tensor(inputs[0]),)),
    "PRelu": _prelu,
    "Clip": _clip,
    "Conv": _conv,
    "BatchNormalization": _batch_norm,
    "MaxPool": _pool("max"),
    "AveragePool": _pool("average"),
    "GlobalAveragePool": _pool("global"),
    "ReduceMean": _reduce_mean,
    "Reshape": _reshape,
    "Flatten": _flatten,
    "Squeeze": lambda r, name, inputs, attrs: _squeeze(r, name, inputs, attrs, "Squeeze"),
    "Unsqueeze": lambda r, name, inputs, attrs: _squeeze(r, name, inputs, attrs, "Unsqueeze"),
    "Transpose": _transpose,
    "Pad": _pad,
}
