"""Gradient baselines for Keras models: Integrated Gradients (pixels or token embeddings), Grad-CAM.

TensorFlow is imported inside the functions, so importing this module stays cheap.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from smug_opt.evaluate.boxes import crop_and_resize, max_box


def _tf() -> Any:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    return tf


def _check_image(image: np.ndarray) -> np.ndarray:
    image = np.asarray(image, dtype=np.float32)
    if image.ndim != 3:
        raise ValueError(f"image must be (H, W, C); got shape {image.shape}")
    return image


def label_output(out: Any, label: int) -> Any:
    """The model's output for ``label``: a softmax column, or a single sigmoid (1 - p for 0)."""
    if out.shape[-1] == 1:
        if label not in (0, 1):
            raise ValueError(f"label must be 0 or 1 for a single sigmoid output; got {label}")
        return out[:, 0] if label == 1 else 1.0 - out[:, 0]
    if not 0 <= label < out.shape[-1]:
        raise ValueError(f"label {label} is out of range for {out.shape[-1]} model outputs")
    return out[:, label]


def pixel_integrated_gradients(
    model: Any,
    image: np.ndarray,
    label: int,
    *,
    steps: int = 64,
    baseline: np.ndarray | None = None,
    batch_size: int = 64,
) -> np.ndarray:
    """Integrated Gradients in pixel space (Sundararajan et al. 2017), summed over channels.

    Target: the model's output for ``label``. Baseline: black (zeros) unless given. The
    path integral uses the midpoint rule on ``steps`` points, ``batch_size`` per gradient
    call. The (H, W) map sums to about ``F(x) - F(baseline)`` (completeness).
    """
    tf = _tf()
    image = _check_image(image)
    base = np.zeros_like(image) if baseline is None else np.asarray(baseline, np.float32)
    if base.shape != image.shape:
        raise ValueError(f"baseline shape {base.shape} does not match image shape {image.shape}")
    if steps < 1 or batch_size < 1:
        raise ValueError(f"steps and batch_size must be >= 1; got {steps=}, {batch_size=}")
    alphas = ((np.arange(steps) + 0.5) / steps).astype(np.float32)
    total = np.zeros_like(image)
    for start in range(0, steps, batch_size):
        a = alphas[start : start + batch_size, None, None, None]
        path = tf.convert_to_tensor(base + a * (image - base))
        with tf.GradientTape() as tape:
            tape.watch(path)
            target = label_output(model(path, training=False), label)
        total += tape.gradient(target, path).numpy().sum(axis=0)
    return ((image - base) * total / steps).sum(axis=-1)


def _embedding_split(model: Any) -> tuple[Any, list]:
    """The model's leading Embedding layer and the layers after it (a linear chain)."""
    import keras

    layers = [layer for layer in model.layers if not isinstance(layer, keras.layers.InputLayer)]
    if not layers or not isinstance(layers[0], keras.layers.Embedding):
        first = type(layers[0]).__name__ if layers else "nothing"
        raise ValueError(
            f"token Integrated Gradients needs a Sequential model that starts with an Embedding "
            f"layer; model {model.name!r} starts with {first}"
        )
    return layers[0], layers[1:]


def token_integrated_gradients(
    model: Any,
    tokens: np.ndarray,
    label: int,
    *,
    steps: int = 64,
    batch_size: int = 64,
) -> np.ndarray:
    """Integrated Gradients for a text model, taken on the token embeddings (zero baseline).

    The model must be a Sequential chain starting with an Embedding layer. Midpoint rule on
    ``steps`` points, ``batch_size`` per gradient call; the (T,) map (summed over embedding
    dimensions) adds up to about ``F(x) - F(zero embeddings)``.
    """
    tf = _tf()
    tokens = np.asarray(tokens)
    if tokens.ndim != 1 or not np.issubdtype(tokens.dtype, np.integer):
        raise ValueError(f"tokens must be a 1-D integer array; got {tokens.dtype} {tokens.shape}")
    if steps < 1 or batch_size < 1:
        raise ValueError(f"steps and batch_size must be >= 1; got {steps=}, {batch_size=}")
    embedding, rest = _embedding_split(model)
    embedded = np.asarray(embedding(tokens[None]), dtype=np.float32)[0]  # (T, C)
    alphas = ((np.arange(steps) + 0.5) / steps).astype(np.float32)
    total = np.zeros_like(embedded)
    for start in range(0, steps, batch_size):
        path = tf.convert_to_tensor(alphas[start : start + batch_size, None, None] * embedded)
        with tf.GradientTape() as tape:
            tape.watch(path)
            value = path
            for layer in rest:
                value = layer(value, training=False)
            target = label_output(value, label)
        total += tape.gradient(target, path).numpy().sum(axis=0)
    return (embedded * total / steps).sum(axis=-1)


def last_conv_layer(model: Any) -> Any:
    """The last 2-D convolution layer of a Keras model (ValueError if it has none)."""
    import keras

    conv_types = (
        keras.layers.Conv2D,
        keras.layers.SeparableConv2D,
        keras.layers.DepthwiseConv2D,
    )
    convs = [layer for layer in model.layers if isinstance(layer, conv_types)]
    if not convs:
        kinds = sorted({type(layer).__name__ for layer in model.layers})
        raise ValueError(
            f"Grad-CAM needs a 2-D convolution layer; model {model.name!r} has none "
            f"(its layers: {', '.join(kinds)})"
        )
    return convs[-1]


def grad_cam(model: Any, image: np.ndarray, label: int, *, layer_name: str | None = None) -> np.ndarray:
    """Grad-CAM (Selvaraju et al. 2017) on the last conv layer, upsampled bilinearly to (H, W).

    Channel weights are the spatial means of the gradient of the model's output for
    ``label`` with respect to the layer's activations; the map is ``relu`` of their
    weighted sum.
    """
    tf = _tf()
    import keras

    image = _check_image(image)
    layer = model.get_layer(layer_name) if layer_name else last_conv_layer(model)
    if isinstance(model, keras.Sequential):
        # a Sequential model's own graph does not pass through ``layer.output``: run the
        # layers in order and watch the chosen layer's activations
        layers = list(model.layers)
        split = layers.index(layer) + 1
        with tf.GradientTape() as tape:
            features = tf.convert_to_tensor(image[None], dtype=tf.float32)
            for part in layers[:split]:
                features = part(features, training=False)
            tape.watch(features)
            out = features
            for part in layers[split:]:
                out = part(out, training=False)
            target = label_output(out, label)
    else:
        inputs = getattr(model, "inputs", None) or []
        if len(inputs) != 1 or len(model.outputs) != 1:
            raise ValueError(
                f"Grad-CAM needs a built Keras model with one input and one output; model "
                f"{model.name!r} has {len(inputs)} input(s) (build it with keras.Input)"
            )
        probe = keras.Model(inputs[0], [layer.output, model.outputs[0]])
        with tf.GradientTape() as tape:
            features, out = probe(image[None], training=False)
            target = label_output(out, label)
    grads = tape.gradient(target, features)
    if grads is None:
        raise ValueError(f"the output of model {model.name!r} does not depend on layer {layer.name!r}")
    weights = tf.reduce_mean(grads, axis=(1, 2))  # (1, K)
    cam = tf.nn.relu(tf.einsum("bhwk,bk->bhw", features, weights))[0].numpy()
    cam = cam.astype(np.float64)[:, :, None]
    return crop_and_resize(cam, max_box(cam.shape[:2]), size=image.shape[:2])[0, :, :, 0]
