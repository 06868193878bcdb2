"""The saliency methods the evaluation compares, by name: SMUG, SMUG_base, IG, Grad-CAM,
boxes, SIS, and what each needs (the model as :class:`Subject`, the run's :class:`Settings`)."""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from smug_opt.backend_choice import BackendChoice
from smug_opt.evaluate._predict import PredictFn, chunks
from smug_opt.evaluate.baselines import grad_cam, pixel_integrated_gradients, token_integrated_gradients
from smug_opt.evaluate.boxes import Box, center_box, ground_truth_box, max_box
from smug_opt.evaluate.faithfulness import CURVE_STEPS
from smug_opt.evaluate.lsc import LSCResult, opt_box
from smug_opt.evaluate.results import Modality
from smug_opt.evaluate.road import ROAD_LEVELS
from smug_opt.evaluate.sis import sufficient_input_subset
from smug_opt.parameters import Method as SmugMethod
from smug_opt.parameters import SmugParameters

__all__ = ["METHODS", "NOT_IN_WIN_RATE", "Method", "MethodMap", "Settings", "Subject", "as_subject",
           "check_methods"]


@dataclass(frozen=True)
class Settings:
    """Everything a method may need besides the model and the input: the SMUG parameters
    (``smug``; its method is replaced by the variant being run), the backend and time
    limit of its solves, SIS's threshold and mask token, IG's steps, whether the
    model outputs logits (``softmax``), ROAD's removal fractions (``road_levels``), the
    stages of the model-randomisation check (``sanity_stages``, 0: not run) and the points
    of each deletion/insertion curve (``curve_steps``)."""

    smug: SmugParameters
    backend: str | BackendChoice
    time_limit: float
    sis_threshold: float
    mask_id: int
    ig_steps: int
    softmax: bool = False
    road_levels: tuple[float, ...] = ROAD_LEVELS
    sanity_stages: int = 0
    curve_steps: int = CURVE_STEPS

    def record(self) -> dict[str, Any]:
        """The settings as a run folder's configuration records them (flat, JSON-ready)."""
        return {"backend": str(self.backend), "k": self.smug.k, "gamma": self.smug.gamma,
                "cell": self.smug.cell, "time_limit": self.time_limit,
                "sis_threshold": self.sis_threshold, "mask_id": self.mask_id,
                "ig_steps": self.ig_steps, "softmax": self.softmax,
                "road_levels": list(self.road_levels), "sanity_stages": self.sanity_stages,
                "curve_steps": self.curve_steps,
                **({} if self.smug.eps is None else self.smug.robust_record())}


@dataclass(frozen=True, eq=False)
class Subject:
    """The model three ways: what ``explain`` receives, a predict function, the Keras model."""

    model: Any
    predict_fn: PredictFn
    keras_model: Any | None
    reference: Any | None = None
    """The :class:`~smug_opt.batch.ModelRef` the model was loaded from (None: given as an object)."""
    attributions: dict[tuple[bytes, int, int], Any] = field(init=False, default_factory=dict, repr=False)
    """The last input's first-layer Integrated Gradients by (input, label, steps): SMUG and
    SMUG_base select their neurons from the same IG, computed once (the costly part of both)."""


@dataclass(frozen=True, eq=False)
class MethodMap:
    """A method's map for one input; ``lsc`` when the method already scored its box;
    ``status`` and ``proof`` for a solver's mask (the SMUG methods): its status and whether
    its minimality is proven exactly (``"exact"``) or rests on the solver (``"solver"``);
    ``details``: a verified explanation's record (size, subset-minimal, minimum bound/gap)."""

    saliency: np.ndarray
    mask: np.ndarray | None
    lsc: LSCResult | None = None
    status: str | None = None
    proof: str | None = None
    details: dict[str, Any] | None = None


Compute = Callable[[Subject, Settings, np.ndarray, int, Any], MethodMap]
"""(subject, settings, input, label, annotation) -> map; annotation: a Box or a rationale."""


@dataclass(frozen=True)
class Method:
    """A saliency method the runner knows: its name, what it is, where it applies, whether it
    needs the model's gradients (a Keras model, or an ONNX/PyTorch network adapter)."""

    name: str
    description: str
    modalities: frozenset[str]
    compute: Compute
    needs_gradients: bool = False


