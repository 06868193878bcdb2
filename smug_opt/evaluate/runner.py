"""Run a set of saliency methods over inputs and score them: the paper's sec. 4 evaluation.

Methods are looked up by name in :data:`METHODS`. For every input and method the runner
computes the map, its LSC (images), sparsity (masking methods), deletion/insertion AUCs
and, for text with rationales, precision/recall; then the summary table.

Kept as one module for now: splitting the method registry, the scoring and the writing
into modules of their own is planned (issue 13).
"""

from __future__ import annotations

import hashlib
import json
import pickle
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from smug_opt.evaluate._predict import PredictFn, chunks
from smug_opt.evaluate.baselines import grad_cam, pixel_integrated_gradients, token_integrated_gradients
from smug_opt.evaluate.boxes import Box, center_box, check_box, ground_truth_box, max_box
from smug_opt.evaluate.faithfulness import deletion_curve, insertion_curve
from smug_opt.evaluate.lsc import LSCResult, lsc_score, opt_box
from smug_opt.evaluate.metrics import (
    lsc_quartiles,
    mean_estimate,
    token_precision_recall,
    win_rates,
)
from smug_opt.evaluate.report import plot_examples, table_json, table_markdown
from smug_opt.evaluate.results import EvaluationResult, MethodOutcome, MethodSummary, Modality
from smug_opt.evaluate.sis import sufficient_input_subset
from smug_opt.executors import Executor, SequentialExecutor, worker_cache
from smug_opt.runstore import RunFolder


@dataclass(frozen=True)
class Settings:
    """Everything a method may need besides the model and the input."""

    backend: str
    k: int
    gamma: float
    cell: int
    time_limit: float
    sis_threshold: float
    mask_id: int
    ig_steps: int
    softmax: bool = False


@dataclass(frozen=True, eq=False)
class Subject:
    """The model three ways: what ``explain`` receives, a predict function, the Keras model."""

    model: Any
    predict_fn: PredictFn
    keras_model: Any | None


@dataclass(frozen=True, eq=False)
class MethodMap:
    """A method's map for one input; ``lsc`` when the method already scored its box."""

    saliency: np.ndarray
    mask: np.ndarray | None
    lsc: LSCResult | None = None


Compute = Callable[[Subject, Settings, np.ndarray, int, Any], MethodMap]
"""(subject, settings, input, label, annotation) -> map; annotation: a Box or a rationale."""


@dataclass(frozen=True)
class Method:
    """A saliency method the runner knows: its name, what it is, where it applies."""

    name: str
    description: str
    modalities: frozenset[str]
    compute: Compute
    needs_keras: bool = False


def _smug(variant: str) -> Compute:
    def compute(subject: Subject, s: Settings, x: np.ndarray, label: int, note: Any) -> MethodMap:
        from smug_opt.explanation import explain

        e = explain(
            subject.model,
            x,
            method=variant,
            backend=s.backend,
            k=s.k,
            gamma=s.gamma,
            cell=s.cell,
            time_limit=s.time_limit,
            target=label,
        )
        if e.saliency is None or e.mask is None:
            status = "no solver result" if e.result is None else e.result.status.name
            raise ValueError(f"{variant} returned no mask ({status})")
        return MethodMap(np.asarray(e.saliency, dtype=np.float64), np.asarray(e.mask, dtype=bool))

    return compute


def _ig(subject: Subject, s: Settings, x: np.ndarray, label: int, note: Any) -> MethodMap:
    model = subject.keras_model
    if x.ndim == 1:
        return MethodMap(token_integrated_gradients(model, x, label, steps=s.ig_steps), None)
    return MethodMap(pixel_integrated_gradients(model, x, label, steps=s.ig_steps), None)


