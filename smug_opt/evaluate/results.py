"""Result types of an evaluation: one method on one input, one method over all inputs."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from smug_opt.evaluate.aggregates import Estimate, Quartiles
from smug_opt.evaluate.lsc import LSCResult

Modality = Literal["image", "text"]


@dataclass(frozen=True, eq=False)
class MethodOutcome:
    """One method on one input.

    ``saliency`` is (H, W) or (T,), ``None`` if the method failed (``error`` says why).
    ``mask`` is the kept region for masking methods, ``None`` for IG and Grad-CAM.
    ``lsc`` is ``None`` for text, on failure, or when the map selects no pixel. ``precision``
    and ``recall`` (against the rationale) exist for text masks when rationales are given.
    ``seconds`` is the time to compute the map. ``road_morf``/``road_lerf`` (images): ROAD's
    mean confidences (:mod:`smug_opt.evaluate.road`). ``sanity_spearman``/``sanity_ssim``:
    the map's similarity to the map of the fully randomised model (the model-randomisation
    check, :mod:`smug_opt.evaluate.randomisation`), ``None`` when not run;
    ``sanity_cascade`` holds ``(layers randomised, Spearman, SSIM)`` for each stage of the
    cascade (empty when not run). ``status``/``proof``: a solver mask's status and proof level
    (:class:`~smug_opt.evaluate.methods.MethodMap`), ``None`` for other methods;
    ``details``: what a verified explanation proved (size, subset-minimal, minimum bound and
    gap), ``None`` for other methods.
    """

    saliency: np.ndarray | None
    mask: np.ndarray | None
    lsc: LSCResult | None
    sparsity: float | None
    deletion_auc: float | None
    insertion_auc: float | None
    precision: float | None
    recall: float | None
    seconds: float
    error: str | None
    road_morf: float | None = None
    road_lerf: float | None = None
    sanity_spearman: float | None = None
    sanity_ssim: float | None = None
    sanity_cascade: tuple[tuple[int, float | None, float | None], ...] = ()
    status: str | None = None
    proof: str | None = None
    details: dict[str, Any] | None = None


@dataclass(frozen=True)
class MethodSummary:
    """One method over every input: the rows of the paper's Table 1 and more.

    A field is ``None`` when it does not apply (sparsity of IG/Grad-CAM, LSC on text, Win%
    of OptBox) or when no input produced a value. ``failures`` counts inputs whose map could
    not be computed.
    """

    method: str
    n: int
    failures: int
    lsc: Quartiles | None
    win: Estimate | None
    sparsity: Estimate | None
    deletion: Estimate | None
    insertion: Estimate | None
    precision: Estimate | None
    recall: Estimate | None
    median_seconds: float
    road_morf: Estimate | None = None
    road_lerf: Estimate | None = None
    sanity_spearman: Estimate | None = None
    sanity_ssim: Estimate | None = None


@dataclass(frozen=True, eq=False)
class EvaluationResult:
    """Everything :func:`~smug_opt.evaluate.evaluation.evaluate` computed.

    ``outcomes[i][method]`` is that method on input ``i``; ``summaries`` follow ``methods``;
    ``files`` maps ``"markdown"``, ``"json"``, ``"records"`` and (images) ``"examples"`` to
    the files written, empty without ``out_dir``.
    """

    modality: Modality
    methods: tuple[str, ...]
    outcomes: tuple[dict[str, MethodOutcome], ...]
    summaries: tuple[MethodSummary, ...]
    files: dict[str, Path] = field(default_factory=dict)