def _smug(variant: SmugMethod) -> Compute:
    def compute(subject: Subject, s: Settings, x: np.ndarray, label: int, note: Any) -> MethodMap:
        from smug_opt.explanation import explain

        key = (hashlib.sha1(np.ascontiguousarray(x).tobytes()).digest(), label, s.smug.steps)
        e = explain(subject.model, x, params=s.smug.updated(method=variant), backend=s.backend,
                    time_limit=s.time_limit, target=label, attributions=subject.attributions.get(key))
        subject.attributions.clear()  # one input's at a time
        subject.attributions[key] = e.attributions
        if e.saliency is None or e.mask is None:
            status = "no solver result" if e.result is None else e.result.status.name
            raise ValueError(f"{variant} returned no mask ({status})")
        r = e.result
        return MethodMap(np.asarray(e.saliency, dtype=np.float64), np.asarray(e.mask, dtype=bool),
                         status=None if r is None else r.status.name,
                         proof=None if r is None or r.proof is None else str(r.proof.value))

    return compute


def _robust(subject: Subject, s: Settings, x: np.ndarray, label: int, note: Any) -> MethodMap:
    """The verified explanation of the model's prediction (which must be ``label``) at
    ``s.smug.eps``: the fixed pixels are the mask."""
    from smug_opt.executors import worker_cache
    from smug_opt.models.resolve import network_of
    from smug_opt.robustness.model_explanation import explain_robust

    p = s.smug
    if p.eps is None:
        raise ValueError("method robust needs eps (evaluate(..., eps=0.05), --eps 0.05)")
    ref = subject.reference
    if ref is None:
        network = network_of(subject.model)
    else:
        network = worker_cache(("robust-network", ref), lambda: network_of(
            ref.name, input_shape=ref.input_shape, input_layout=ref.input_layout,
            input_range=ref.input_range))
    result = explain_robust(network, x, eps=p.eps, minimum=p.minimum, time_limit=s.time_limit,
                            query_time=p.query_time, query_work=p.query_work, backend=s.backend,
                            target=label)
    fixed = np.asarray(result.fixed_view(), dtype=bool)
    fixed = (fixed.any(axis=-1) if fixed.ndim == 3 else fixed).reshape(x.shape[:2])
    record = result.record()
    kept = ("size", "inputs", "target", "eps", "subset_minimal", "minimum", "check")
    details = {key: record[key] for key in kept if key in record}
    status = "ROBUST" if result.check.passed else "CHECK_FAILED"
    return MethodMap(fixed.astype(np.float64), fixed, status=status, proof=result.proof, details=details)


def _network_adapter(subject: Subject) -> Any:
    """The subject's ONNX/PyTorch network adapter, or None."""
    from smug_opt.models.network_adapter import NetworkAdapter

    return subject.model if isinstance(subject.model, NetworkAdapter) else None


def _ig(subject: Subject, s: Settings, x: np.ndarray, label: int, note: Any) -> MethodMap:
    model = subject.keras_model
    if x.ndim == 1:
        return MethodMap(token_integrated_gradients(model, x, label, steps=s.ig_steps), None)
    if model is None:
        from smug_opt.evaluate.network_baselines import network_integrated_gradients

        return MethodMap(network_integrated_gradients(_network_adapter(subject), x, label, steps=s.ig_steps),
                         None)
    return MethodMap(pixel_integrated_gradients(model, x, label, steps=s.ig_steps), None)


def _gradcam(subject: Subject, s: Settings, x: np.ndarray, label: int, note: Any) -> MethodMap:
    if subject.keras_model is None:
        from smug_opt.evaluate.network_baselines import network_grad_cam

        return MethodMap(network_grad_cam(_network_adapter(subject), x, label), None)
    return MethodMap(grad_cam(subject.keras_model, x, label), None)


def _box_method(make_box: Callable[[tuple[int, int]], Box]) -> Compute:
    def compute(subject: Subject, s: Settings, x: np.ndarray, label: int, note: Any) -> MethodMap:
        mask = make_box(x.shape[:2]).mask(x.shape[:2])
        return MethodMap(mask.astype(np.float64), mask)

    return compute


def _optbox(subject: Subject, s: Settings, x: np.ndarray, label: int, note: Any) -> MethodMap:
    best = opt_box(subject.predict_fn, x, label)
    mask = best.box.mask(x.shape[:2])
    return MethodMap(mask.astype(np.float64), mask, best)


def _groundtruth(subject: Subject, s: Settings, x: np.ndarray, label: int, note: Any) -> MethodMap:
    if x.ndim == 1:
        if note is None:
            raise ValueError("groundtruth on text needs a rationale for this input; got none")
        mask = note
    else:
        box = ground_truth_box(x) if note is None else note
        mask = box.mask(x.shape[:2])
    return MethodMap(mask.astype(np.float64), mask)


