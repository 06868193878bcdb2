"""Evaluating the ONNX operators whose inputs are all constants while a graph is read:
shape arithmetic (``Shape → Gather → Unsqueeze → Concat`` feeding a Reshape, as exporters
write ``x.view(x.size(0), -1)``) and constant expressions. ``Shape`` of a computed tensor
is its shape for batch 1: the reader treats the batch axis of a Reshape target as 1.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["FOLDABLE", "fold"]

FOLDABLE = ("Constant", "Shape", "Gather", "Unsqueeze", "Squeeze", "Concat", "Cast", "Slice",
            "ConstantOfShape", "Identity", "Reshape", "Flatten", "Transpose", "Add", "Sub", "Mul",
            "Div", "Neg")
"""The operators evaluated on constants (Shape also on a computed tensor)."""


def _constant_attribute(attrs: dict[str, Any]) -> np.ndarray:
    from onnx import numpy_helper

    if "value" in attrs:
        return numpy_helper.to_array(attrs["value"])
    for key, dtype in (("value_float", np.float32), ("value_floats", np.float32),
                       ("value_int", np.int64), ("value_ints", np.int64)):
        if key in attrs:
            return np.asarray(attrs[key], dtype=dtype)
    raise ValueError(f"a Constant with attributes {sorted(attrs)} is not read")


def _axes(inputs: list, attrs: dict[str, Any], position: int) -> tuple[int, ...] | None:
    if len(inputs) > position and inputs[position] is not None:
        return tuple(int(a) for a in np.asarray(inputs[position]).reshape(-1))
    return tuple(attrs["axes"]) if "axes" in attrs else None


def fold(op: str, inputs: list, attrs: dict[str, Any],
         shapes: dict[int, tuple[int, ...]]) -> list[np.ndarray]:
    """The outputs of ``op`` on constant ``inputs`` (``Shape`` may read a computed tensor,
    an int index into ``shapes``)."""
    from onnx import helper

    if op == "Constant":
        return [_constant_attribute(attrs)]
    if op == "Shape":
        value = inputs[0]
        full = (1, *shapes[value]) if isinstance(value, int) else np.shape(value)
        start, end = attrs.get("start", 0), attrs.get("end", len(full))
        return [np.asarray(full[start:end], dtype=np.int64)]
    if any(isinstance(v, int) for v in inputs):
        raise ValueError(f"{op} of a computed tensor is not read")
    x = inputs[0]
    if op == "Gather":
        return [np.take(x, np.asarray(inputs[1]), axis=attrs.get("axis", 0))]
    if op == "Unsqueeze":
        axes = _axes(inputs, attrs, 1)
        if axes is None:
            raise ValueError("an Unsqueeze of a constant names no axes (neither an input nor an attribute)")
        return [np.expand_dims(x, axes)]
    if op == "Squeeze":
        axes = _axes(inputs, attrs, 1)
        return [np.squeeze(x) if axes is None else np.squeeze(x, axes)]
    if op == "Concat":
        return [np.concatenate([np.atleast_1d(v) for v in inputs], axis=attrs["axis"])]
    if op == "Cast":
        return [x.astype(helper.tensor_dtype_to_np_dtype(attrs["to"]))]
    if op == "Slice":
        starts, ends = (np.asarray(v).reshape(-1) for v in inputs[1:3])
        axes = _axes(inputs, {}, 3) or tuple(range(len(starts)))
        steps = np.asarray(inputs[4]).reshape(-1) if len(inputs) > 4 and inputs[4] is not None \
            else np.ones(len(starts), dtype=np.int64)
        index = [slice(None)] * x.ndim
        for axis, a, b, s in zip(axes, starts, ends, steps, strict=True):
            index[axis] = slice(int(a), int(b), int(s))
        return [x[tuple(index)]]
    if op == "ConstantOfShape":
        fill = _constant_attribute(attrs) if attrs else np.zeros(1, dtype=np.float32)
        return [np.full(tuple(int(v) for v in x), fill.reshape(-1)[0], dtype=fill.dtype)]
    if op == "Identity":
        return [x]
    if op == "Reshape":
        target = [x.shape[i] if v == 0 else int(v) for i, v in enumerate(np.asarray(inputs[1]))]
        return [x.reshape(target)]
    if op == "Flatten":
        axis = attrs.get("axis", 1)
        return [x.reshape(int(np.prod(x.shape[:axis])), -1)]
    if op == "Transpose":
        return [np.transpose(x, attrs.get("perm"))]
    if op == "Neg":
        return [-x]
    a, b = inputs
    arithmetic: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
        "Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": _divide}
    return [arithmetic[op](a, b)]


def _divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if np.issubdtype(np.result_type(a, b), np.integer):
        return np.floor_divide(a, b)  # ONNX integer Div truncates; shapes are non-negative
    return np.true_divide(a, b)
