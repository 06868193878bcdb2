"""Verified explanations of any model smug-opt reads (embedded, Keras, ONNX, PyTorch):
the model's :class:`~smug_opt.network.graph.Network` in flat form, the input in the
network's layout, ε in the model's input units (before any in-graph normalisation, clipped
to the model's declared input range), and a record, arrays and overlay to save."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from smug_opt.backend_choice import DEFAULT_BACKEND, BackendChoice
from smug_opt.network.graph import Network
from smug_opt.query_work import Work
from smug_opt.robustness.check import AttackCheck, attack_check
from smug_opt.robustness.explanation import RobustExplanation, robust_explanation
from smug_opt.robustness.minimum import MinimumExplanation, minimum_explanation

__all__ = ["RobustResult", "explain_robust"]

LEGEND = "left: input; right: fixed pixels in red (any other pixel may move by eps), the rest dimmed"


@dataclass(frozen=True, eq=False)
class RobustResult:
    """A verified explanation of ``network``'s prediction ``label`` on ``x`` (flat, the
    network's layout): ``subset`` the subset-minimal one, ``minimum`` the hitting sets'
    (with ``--minimum``), ``check`` the attack re-check of the returned set."""

    network: Network
    x: np.ndarray
    label: int
    eps: float
    valid_range: tuple[float, float]
    subset: RobustExplanation
    minimum: MinimumExplanation | None
    check: AttackCheck
    seconds: float
    settings: Mapping[str, Any]

    @property
    def fixed(self) -> np.ndarray:
        """The returned explanation: the minimum search's set when it ran, else the subset-minimal."""
        return self.subset.fixed if self.minimum is None else self.minimum.fixed

    @property
    def size(self) -> int:
        return int(self.fixed.sum())

    @property
    def proof(self) -> str:
        return self.subset.proof if self.minimum is None else self.minimum.proof

    def fixed_view(self) -> np.ndarray:
        """``fixed`` in the model's input layout as smug-opt shows it (channels last)."""
        from smug_opt.models.network_stem import read_network_stem

        view = read_network_stem(self.network).input_view
        return view.to_view(self.fixed.reshape(1, *self.network.input_shape))[0]

    def record(self) -> dict[str, Any]:
        """A JSON-ready summary: what is guaranteed, how it was proven, sizes and times."""
        s = self.subset
        record: dict[str, Any] = {
            "method": "robust", "model": self.network.name, "target": self.label, "eps": self.eps,
            "valid_range": list(self.valid_range), "inputs": int(self.x.size), "size": self.size,
            "proof": self.proof,
            "guarantee": f"every input equal to this one on the {self.size} fixed values and within "
                         f"eps={self.eps:g} of it elsewhere (clipped to {list(self.valid_range)}) "
                         f"gets class {self.label}",
            "subset_minimal": {"size": s.size, "proof": s.proof, "subset_minimal": s.subset_minimal,
                               "necessary": s.necessary, "undecided": s.undecided,
                               "queries": s.queries, "seconds": round(s.seconds, 3)},
            "check": self.check.to_dict(), "seconds": round(self.seconds, 3), **dict(self.settings)}
        if self.minimum is not None:
            m = self.minimum
            record["minimum"] = {"size": m.size, "lower_bound": m.lower_bound, "gap": m.gap,
                                 "proven_minimum": m.proven, "proof": m.proof, "cores": m.cores,
                                 "hitting_set_rounds": m.rounds, "queries": m.queries,
                                 "seconds": round(m.seconds, 3), "message": m.message}
        return record

    def save(self, out_dir: str | Path, picture: np.ndarray | None = None, title: str = "",
             info: Mapping[str, Any] | None = None) -> Path:
        """Write ``fixed.npy`` (model layout), ``record.json`` (``info`` first) and, for a
        picture (the input as shown, ``(H, W[, C])``), ``overlay.png`` with the fixed pixels in red."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        np.save(out / "fixed.npy", self.fixed.reshape(self.network.input_shape))
        record = {**dict(info or {}), **self.record()}
        (out / "record.json").write_text(json.dumps(record, indent=2) + "\n")
        if picture is not None:
            self.overlay(picture, out / "overlay.png", title)
        return out

    def overlay(self, picture: np.ndarray, path: Path, title: str = "") -> Path:
        """The overlay of the fixed pixels (a pixel is fixed when any of its channels is)."""
        from smug_opt import render

        image = np.asarray(picture, dtype=np.float64)
        fixed = self.fixed_view()
        if image.ndim == 3 and fixed.ndim == 3:
            fixed = np.asarray(fixed.any(axis=-1))
        fixed = fixed.reshape(image.shape[:2])
        title = title or (f"robust explanation of class {self.label} on {self.network.name}: "
                          f"{self.size}/{self.x.size} values fixed, eps {self.eps:g}")
        return render.overlay_png(image, fixed.astype(np.float64), path, title=title, legend=LEGEND)


def explain_robust(model: Any, x: np.ndarray, *, eps: float, minimum: bool = False,
                   time_limit: float = 60.0, query_time: float = 5.0,
                   backend: str | BackendChoice = DEFAULT_BACKEND,
                   target: int | None = None, input_shape: tuple[int, ...] | None = None,
                   input_layout: str | None = None, input_range: tuple[float, float] | None = None,
                   solve_options: Mapping[str, Any] | None = None, lean: bool = True,
                   query_work: Work | None = None, alpha_steps: int | None = None) -> RobustResult:
    """A verified explanation of ``model``'s prediction on ``x`` at ``eps`` (see
    :mod:`smug_opt.robustness.explanation`; with ``minimum``, also
    :mod:`smug_opt.robustness.minimum`, which gets the half of ``time_limit`` the
    traversal leaves; the limit counts from when the model is read), re-checked by
    :func:`~smug_opt.robustness.check.attack_check`.

    ``x``: the input as smug-opt shows it (channels last) or in the network's own shape.
    ``solve_options`` go to each :func:`smug_opt.solve` (default: in this process,
    ``isolate=False``: a worker per query cost 6 s under load); ``lean``: the traversal's
    queries run :func:`~smug_opt.robustness.decide.decide`'s lean chain; ``query_work``: the
    queries (the traversal's and the minimum search's) end at this work instead of ``query_time``
    (:class:`~smug_opt.query_work.Work`: the set does not depend on the load, unless the
    time limit ends the traversal first); ``alpha_steps``: the traversal's α-CROWN steps
    (:func:`~smug_opt.robustness.explanation.robust_explanation`)."""
    from smug_opt.models.base import top_tie
    from smug_opt.models.network_stem import read_network_stem
    from smug_opt.network.lower import lower

    if not (isinstance(eps, (int, float)) and eps > 0 and np.isfinite(eps)):
        raise ValueError(f"eps must be a positive number, got {eps!r}")
    if not time_limit > 0:
        raise ValueError(f"time_limit must be positive, got {time_limit!r}")
    from smug_opt.models.resolve import network_of

    network = network_of(model, input_shape=input_shape, input_layout=input_layout, input_range=input_range)
    if network.input_range is None:
        raise ValueError(f"model {network.name!r} does not declare its input range: give it "
                         "(input_range=(0, 1), --input-range 0,1); the free values stay inside it")
    valid_range = (float(network.input_range[0]), float(network.input_range[1]))
    flat_x = _network_input(network, read_network_stem(network).input_view, x)
    preprocess, flat = lower(network)
    start = time.monotonic()  # the time limit counts from here: reading the model is not explaining
    scores = flat.forward(preprocess(flat_x[None]))[-1][0]
    tie = top_tie(scores)
    if tie is not None:  # the input itself would be a counterexample to any explanation
        raise ValueError(f"the model's outputs on this input tie for the top class ({tie}): no "
                         "prediction to explain")
    label = int(scores.argmax())
    if target is not None and int(target) != label:
        raise ValueError(f"the model predicts class {label} on this input, not {target}: a robust "
                         "explanation is of the prediction")
    options = {"isolate": False, **dict(solve_options or {})}
    subset = robust_explanation(flat, preprocess, flat_x, eps=float(eps), valid_range=valid_range,
                                label=label, query_time=query_time, backend=backend,
                                time_limit=time_limit / 2 if minimum else time_limit,
                                solve_options=options, lean=lean, query_work=query_work,
                                alpha_steps=alpha_steps)
    best = None
    if minimum:
        best = minimum_explanation(flat, preprocess, flat_x, subset, valid_range=valid_range,
                                   time_limit=max(time_limit - (time.monotonic() - start), 1.0),
                                   query_time=query_time, backend=backend, solve_options=options,
                                   query_work=query_work)
    fixed = subset.fixed if best is None else best.fixed
    check = attack_check(flat, preprocess, flat_x, fixed, label, float(eps), valid_range)
    settings = {"backend": str(backend), "time_limit": time_limit, "query_time": query_time,
                "query_work": None if query_work is None else vars(query_work)}
    return RobustResult(network, flat_x, label, float(eps), valid_range, subset, best, check,
                        time.monotonic() - start, settings)


def _network_input(network: Network, view: Any, x: np.ndarray) -> np.ndarray:
    """``x`` (smug-opt's view or the network's shape, or as many values) flat in the network's layout."""
    x = np.asarray(x, dtype=np.float64)
    n = int(np.prod(network.input_shape))
    if x.size != n:
        raise ValueError(f"the input has {x.size} values but {network.name!r} takes {n} "
                         f"(shape {network.input_shape})")
    if x.shape == tuple(view.view_shape) and tuple(view.view_shape) != tuple(network.input_shape):
        return view.to_net(x[None])[0].reshape(-1)
    return x.reshape(-1)