def _gradcam(subject: Subject, s: Settings, x: np.ndarray, label: int, note: Any) -> MethodMap:
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
        Method("smug", "SMUG: solver-minimised mask, IG-scored cells", _BOTH, _smug("smug")),
        Method("smug_base", "SMUG_base: receptive fields of the top-k neurons", _BOTH, _smug("smug_base")),
        Method("ig", "Integrated Gradients (pixels, or token embeddings), zero baseline", _BOTH, _ig, True),
        Method("gradcam", "Grad-CAM on the last conv layer", _IMAGE, _gradcam, True),
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
    """Read a Keras model, a model adapter (``.predict`` and ``.model``) or a predict function."""
    keras = sys.modules.get("keras")
    if keras is not None and isinstance(adapter_or_model, keras.Model):
        return Subject(adapter_or_model, _keras_predict(adapter_or_model), adapter_or_model)
    inner = getattr(adapter_or_model, "model", None)
    predict = getattr(adapter_or_model, "predict", None)
    if keras is not None and isinstance(inner, keras.Model) and callable(predict):
        return Subject(adapter_or_model, predict, inner)
    if callable(adapter_or_model):
        return Subject(adapter_or_model, adapter_or_model, None)
    raise TypeError(
        "evaluate needs a keras.Model, a model adapter with .predict and .model, or a predict "
        f"function (batch -> probabilities); got {type(adapter_or_model).__name__}"
    )


def _modality(inputs: np.ndarray) -> Modality:
    if inputs.ndim == 4:
        return "image"
    if inputs.ndim == 2 and np.issubdtype(inputs.dtype, np.integer):
        return "text"
    raise ValueError(
        f"inputs must be images (N, H, W, C) or integer token ids (N, T); got {inputs.dtype} {inputs.shape}"
    )


def _check_methods(methods: Sequence[str], modality: Modality, subject: Subject) -> tuple[str, ...]:
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
    gradient = [m for m in names if METHODS[m].needs_keras]
    if gradient and subject.keras_model is None:
        raise ValueError(
            f"method(s) {gradient} need a Keras model (or an adapter with .model); got "
            f"{type(subject.model).__name__}"
        )
    return names


def _annotations(
    inputs: np.ndarray, modality: Modality, boxes: Sequence[Box | None] | None, rationales: Any
) -> list[Any]:
    """One checked annotation per input: a Box (images), a boolean token mask (text), or None."""
    n = len(inputs)
    given = boxes if modality == "image" else rationales
    if given is None:
        return [None] * n
    what = "boxes" if modality == "image" else "rationales"
    if len(given) != n:
        raise ValueError(f"{what} must have one entry per input ({n}); got {len(given)}")
    if modality == "image":
        return [None if b is None else check_box(b, inputs.shape[1:3]) for b in given]
    checked = [np.asarray(r, dtype=bool) for r in given]
    bad = [i for i, r in enumerate(checked) if r.shape != inputs.shape[1:]]
    if bad:
        raise ValueError(
            f"each rationale must be a (T,)={inputs.shape[1:]} token mask; input {bad[0]}'s has "
            f"shape {checked[bad[0]].shape}"
        )
    return checked


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


def _score(
    subject: Subject, settings: Settings, x: np.ndarray, label: int, note: Any, mm: MethodMap
) -> dict[str, Any]:
    """LSC (images), sparsity, deletion/insertion AUC and rationale precision/recall of a map."""
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
            subject.predict_fn, x, label, mm.saliency, cell=settings.cell, baseline=baseline
        ).auc
    return scores


def _evaluate_one(
    subject: Subject, settings: Settings, methods: tuple[str, ...], x: np.ndarray, label: int, note: Any
) -> dict[str, MethodOutcome]:
    out = {}
    for name in methods:
        start = time.perf_counter()
        try:
            mm = METHODS[name].compute(subject, settings, x, label, note)
        except ValueError as error:
            out[name] = _failed(time.perf_counter() - start, f"map: {error}")
            continue
        seconds = time.perf_counter() - start
        scores = _score(subject, settings, x, label, note, mm)
        out[name] = MethodOutcome(saliency=mm.saliency, mask=mm.mask, seconds=seconds, **scores)
    return out


