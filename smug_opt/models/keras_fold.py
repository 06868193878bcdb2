"""Folding the Keras layers of a stem into one exact :class:`~smug_opt.models.base.AffineLayer`:
kernels and biases read in float64, ZeroPadding and inference BatchNormalization folded in,
a SeparableConv2D's two kernels multiplied into one, and the activations recognised.
:mod:`smug_opt.models.keras_stem` walks the graph and calls these."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from smug_opt.models._keras import import_keras
from smug_opt.models.activations import SUPPORTED, Activation
from smug_opt.models.base import AffineLayer, LayerKind, resolve_padding

__all__ = ["ACTIVATION_LAYERS", "AFFINE", "activation_from_function", "describe", "fold_affine",
           "fused_activation", "known_shape", "layer_activation", "layer_class"]

AFFINE: dict[str, LayerKind] = {
    "Dense": LayerKind.DENSE, "Conv1D": LayerKind.CONV1D, "Conv2D": LayerKind.CONV2D,
    "DepthwiseConv2D": LayerKind.CONV2D, "SeparableConv2D": LayerKind.CONV2D}
"""The Keras layers the stem folds, and the kind of affine layer each becomes."""
ACTIVATION_LAYERS = ("ReLU", "LeakyReLU", "ELU", "Activation")
"""The Keras layers that apply an activation on their own."""


def layer_class(layer: Any) -> str:
    """The class name of a built-in Keras layer; module-qualified for any other class, so a
    subclass or look-alike is never mistaken for the layer it resembles."""
    cls = type(layer)
    return cls.__name__ if cls.__module__.startswith("keras.") else f"{cls.__module__}.{cls.__qualname__}"


def describe(layer: Any) -> str:
    """``Conv2D 'conv1'``: a layer as error messages name it."""
    return f"{layer_class(layer)} {layer.name!r}"


def activation_from_function(function: Callable, where: str) -> Activation:
    """The supported activation a Keras activation function is; ValueError naming ``where`` if none."""
    name = import_keras().activations.serialize(function)
    name = name if isinstance(name, str) else getattr(function, "__name__", repr(function))
    if name not in SUPPORTED:
        raise ValueError(
            f"{where} has activation {name!r}; SMUG needs an element-wise activation that is "
            f"non-decreasing on [0, inf): {', '.join(SUPPORTED)} (see smug_opt.models.activations)"
        )
    return Activation(name, negative_slope=0.2 if name == "leaky_relu" else 0.0)


def fused_activation(layer: Any) -> Activation:
    """The activation fused into the first affine layer (its ``activation`` argument)."""
    return activation_from_function(layer.activation, f"the first affine layer {describe(layer)}")


def layer_activation(layer: Any) -> Activation:
    """The activation a ReLU, LeakyReLU, ELU or Activation layer applies."""
    name = layer_class(layer)
    if name == "Activation":
        return activation_from_function(layer.activation, describe(layer))
    if name == "ELU":
        return Activation("elu", alpha=float(layer.alpha))
    slope = float(layer.negative_slope)
    if name == "LeakyReLU":
        return Activation("leaky_relu", negative_slope=slope)
    if float(layer.threshold) != 0.0:
        raise ValueError(f"{describe(layer)} has threshold {layer.threshold}; only threshold=0 is supported")
    cap = None if layer.max_value is None else float(layer.max_value)
    return Activation("relu" if slope == 0 else "leaky_relu", max_value=cap, negative_slope=slope)


def known_shape(shape: tuple, what: str) -> tuple[int, ...]:
    """``shape`` as ints; ValueError naming ``what`` when an axis is unknown."""
    if any(size is None for size in shape):
        raise ValueError(f"{what} must have a fully known shape per example, got {shape}")
    return tuple(int(size) for size in shape)


def kernel_and_bias(layer: Any) -> tuple[np.ndarray, np.ndarray]:
    """A full (…, C, F) float64 kernel: depthwise kernels spread over their channels,
    a separable convolution's depthwise and pointwise kernels multiplied out."""
    name = layer_class(layer)
    if name == "SeparableConv2D":
        depthwise = np.asarray(layer.depthwise_kernel.numpy(), dtype=np.float64)
        pointwise = np.asarray(layer.pointwise_kernel.numpy(), dtype=np.float64)
        kh, kw, channels, multiplier = depthwise.shape
        kernel = np.einsum("hwcm,cmf->hwcf", depthwise, pointwise.reshape(channels, multiplier, -1))
    elif name == "DepthwiseConv2D":
        depthwise = np.asarray(layer.kernel.numpy(), dtype=np.float64)
        kh, kw, channels, multiplier = depthwise.shape
        kernel = np.zeros((kh, kw, channels, channels * multiplier))
        for c in range(channels):
            kernel[:, :, c, c * multiplier : (c + 1) * multiplier] = depthwise[:, :, c, :]
    else:
        kernel = np.asarray(layer.kernel.numpy(), dtype=np.float64)
    bias = np.zeros(kernel.shape[-1]) if layer.bias is None else np.asarray(layer.bias.numpy(), np.float64)
    return kernel, bias


