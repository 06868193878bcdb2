"""Scoring one saliency map (LSC, sparsity, deletion/insertion AUC, rationale
precision/recall) and summarising a method over all inputs (the table's rows)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from smug_opt.evaluate.aggregates import lsc_quartiles, mean_estimate, token_precision_recall, win_rates
from smug_opt.evaluate.faithfulness import deletion_curve, insertion_curve
from smug_opt.evaluate.lsc import LSCResult, lsc_score
from smug_opt.evaluate.methods import METHODS, NOT_IN_WIN_RATE, MethodMap, Settings, Subject
from smug_opt.evaluate.randomisation import map_similarity
from smug_opt.evaluate.results import MethodOutcome, MethodSummary
from smug_opt.evaluate.road import road

__all__ = ["evaluate_input", "score_map", "summarize"]


def _failed(seconds: float, error: str) -> MethodOutcome:
    return MethodOutcome(
        saliency=None,
        mask=None,
        lsc=None,
        sparsity=None,
        deletion_auc=None,
        insertion_auc=None,
        precision=None,
        recall=None,
        seconds=seconds,
        error=error,
    )


def score_map(
    subject: Subject, settings: Settings, x: np.ndarray, label: int, note: Any, mm: MethodMap
) -> dict[str, Any]:
    """LSC and ROAD (images), sparsity, deletion/insertion AUC and rationale precision/recall
    of a map."""
    text = x.ndim == 1
    scores: dict[str, Any] = {"lsc": mm.lsc, "error": None, "sparsity": None}
    if not text and mm.lsc is None:
        try:
            scores["lsc"] = lsc_score(subject.predict_fn, x, label, mm.saliency)
        except ValueError as error:
            scores["error"] = f"lsc: {error}"
    if mm.mask is not None:
        region = mm.mask[x != settings.mask_id] if text else mm.mask
        scores["sparsity"] = float(region.mean()) if region.size else None
    pr = token_precision_recall(mm.mask, note) if text and note is not None and mm.mask is not None else None
    scores["precision"] = None if pr is None else pr.precision
    scores["recall"] = None if pr is None else pr.recall
    baseline = settings.mask_id if text else 0.0
    for key, curve in (("deletion_auc", deletion_curve), ("insertion_auc", insertion_curve)):
        scores[key] = curve(
            subject.predict_fn, x, label, mm.saliency, cell=settings.smug.cell, baseline=baseline,
            steps=settings.curve_steps).auc
    if not text:
        result = road(subject.predict_fn, x, label, mm.saliency, levels=settings.road_levels)
        scores["road_morf"], scores["road_lerf"] = result.morf, result.lerf
    return scores


def _sanity(method: str, randomised: Sequence[tuple[int, Subject]], settings: Settings, x: np.ndarray,
            label: int, note: Any, original: np.ndarray) -> dict[str, Any]:
    """The map's similarity to the maps of the randomised models (the last: all layers)."""
    stages: list[tuple[int, float | None, float | None]] = []
    for layers, subject in randomised:
        try:
            other = METHODS[method].compute(subject, settings, x, label, note).saliency
        except ValueError:
            stages.append((layers, None, None))
            continue
        stages.append((layers, *map_similarity(original, other)))
    if not stages:
        return {}
    return {"sanity_spearman": stages[-1][1], "sanity_ssim": stages[-1][2], "sanity_cascade": tuple(stages)}


def evaluate_input(
    subject: Subject, settings: Settings, methods: tuple[str, ...], x: np.ndarray, label: int, note: Any,
    randomised: Sequence[tuple[int, Subject]] = (),
) -> dict[str, MethodOutcome]:
    """Each method's map of ``x`` and its scores; a method that raises ValueError is recorded
    as failed, not raised. ``randomised``: the cascade of the model-randomisation check
    (layers randomised, model), each method's map compared with its map there."""
    out = {}
    for name in methods:
        start = time.perf_counter()
        try:
            mm = METHODS[name].compute(subject, settings, x, label, note)
        except ValueError as error:
            out[name] = _failed(time.perf_counter() - start, f"map: {error}")
            continue
        seconds = time.perf_counter() - start
        scores = score_map(subject, settings, x, label, note, mm)
        scores |= _sanity(name, randomised, settings, x, label, note, mm.saliency)
        out[name] = MethodOutcome(saliency=mm.saliency, mask=mm.mask, seconds=seconds, status=mm.status,
                                  proof=mm.proof, details=mm.details, **scores)
    return out


def _fraction_estimate(values: list[float | None]) -> Any:
    """Mean of the available fractions in [0, 1] (normal interval, clipped), or None."""
    finite = [v for v in values if v is not None and np.isfinite(v)]
    return mean_estimate(finite, bounds=(0.0, 1.0)) if finite else None


def _mean_estimate(values: list[float | None]) -> Any:
    """Mean of the available similarities in [-1, 1] (normal interval, clipped), or None."""
    finite = [v for v in values if v is not None and np.isfinite(v)]
    return mean_estimate(finite, bounds=(-1.0, 1.0)) if finite else None


def _lsc_or_nan(result: LSCResult | None) -> float:
    return np.nan if result is None else result.lsc


def summarize(
    outcomes: Sequence[dict[str, MethodOutcome]], methods: Sequence[str]
) -> tuple[MethodSummary, ...]:
    """One :class:`MethodSummary` per method over all inputs (Win% among the LSC methods)."""
    lsc = {m: [_lsc_or_nan(o[m].lsc) for o in outcomes] for m in methods}
    contenders = {m: v for m, v in lsc.items() if m not in NOT_IN_WIN_RATE and not np.isnan(v).all()}
    wins = win_rates(contenders) if len(contenders) >= 2 else {}
    summaries = []
    for m in methods:
        rows = [o[m] for o in outcomes]
        scores = [v for v in lsc[m] if np.isfinite(v)]
        summaries.append(
            MethodSummary(
                method=m,
                n=len(rows),
                failures=sum(r.saliency is None for r in rows),
                lsc=lsc_quartiles(scores) if scores else None,
                win=wins.get(m),
                sparsity=_fraction_estimate([r.sparsity for r in rows]),
                deletion=_fraction_estimate([r.deletion_auc for r in rows]),
                insertion=_fraction_estimate([r.insertion_auc for r in rows]),
                precision=_fraction_estimate([r.precision for r in rows]),
                recall=_fraction_estimate([r.recall for r in rows]),
                median_seconds=float(np.median([r.seconds for r in rows])),
                road_morf=_fraction_estimate([r.road_morf for r in rows]),
                road_lerf=_fraction_estimate([r.road_lerf for r in rows]),
                sanity_spearman=_mean_estimate([r.sanity_spearman for r in rows]),
                sanity_ssim=_mean_estimate([r.sanity_ssim for r in rows]),
            )
        )
    return tuple(summaries)
