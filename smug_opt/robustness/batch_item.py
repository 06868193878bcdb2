"""One input of a batch run (:mod:`smug_opt.batch`) explained with method robust: the
network read once per worker, the record in the batch's form (``status``, ``mask_size``,
``cells`` beside the verified explanation's own fields) and the fixed values as the mask."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from smug_opt.explain_settings import ExplainSettings

__all__ = ["ROBUST_STATUS", "explain_robust_input", "robust_network"]

ROBUST_STATUS = "ROBUST"
"""A batch record's status when the set is proven robust and the attack re-check passed
(``CHECK_FAILED`` when the re-check found a counterexample: a bug to report)."""


def robust_network(model: Any, settings: ExplainSettings) -> Any:
    """The :class:`~smug_opt.network.graph.Network` of a batch's model (a
    :class:`~smug_opt.batch.ModelRef`, read once per worker, or a model object), with the
    input range the model reference or else ``settings`` declares (None: the model's own)."""
    from smug_opt.executors import worker_cache
    from smug_opt.model_ref import ModelRef
    from smug_opt.models.resolve import network_of

    if isinstance(model, ModelRef):
        given = model.input_range or settings.input_range
        return worker_cache(("robust-network", model, given), lambda: network_of(
            model.name, input_shape=model.input_shape, input_layout=model.input_layout, input_range=given))
    return network_of(model, input_range=settings.input_range)


def explain_robust_input(network: Any, x: np.ndarray, settings: ExplainSettings,
                         overlay: Path | None = None) -> tuple[dict[str, Any], np.ndarray]:
    """The record and the fixed values (bool, the input as smug-opt shows it) of the
    verified explanation of ``x``, with ``settings.params``' eps, minimum and query budget;
    ``overlay``: where to draw the fixed pixels of a picture."""
    from smug_opt.robustness.model_explanation import explain_robust

    p = settings.params
    result = explain_robust(network, x, eps=float(p.eps or 0.0), minimum=p.minimum,
                            time_limit=settings.time_limit, query_time=p.query_time, query_work=p.query_work,
                            backend=settings.backend, target=settings.target,
                            solve_options=dict(settings.solver_options))
    fixed = np.asarray(result.fixed_view(), dtype=bool).reshape(np.shape(x))
    record = {**result.record(), "status": ROBUST_STATUS if result.check.passed else "CHECK_FAILED",
              "mask_size": result.size, "cells": int(result.x.size)}
    picture = np.asarray(x, dtype=np.float64)
    if overlay is not None and picture.ndim >= 2:
        result.overlay(picture.reshape(picture.shape[:2] + picture.shape[2:]), overlay)
        record["overlay"] = str(Path(overlay.parent.name) / overlay.name)
    return record, fixed