def fold_affine(layer: Any, padding: list, batch_norm: Any | None) -> AffineLayer:
    """The float64 affine layer with ZeroPadding and BatchNormalization folded in."""
    name = layer_class(layer)
    kind = AFFINE[name]
    kernel, bias = kernel_and_bias(layer)
    if batch_norm is not None:
        kernel, bias = fold_batch_norm(batch_norm, kernel, bias)
    source = padding[0] if padding else layer
    input_shape = known_shape(source.input.shape[1:], f"the input of {describe(source)}")
    if kind is LayerKind.DENSE:
        if len(input_shape) != 1:
            raise ValueError(
                f"the first affine layer {describe(layer)} reads per-example inputs of shape "
                f"{input_shape}; a first Dense layer needs a flat input (add a Flatten layer)"
            )
        return AffineLayer(kind, kernel, bias, (), (), (), input_shape, (kernel.shape[-1],))
    if layer.data_format != "channels_last" or getattr(layer, "groups", 1) != 1:
        raise ValueError(
            f"the first affine layer {describe(layer)} must have data_format='channels_last' "
            f"and groups=1, got {layer.data_format!r} and {getattr(layer, 'groups', 1)}"
        )
    rank = len(input_shape) - 1
    extra = [(0, 0)] * rank
    for pad in padding:
        if getattr(pad, "data_format", "channels_last") != "channels_last":
            raise ValueError(f"{describe(pad)}: only data_format='channels_last' is supported")
        amounts = pad.padding if rank > 1 else (pad.padding,)
        if len(amounts) != rank:
            raise ValueError(f"{describe(pad)} pads {len(amounts)} axes but {describe(layer)} has {rank}")
        extra = [(a + int(p[0]), b + int(p[1])) for (a, b), p in zip(extra, amounts, strict=True)]
    padded = [size + a + b for size, (a, b) in zip(input_shape[:-1], extra, strict=True)]
    own = [
        resolve_padding(layer.padding, size, k, s, d)
        for size, k, s, d in zip(padded, kernel.shape[:-2], layer.strides, layer.dilation_rate, strict=True)
    ]
    output_shape = known_shape(layer.output.shape[1:], f"the output of {describe(layer)}")
    return AffineLayer(
        kind,
        kernel,
        bias,
        tuple(layer.strides),
        tuple(layer.dilation_rate),
        tuple((a + c, b + d) for (a, b), (c, d) in zip(extra, own, strict=True)),
        input_shape,
        output_shape,
    )


def fold_batch_norm(layer: Any, kernel: np.ndarray, bias: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``BN(W·x + b)`` with inference statistics as one affine map ``W'·x + b'``."""
    axis = layer.axis if isinstance(layer.axis, int) else tuple(layer.axis)
    rank = len(layer.input.shape)
    if axis not in (-1, rank - 1, (-1,), (rank - 1,)):
        raise ValueError(
            f"{describe(layer)} normalises axis {layer.axis}; only the channel axis (-1) can be "
            "folded into the first affine layer"
        )

    def value(weight: Any, default: float) -> np.ndarray:
        if weight is None:
            return np.full(kernel.shape[-1], default)
        return np.asarray(weight.numpy(), dtype=np.float64)

    scale = value(layer.gamma, 1.0) / np.sqrt(value(layer.moving_variance, 1.0) + float(layer.epsilon))
    shift = value(layer.beta, 0.0) - value(layer.moving_mean, 0.0) * scale
    return kernel * scale, bias * scale + shift