def _fraction_estimate(values: list[float | None]) -> Any:
    """Mean of the available fractions in [0, 1] (normal interval, clipped), or None."""
    finite = [v for v in values if v is not None and np.isfinite(v)]
    return mean_estimate(finite, bounds=(0.0, 1.0)) if finite else None


def summarize(
    outcomes: Sequence[dict[str, MethodOutcome]], methods: Sequence[str]
) -> tuple[MethodSummary, ...]:
    """One :class:`MethodSummary` per method over all inputs (Win% among the LSC methods)."""
    lsc = {m: [o[m].lsc.lsc if o[m].lsc is not None else np.nan for o in outcomes] for m in methods}
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
            )
        )
    return tuple(summaries)


def _record(index: int, name: str, method: str, o: MethodOutcome) -> dict[str, Any]:
    lsc = o.lsc
    return {
        "input": index,
        "name": name,
        "method": method,
        "lsc": None if lsc is None or not np.isfinite(lsc.lsc) else lsc.lsc,
        "a": None if lsc is None else lsc.a,
        "c": None if lsc is None else lsc.c,
        "box": None if lsc is None else list(lsc.box),
        "threshold": None if lsc is None else lsc.threshold,
        "sparsity": o.sparsity,
        "deletion_auc": o.deletion_auc,
        "insertion_auc": o.insertion_auc,
        "precision": None if o.precision is None or np.isnan(o.precision) else o.precision,
        "recall": None if o.recall is None or np.isnan(o.recall) else o.recall,
        "seconds": o.seconds,
        "error": o.error,
    }