def _sis(subject: Subject, s: Settings, x: np.ndarray, label: int, note: Any) -> MethodMap:
    mask = sufficient_input_subset(subject.predict_fn, x, label, threshold=s.sis_threshold, mask_id=s.mask_id)
    return MethodMap(mask.astype(np.float64), mask)


_IMAGE, _TEXT, _BOTH = frozenset({"image"}), frozenset({"text"}), frozenset({"image", "text"})

METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        Method("smug", "SMUG: solver-minimised mask, IG-scored cells", _BOTH, _smug(SmugMethod.SMUG)),
        Method("smug_base", "SMUG_base: receptive fields of the top-k neurons", _BOTH,
               _smug(SmugMethod.SMUG_BASE)),
        Method("ig", "Integrated Gradients (pixels, or token embeddings), zero baseline", _BOTH, _ig, True),
        Method("gradcam", "Grad-CAM on the last conv layer (feature map)", _IMAGE, _gradcam, True),
        Method("centerbox", "centred box with half the area", _IMAGE, _box_method(center_box)),
        Method("maxbox", "the whole input", _IMAGE, _box_method(max_box)),
        Method("optbox", "brute-force lowest-LSC box on a 10x10 grid", _IMAGE, _optbox),
        Method(
            "groundtruth",
            "annotated box (default: tightest box of non-zero pixels) or text rationale",
            _BOTH,
            _groundtruth,
        ),
        Method("sis", "Sufficient Input Subset by backward selection", _TEXT, _sis),
        Method("robust", "verified explanation: pixels that, fixed, keep the label within eps (--eps)",
               _IMAGE, _robust),
    )
}
"""Every method the runner knows, by name."""

NOT_IN_WIN_RATE = frozenset({"optbox"})
"""OptBox optimises LSC itself: like the paper, it is left out of Win%."""


def _keras_predict(model: Any, batch_size: int = 256) -> PredictFn:
    def predict(batch: np.ndarray) -> np.ndarray:
        parts = [np.asarray(model(batch[p], training=False)) for p in chunks(len(batch), batch_size)]
        return np.concatenate(parts)

    return predict


def as_subject(adapter_or_model: Any) -> Subject:
    """Read a Keras model, a model adapter (``.predict``, and ``.model`` for a Keras one) or a
    predict function."""
    keras = sys.modules.get("keras")
    if keras is not None and isinstance(adapter_or_model, keras.Model):
        return Subject(adapter_or_model, _keras_predict(adapter_or_model), adapter_or_model)
    inner = getattr(adapter_or_model, "model", None)
    predict = getattr(adapter_or_model, "predict", None)
    if keras is not None and isinstance(inner, keras.Model) and callable(predict):
        return Subject(adapter_or_model, predict, inner)
    if callable(predict):  # an adapter of a model that is no Keras model (ONNX, PyTorch)
        return Subject(adapter_or_model, predict, None)
    if callable(adapter_or_model):
        return Subject(adapter_or_model, adapter_or_model, None)
    raise TypeError(
        "evaluate needs a keras.Model, a model adapter with .predict and .model, or a predict "
        f"function (batch -> probabilities); got {type(adapter_or_model).__name__}"
    )


def check_methods(methods: Sequence[str], modality: Modality, subject: Subject) -> tuple[str, ...]:
    """The method names, checked: known, usable on ``modality`` and ``subject``, no repeats."""
    names = tuple(methods)
    if not names:
        raise ValueError(f"no method given; choose from {sorted(METHODS)}")
    unknown = [m for m in names if m not in METHODS]
    if unknown:
        raise ValueError(f"unknown method(s) {unknown}; choose from {sorted(METHODS)}")
    wrong = [m for m in names if modality not in METHODS[m].modalities]
    if wrong:
        usable = sorted(m for m, spec in METHODS.items() if modality in spec.modalities)
        raise ValueError(f"method(s) {wrong} do not apply to {modality} inputs; usable: {usable}")
    if len(set(names)) != len(names):
        raise ValueError(f"a method is listed twice: {list(names)}")
    gradient = [m for m in names if METHODS[m].needs_gradients]
    if gradient and subject.keras_model is None and (modality == "text" or _network_adapter(subject) is None):
        raise ValueError(
            f"method(s) {gradient} need the model's gradients: a Keras model (or an adapter with "
            f".model) or an ONNX/PyTorch network adapter (images); got {type(subject.model).__name__}"
        )
    return names
