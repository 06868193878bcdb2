"""The models and inputs of the stress case: any network :func:`smug_opt.network.load.load_model`
reads (ONNX, Keras, PyTorch factory or ``.pt2``, embedded names), lowered to the flat form
the encoder reads, and a check of each mask by a forward pass of the ORIGINAL model in its
own runtime (onnxruntime, torch, Keras).

A Keras Dense stack (the embedded ``mnist-mlp``) keeps the MLP path: its check is a float64
forward pass of its actual weights, as before. Every other model's check runs the source
file or module in its framework, in float64 where that runs it so (torch), else float32
(onnxruntime, Keras), and reports the score margin it saw, so a float32 near-tie is visible.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from smug_opt.network.flat import FlatNetwork, Preprocess

__all__ = ["StressModel", "load_stress_model", "masked_model_input", "runtime_scores"]


@dataclass(frozen=True, eq=False)
class StressModel:
    """A model to stress: ``spec`` (what ``--model`` said), its ``kind``
    (:func:`~smug_opt.network.load.model_spec_kind`), the per-example ``input_shape`` of
    the source model, and either ``mlp`` (a Keras Dense stack) or ``pre`` + ``flat``."""

    spec: str
    kind: str
    tag: str
    digest: str
    input_shape: tuple[int, ...]
    mlp: Any = None
    pre: Preprocess | None = None
    flat: FlatNetwork | None = None

    @property
    def encodable(self) -> Any:
        """What :func:`~smug_opt.encode.full_network` takes."""
        return self.mlp if self.mlp is not None else self.flat

    @property
    def lowered(self) -> tuple[Preprocess, FlatNetwork]:
        """``(pre, flat)`` of a model that is not a Dense stack; ValueError for one that is."""
        if self.pre is None or self.flat is None:
            raise ValueError(f"stress model {self.tag!r} is a Dense stack (checked by its weights), "
                             "not lowered")
        return self.pre, self.flat

    @property
    def channels_first(self) -> bool:
        return not (len(self.input_shape) == 3 and self.input_shape[-1] < min(self.input_shape[:2]))


def load_stress_model(spec: str) -> StressModel:
    """The stress model ``spec`` names (an embedded name, ``.keras``/``.h5``, ``.onnx``,
    ``.pt2`` or ``package.module:factory``)."""
    from smug_opt.network.load import load_model, model_spec_kind
    from smug_opt.network.lower import lower

    kind = model_spec_kind(spec)
    tag = spec if kind in ("embedded", "factory") else Path(spec).stem
    if kind in ("embedded", "keras"):
        mlp = _keras_mlp(spec, kind, tag)
        if mlp is not None:
            return StressModel(spec, kind, tag, mlp.digest, tuple(mlp.adapter.input_shape), mlp=mlp)
    network = load_model(spec)
    pre, flat = lower(network)
    return StressModel(spec, kind, tag, network.digest, tuple(network.nodes[0].shape), pre=pre, flat=flat)


def _keras_mlp(spec: str, kind: str, tag: str) -> Any:
    """The Keras model as an MLP, or None when it is not a Dense stack."""
    from smug_opt.models.mlp import as_mlp

    if kind == "embedded":
        from smug_opt.models import zoo

        model = zoo.load(spec)
    else:
        from smug_opt.models.keras_adapter import load_model

        model = load_model(spec)
    try:
        return as_mlp(model, tag)
    except ValueError:
        return None


def masked_model_input(pre: Preprocess, x: np.ndarray, affine_mask: np.ndarray) -> np.ndarray:
    """The model input whose affine input is ``pre(x)`` with the values outside
    ``affine_mask`` at 0 (a masked value is 0 after the preprocessing: ``−shift/scale``)."""
    out = np.array(x, dtype=np.float64).reshape(-1)
    masked = ~np.asarray(affine_mask, dtype=bool)
    out[pre.index[masked]] = -pre.shift[masked] / pre.scale[masked]
    return out.reshape(np.shape(x))


def runtime_scores(model: StressModel, x_batch: np.ndarray) -> tuple[np.ndarray, str]:
    """Class scores of model inputs ``(batch, *input_shape)`` from the source model in its
    own runtime, and the dtype it ran in."""
    x_batch = np.asarray(x_batch, dtype=np.float64).reshape(-1, *model.input_shape)
    if model.kind == "onnx":
        import onnxruntime

        session = onnxruntime.InferenceSession(model.spec, providers=["CPUExecutionProvider"])
        feed = session.get_inputs()[0]
        dtype = np.float64 if feed.type == "tensor(double)" else np.float32
        shape = [d if isinstance(d, int) else x_batch.shape[0] for d in feed.shape]
        scores = session.run(None, {feed.name: x_batch.astype(dtype).reshape(shape)})[0]
        return np.asarray(scores, dtype=np.float64).reshape(x_batch.shape[0], -1), np.dtype(dtype).name
    from smug_opt.models import zoo

    if model.kind in ("factory", "pt2"):
        return _torch_scores(model.spec, model.kind, x_batch)
    if model.kind == "embedded" and zoo.is_pretrained(model.spec):
        return _torch_scores(zoo.pretrained_source(model.spec), "factory", x_batch)
    if model.kind == "embedded":
        keras_model = zoo.load_trained(model.spec)
    else:
        from smug_opt.models.keras_adapter import load_model

        keras_model = load_model(model.spec)
    scores = keras_model(x_batch.astype(np.float32), training=False)
    return np.asarray(scores, dtype=np.float64).reshape(x_batch.shape[0], -1), "float32"


def _torch_scores(spec: str, kind: str, x_batch: np.ndarray) -> tuple[np.ndarray, str]:
    """Scores from a ``package.module:factory`` (``kind`` "factory", run in float64) or a
    ``.pt2`` file (float32)."""
    import importlib

    import torch

    if kind == "factory":
        module_name, function_name = spec.split(":")
        module = getattr(importlib.import_module(module_name), function_name)().double().eval()
        dtype = torch.float64
    else:
        module = torch.export.load(spec).module()
        dtype = torch.float32
    with torch.no_grad():
        scores = module(torch.as_tensor(x_batch, dtype=dtype))
    return scores.detach().double().numpy().reshape(x_batch.shape[0], -1), str(dtype).removeprefix("torch.")
