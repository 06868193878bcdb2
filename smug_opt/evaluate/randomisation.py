"""The model-randomisation sanity check (Adebayo et al., NeurIPS 2018): does the map depend
on what the model learned?

The weighted layers (dense and convolution kernels) are re-initialised in a cascade from
the top (output) layer down, each randomised layer's weights and biases drawn from
``Normal(0, σ)`` with σ the standard deviation of that layer's trained kernel (a
BatchNorm folded into a convolution is randomised with it). A method whose map stays
similar to the map of the trained model (Spearman rank correlation, SSIM of the maps
scaled to [0, 1]) is not explaining the model: edge detectors and model-free boxes fail
the check. Keras models and :class:`~smug_opt.models.network_adapter.NetworkAdapter`
models (ONNX, PyTorch) are randomised; an Embedding layer is not.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["RandomisedModel", "cascade", "map_similarity"]


@dataclass(frozen=True, eq=False)
class RandomisedModel:
    """A copy of the model with its top ``layers`` weighted layers re-initialised (``names``,
    top first); ``model`` is of the same kind as the original (Keras model or adapter)."""

    layers: int
    names: tuple[str, ...]
    model: Any


def _stage_counts(total: int, stages: int) -> list[int]:
    """How many top layers each cascade stage randomises: up to ``stages`` evenly spaced
    counts, ending with every layer."""
    if stages < 1:
        raise ValueError(f"stages must be >= 1; got {stages}")
    n = min(stages, total)
    return sorted({math.ceil(total * (s + 1) / n) for s in range(n)})


def _draw(shapes: list[tuple[int, ...]], sigma: float, rng: np.random.Generator) -> list[np.ndarray]:
    return [rng.normal(0.0, sigma, shape) for shape in shapes]


def _keras_cascade(model: Any, stages: int, seed: int) -> list[RandomisedModel]:
    import keras

    weighted = [layer for layer in model.layers if getattr(layer, "kernel", None) is not None]
    if not weighted:
        raise ValueError(f"model {model.name!r} has no dense or convolution kernel to randomise")
    top_first = weighted[::-1]
    out = []
    for count in _stage_counts(len(top_first), stages):
        rng = np.random.default_rng(seed)
        copy = keras.models.clone_model(model)
        copy.set_weights(model.get_weights())
        for layer in top_first[:count]:
            target = copy.get_layer(layer.name)
            sigma = float(np.std(np.asarray(layer.kernel))) or 1.0
            weights = target.get_weights()
            target.set_weights([w.astype(np.asarray(v).dtype) for w, v in
                                zip(_draw([np.shape(v) for v in weights], sigma, rng), weights, strict=True)])
        out.append(RandomisedModel(count, tuple(layer.name for layer in top_first[:count]), copy))
    return out


def _network_cascade(adapter: Any, stages: int, seed: int) -> list[RandomisedModel]:
    from smug_opt.models.network_adapter import NetworkAdapter
    from smug_opt.network.ops import Conv, Dense

    network = adapter.network
    weighted = [i for i, node in enumerate(network.nodes) if isinstance(node.op, (Conv, Dense))]
    if not weighted:
        raise ValueError(f"network {network.name!r} has no dense or convolution layer to randomise")
    top_first = weighted[::-1]
    out = []
    for count in _stage_counts(len(top_first), stages):
        rng = np.random.default_rng(seed)
        nodes = list(network.nodes)
        for index in top_first[:count]:
            node = nodes[index]
            sigma = float(np.std(node.op.weight)) or 1.0
            weight, bias = _draw([node.op.weight.shape, node.op.bias.shape], sigma, rng)
            op = dataclasses.replace(node.op, weight=weight, bias=bias)
            nodes[index] = dataclasses.replace(node, op=op)
        randomised = dataclasses.replace(network, nodes=tuple(nodes),
                                         digest=f"{network.digest}:randomised-top-{count}-seed-{seed}")
        copy = NetworkAdapter(randomised, dtype=adapter.dtype, batch_size=adapter.batch_size)
        names = tuple(network.nodes[i].name for i in top_first[:count])
        out.append(RandomisedModel(count, names, copy))
    return out


def cascade(model: Any, *, stages: int = 4, seed: int = 0) -> list[RandomisedModel]:
    """The cascade of randomised copies of ``model`` (a Keras model, an adapter of one, or a
    :class:`~smug_opt.models.network_adapter.NetworkAdapter`), at most ``stages`` of them:
    evenly spaced numbers of top layers, the last one every weighted layer."""
    import sys

    from smug_opt.models.network_adapter import NetworkAdapter

    if isinstance(model, NetworkAdapter):
        return _network_cascade(model, stages, seed)
    keras = sys.modules.get("keras")
    inner = model if keras is not None and isinstance(model, keras.Model) else getattr(model, "model", None)
    if keras is not None and isinstance(inner, keras.Model):
        return _keras_cascade(inner, stages, seed)
    raise TypeError(f"the randomisation check needs a Keras model or an ONNX/PyTorch network adapter; "
                    f"got {type(model).__name__}")


def _unit(values: np.ndarray) -> np.ndarray:
    span = float(values.max() - values.min())
    return (values - values.min()) / span if span > 0 else np.zeros_like(values)


def map_similarity(original: np.ndarray, randomised: np.ndarray) -> tuple[float | None, float | None]:
    """``(Spearman, SSIM)`` of two maps of one input. Equal maps give (1, 1); Spearman is
    ``None`` when exactly one map is constant, SSIM when the maps are not 2-D images of at
    least 7×7 (text)."""
    from scipy.stats import spearmanr

    a = np.asarray(original, dtype=np.float64)
    b = np.asarray(randomised, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"the maps must have one shape; got {a.shape} and {b.shape}")
    if np.array_equal(a, b):
        return 1.0, (1.0 if a.ndim == 2 and min(a.shape) >= 7 else None)
    constant = [float(np.ptp(m)) == 0.0 for m in (a, b)]
    rho = None if any(constant) else float(spearmanr(a.ravel(), b.ravel()).statistic)
    ssim = None
    if a.ndim == 2 and min(a.shape) >= 7:
        from skimage.metrics import structural_similarity

        ssim = float(structural_similarity(_unit(a), _unit(b), data_range=1.0))
    return rho, ssim