def _write(out_dir: Path, inputs: np.ndarray, result: EvaluationResult, names: Sequence[str]
           ) -> dict[str, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    files = {"markdown": out_dir / "table.md", "json": out_dir / "table.json"}
    files["markdown"].write_text(table_markdown(result.summaries))
    payload = {"modality": result.modality, "n": len(result.outcomes), **table_json(result.summaries)}
    files["json"].write_text(json.dumps(payload, indent=2) + "\n")
    files["records"] = out_dir / "records.jsonl"
    lines = [
        json.dumps(_record(i, names[i], m, o))
        for i, per_input in enumerate(result.outcomes)
        for m, o in per_input.items()
    ]
    files["records"].write_text("\n".join(lines) + "\n")
    if result.modality == "image":
        files["examples"] = plot_examples(inputs, result.outcomes, result.methods, out_dir / "examples.png",
                                          names=names)
    return files


def _softmax(predict: PredictFn) -> PredictFn:
    def probabilities(batch: np.ndarray) -> np.ndarray:
        z = np.asarray(predict(batch), dtype=np.float64)
        z = np.exp(z - z.max(axis=-1, keepdims=True))
        return z / z.sum(axis=-1, keepdims=True)

    return probabilities


def _load_subject(model: Any) -> Subject:
    if isinstance(model, Subject):
        return model
    if isinstance(model, str):
        from smug_opt.batch import ModelRef

        return as_subject(ModelRef(model).load()[0])
    return as_subject(model)


@dataclass(frozen=True, eq=False)
class _Chunk:
    model: Any  # a model name/path (loaded once per worker) or, in this process, any model
    settings: Settings
    methods: tuple[str, ...]
    items: tuple[tuple[int, np.ndarray, int, Any], ...]  # (index, input, label, annotation)


def evaluate_chunk(chunk: _Chunk) -> list[tuple[int, dict[str, MethodOutcome]]]:
    """Evaluate every input of a chunk (a task: runs wherever the executor puts it)."""
    model = chunk.model
    subject = (worker_cache(("evaluate", model), lambda: _load_subject(model)) if isinstance(model, str)
               else _load_subject(model))
    if chunk.settings.softmax:
        subject = Subject(subject.model, _softmax(subject.predict_fn), subject.keras_model)
    return [(i, _evaluate_one(subject, chunk.settings, chunk.methods, x, label, note))
            for i, x, label, note in chunk.items]


_STORE_FILE = "inputs.jsonl"
_OUTPUT_FILES = ("table.md", "table.json", "records.jsonl", "examples.png")


def _stored(index: int, name: str, per_method: dict[str, MethodOutcome]) -> dict[str, Any]:
    methods = {}
    for m, o in per_method.items():
        d = {k: v for k, v in asdict(o).items() if k not in ("saliency", "mask", "lsc")}
        d["lsc"] = None if o.lsc is None else {**asdict(o.lsc), "box": list(o.lsc.box)}
        methods[m] = d
    return {"index": index, "name": name, "methods": methods}


def _stored_arrays(done: list[tuple[int, dict[str, MethodOutcome]]]) -> dict[str, np.ndarray]:
    arrays = {}
    for i, per_method in done:
        for m, o in per_method.items():
            for key in ("saliency", "mask"):
                value = getattr(o, key)
                if value is not None:
                    arrays[f"{i}.{m}.{key}"] = np.asarray(value)
    return arrays


def _restore(folder: RunFolder) -> dict[int, dict[str, MethodOutcome]]:
    """The outcomes a previous (interrupted) run recorded, by input index."""
    arrays: dict[str, np.ndarray] = {}
    for part in {r.get("part") for r in folder.records()} - {None}:
        with np.load(folder.path / "arrays" / part, allow_pickle=False) as data:
            arrays.update({k: data[k] for k in data.files})
    restored = {}
    for r in folder.records():
        i = r["index"]
        per_method = {}
        for m, d in r["methods"].items():
            lsc = d.pop("lsc")
            per_method[m] = MethodOutcome(
                saliency=arrays.get(f"{i}.{m}.saliency"), mask=arrays.get(f"{i}.{m}.mask"),
                lsc=None if lsc is None else LSCResult(lsc["lsc"], lsc["a"], lsc["c"], Box(*lsc["box"]),
                                                        lsc["threshold"]), **d)
        restored[i] = per_method
    return restored


def _model_label(model: Any) -> str:
    return model if isinstance(model, str) else type(model).__name__


def evaluate(
    adapter_or_model: Any,
    inputs: np.ndarray,
    labels: Sequence[int] | np.ndarray,
    methods: Sequence[str],
    *,
    backend: str = "highs",
    k: int = 100,
    gamma: float = 0.0,
    cell: int = 1,
    time_limit: float = 60.0,
    boxes: Sequence[Box | None] | None = None,
    rationales: Sequence[np.ndarray] | np.ndarray | None = None,
    sis_threshold: float = 0.5,
    mask_id: int = 0,
    ig_steps: int = 64,
    softmax: bool = False,
    names: Sequence[str] | None = None,
    executor: Executor | None = None,
    chunk_size: int = 4,
    out_dir: str | Path | None = None,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool = True,
) -> EvaluationResult:
    """Evaluate ``methods`` (names from :data:`METHODS`) on ``inputs`` with true ``labels``.

    ``inputs``: images (N, H, W, C) or token ids (N, T). ``adapter_or_model``: an embedded
    model's name or a .keras path (loaded once per worker), a Keras model, an adapter with
    ``.predict``/``.model``, or a bare predict function (then only the model-agnostic
    methods work). ``softmax``: the model outputs logits; confidences are their softmax.
    ``backend, k, gamma, cell, time_limit`` go to SMUG; ``cell`` is also the
    deletion/insertion grid. ``boxes``: one ground-truth box (or ``None``) per image;
    ``rationales``: one boolean token mask per text. ``sis_threshold`` and ``mask_id`` (the
    pad/mask token, also the text deletion baseline) are for SIS. ``names`` label the inputs
    in records and figures (default: their indices). ``executor`` runs chunks of
    ``chunk_size`` inputs (default: in this process; worker processes and Dask need the
    model as a name or path, or a picklable predict function). With ``out_dir``, every
    finished input is kept there as it finishes (``resume`` continues an interrupted run,
    ``overwrite`` replaces one) and ``table.md``, ``table.json``, ``records.jsonl`` and
    (images) ``examples.png`` are written at the end. A method that fails on an input
    (ValueError) is recorded there, not raised.
    """
    local = executor is None or isinstance(executor, SequentialExecutor)
    model = str(adapter_or_model) if isinstance(adapter_or_model, Path) else adapter_or_model
    if not local and not isinstance(model, str):
        try:
            pickle.dumps(model)
        except Exception:
            raise ValueError("worker processes and Dask load the model themselves: pass its name or "
                             "a saved .keras path (or a picklable predict function)") from None
    subject = _load_subject(model) if not isinstance(model, str) or local else None
    inputs = np.asarray(inputs)
    modality = _modality(inputs)
    names_checked = _check_methods(methods, modality, subject or Subject(model, lambda b: b, model))
    labels = np.asarray(labels)
    if labels.shape != (len(inputs),) or not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(
            f"labels must be {len(inputs)} integers, one per input; got {labels.dtype} {labels.shape}"
        )
    if len(inputs) == 0:
        raise ValueError("inputs is empty: nothing to evaluate")
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be at least 1; got {chunk_size}")
    input_names = [str(i) for i in range(len(inputs))] if names is None else [str(n) for n in names]
    if len(input_names) != len(inputs):
        raise ValueError(f"names must have one entry per input ({len(inputs)}); got {len(input_names)}")
    notes = _annotations(inputs, modality, boxes, rationales)
    settings = Settings(backend, k, gamma, cell, time_limit, sis_threshold, mask_id, ig_steps, softmax)
    folder = None
    if out_dir is not None:
        config = {"model": _model_label(model), "methods": list(names_checked), "n": len(inputs),
                  "inputs_sha1": hashlib.sha1(np.ascontiguousarray(inputs).tobytes()).hexdigest(),
                  "labels": labels.tolist(), **asdict(settings)}
        folder, note = RunFolder.open(out_dir, config, kind="evaluate", resume=resume,
                                      overwrite=overwrite, records_name=_STORE_FILE,
                                      extra_files=_OUTPUT_FILES)
        if note:
            print(f"smug-opt: {note}", file=sys.stderr)
    elif resume or overwrite:
        raise ValueError("resume and overwrite need an output folder (--out)")
    outcomes: dict[int, dict[str, MethodOutcome]] = _restore(folder) if folder is not None else {}
    pending = [i for i in range(len(inputs)) if i not in outcomes]
    task_model = model if isinstance(model, str) or not local else subject
    chunks: Iterator[_Chunk] = (
        _Chunk(task_model, settings, names_checked, tuple(
            (i, inputs[i], int(labels[i]), notes[i]) for i in pending[s:s + chunk_size]))
        for s in range(0, len(pending), chunk_size))
    executor = executor or SequentialExecutor()
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(inputs), initial=len(inputs) - len(pending), desc="evaluate", unit="input")
    try:
        for _, done in executor.map(evaluate_chunk, chunks):
            if folder is not None:
                folder.add([_stored(i, input_names[i], o) for i, o in done], _stored_arrays(done))
            outcomes.update(done)
            if bar is not None:
                bar.update(len(done))
    finally:
        if bar is not None:
            bar.close()
    ordered = tuple(outcomes[i] for i in range(len(inputs)))
    result = EvaluationResult(modality, names_checked, ordered, summarize(ordered, names_checked))
    if out_dir is not None:
        result.files.update(_write(Path(out_dir), inputs, result, input_names))
    return result
