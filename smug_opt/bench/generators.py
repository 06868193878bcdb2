"""Seeded random problems: strict 0/1 programs and first-layer-shaped SMUG problems; and
the paper-scale Keras model that end-to-end runs explain.

The problems need nothing but numpy and scipy, so the harness, its tests and the
micro-benchmarks run before (and independently of) the model zoo and the encoders;
:func:`paper_scale_model` imports Keras when it is called.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import scipy.sparse as sp

from smug_opt.ir import Problem, ProblemBuilder

__all__ = ["random_first_layer_problem", "random_strict_problem"]


def random_strict_problem(num_vars: int, num_rows: int, *, density: float = 0.1,
                          threshold: float = 0.5, seed: int = 0) -> Problem:
    """``min Σ x`` s.t. ``A x > threshold · (A·1)`` over 0/1 ``x``, with a sparse random ``A``.

    Every row has a positive sum ``A_i·1`` (rows are negated until it is), so keeping every
    variable is feasible and the problem is never infeasible; ``threshold`` in [0, 1) sets
    how much of each row must be kept, like SMUG's γ.
    """
    if num_vars < 2 or num_rows < 1:
        raise ValueError(f"need at least 2 variables and 1 row, got {num_vars} and {num_rows}")
    if not 0 < density <= 1:
        raise ValueError(f"density must be in (0, 1], got {density}")
    if not 0 <= threshold < 1:
        raise ValueError(f"threshold must be in [0, 1), got {threshold}")
    rng = np.random.default_rng(seed)
    per_row = max(2, round(density * num_vars))
    cols = np.argsort(rng.random((num_rows, num_vars)), axis=1)[:, :per_row]
    values = rng.normal(0.2, 1.0, size=(num_rows, per_row))
    sums = values.sum(axis=1)
    values[sums < 0] *= -1.0
    values[sums == 0, 0] += 1.0
    rows = np.repeat(np.arange(num_rows), per_row)
    A = sp.csr_matrix((values.ravel(), (rows, cols.ravel())), shape=(num_rows, num_vars))
    rhs = threshold * np.asarray(A.sum(axis=1)).ravel()
    return Problem.from_arrays(A, ">", rhs, metadata={
        "generator": "random-strict", "seed": seed, "density": density, "threshold": threshold,
    })


def random_first_layer_problem(
    k: int,
    *,
    cell: int = 4,
    gamma: float = 0.0,
    seed: int = 0,
    image_shape: tuple[int, int, int] = (224, 224, 3),
    filters: int = 64,
    kernel: int = 7,
    stride: int = 2,
    use_bias: bool = True,
    image: np.ndarray | None = None,
) -> Problem:
    """A SMUG first-layer problem on a seeded random Conv2D (``'same'`` padding, TensorFlow's
    split) and a seeded random image in [0, 1].

    Rows: ``Σ_c a_tc M_c > γ·o_t − b_t`` for the ``k`` neurons with the largest positive
    pre-activation ``o_t`` (a stand-in for the Integrated-Gradients ranking, which needs a
    trained head), ``a_tc`` the neuron's kernel taps times the image summed over cell ``c``.
    The defaults are the paper's Inception-v1 first layer (224×224×3, 64 filters 7×7/2) on
    4×4 cells: 3,136 binaries. ``use_bias=False`` is a bias-free stem (a conv followed by
    BatchNorm): at γ = 0 every row is then homogeneous, ``a·M > 0``. ``image`` (H×W×C,
    already preprocessed) replaces the random image, e.g. a photo; ``image_shape`` is then
    its shape.
    """
    if image is not None:
        image = np.asarray(image, dtype=np.float64)
        if image.ndim != 3 or not np.isfinite(image).all():
            raise ValueError(f"image must be a finite H×W×C array, got shape {image.shape}")
        image_shape = image.shape
    height, width, channels = image_shape
    rng = np.random.default_rng(seed)
    weights = rng.normal(0.0, math.sqrt(2.0 / (kernel * kernel * channels)),
                         size=(kernel, kernel, channels, filters))
    bias = rng.normal(0.0, 0.05, size=filters)
    if not use_bias:
        bias = np.zeros(filters)
    if image is None:
        image = rng.random(image_shape)

    out_h, out_w = -(-height // stride), -(-width // stride)
    pad_h = max((out_h - 1) * stride + kernel - height, 0)
    pad_w = max((out_w - 1) * stride + kernel - width, 0)
    top, left = pad_h // 2, pad_w // 2
    padded = np.pad(image, ((top, pad_h - top), (left, pad_w - left), (0, 0)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (kernel, kernel), axis=(0, 1))
    windows = windows[::stride, ::stride]  # (out_h, out_w, C, kh, kw)
    o = np.einsum("pqcij,ijcf->pqf", windows, weights, optimize=True) + bias

    flat = o.ravel()
    positive = np.flatnonzero(flat > 0)
    if positive.size < k:
        raise ValueError(f"only {positive.size} neurons are active, fewer than k = {k}")
    neurons = positive[np.argsort(-flat[positive], kind="stable")[:k]]
    position, filt = np.divmod(neurons, filters)
    p, q = np.divmod(position, out_w)
    # per-tap contributions Σ_c w[i, j, c, f] x[y, x, c] of every selected neuron
    taps = np.einsum("ncij,nijc->nij", windows[p, q], np.moveaxis(weights[..., filt], -1, 0))
    ys = (p * stride - top)[:, None, None] + np.arange(kernel)[None, :, None]
    xs = (q * stride - left)[:, None, None] + np.arange(kernel)[None, None, :]
    ys, xs = np.broadcast_arrays(ys, xs)
    inside = (ys >= 0) & (ys < height) & (xs >= 0) & (xs < width)
    cells_w = -(-width // cell)
    num_cells = -(-height // cell) * cells_w
    rows = np.broadcast_to(np.arange(k)[:, None, None], inside.shape)[inside]
    cols = (ys[inside] // cell) * cells_w + xs[inside] // cell
    A = sp.csr_matrix((taps[inside], (rows, cols)), shape=(k, num_cells))
    rhs = gamma * flat[neurons] - bias[filt]

    builder = ProblemBuilder(metadata={
        "encoding": "random-first-layer", "seed": seed, "k": k, "gamma": float(gamma),
        "cell": cell, "cell_grid": [-(-height // cell), cells_w], "image_shape": list(image_shape),
        "layer": f"conv2d {filters} {kernel}x{kernel}/{stride} same"
                 + ("" if use_bias else " no bias"),
    })
    mask = builder.add_binaries(num_cells)
    builder.add_constraints(A, mask, ">", rhs)
    builder.set_objective(mask, 1.0)
    return builder.build()


def paper_scale_model(seed: int = 0) -> Any:
    """An untrained Keras model on 224×224×3 inputs whose first layer is Inception-v1's
    (Conv2D 64 filters 7×7/2, ``'same'``, ReLU, biases drawn N(0, 0.05)): the paper's scale
    for end-to-end explain runs (4×4 cells: 3,136 mask variables), seeded."""
    import keras

    keras.utils.set_random_seed(seed)
    return keras.Sequential([
        keras.Input((224, 224, 3)),
        keras.layers.Conv2D(64, 7, strides=2, padding="same", activation="relu",
                            bias_initializer=keras.initializers.RandomNormal(stddev=0.05)),
        keras.layers.Conv2D(8, 3, strides=4, activation="relu"),
        keras.layers.GlobalAveragePooling2D(),
        keras.layers.Dense(10, activation="softmax"),
    ])
