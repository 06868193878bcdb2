"""Run a set of saliency methods over inputs and score them: the paper's sec. 4 evaluation.

Methods are looked up by name in :data:`METHODS`. For every input and method the evaluation
computes the map, its LSC (images), sparsity (masking methods), deletion/insertion AUCs
and, for text with rationales, precision/recall; then the summary table.

The methods live in :mod:`smug_opt.evaluate.methods`, the scoring in
:mod:`smug_opt.evaluate.scoring`; this module runs them over the inputs (in chunks, on an
executor, resumably) and writes the results.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import sys
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from smug_opt.backend_choice import DEFAULT_BACKEND, BackendChoice
from smug_opt.evaluate._predict import PredictFn
from smug_opt.evaluate.boxes import Box, check_box
from smug_opt.evaluate.faithfulness import CURVE_STEPS
from smug_opt.evaluate.lsc import LSCResult
from smug_opt.evaluate.methods import Settings, Subject, as_subject, check_methods
from smug_opt.evaluate.report import plot_examples, table_json, table_markdown
from smug_opt.evaluate.results import EvaluationResult, MethodOutcome, Modality
from smug_opt.evaluate.road import ROAD_LEVELS
from smug_opt.evaluate.scoring import evaluate_input, summarize
from smug_opt.executors import Executor, SequentialExecutor, worker_cache
from smug_opt.models.catalog import smug_parameters
from smug_opt.parameters import SmugParameters
from smug_opt.query_work import Work
from smug_opt.runstore import RunFolder, model_identity

__all__ = ["evaluate", "evaluate_chunk"]


def _modality(inputs: np.ndarray) -> Modality:
    if inputs.ndim == 4:
        return "image"
    if inputs.ndim == 2 and np.issubdtype(inputs.dtype, np.integer):
        return "text"
    raise ValueError(
        f"inputs must be images (N, H, W, C) or integer token ids (N, T); got {inputs.dtype} {inputs.shape}"
    )


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
        "road_morf": o.road_morf,
        "road_lerf": o.road_lerf,
        "sanity_spearman": o.sanity_spearman,
        "sanity_ssim": o.sanity_ssim,
        "sanity_cascade": [list(stage) for stage in o.sanity_cascade],
        "precision": None if o.precision is None or np.isnan(o.precision) else o.precision,
        "recall": None if o.recall is None or np.isnan(o.recall) else o.recall,
        "status": o.status,
        "proof": o.proof,
        **({} if o.details is None else {"details": o.details}),
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


def _by_reference(model: Any) -> bool:
    """A model each worker loads itself: a spec string or a :class:`~smug_opt.batch.ModelRef`."""
    from smug_opt.batch import ModelRef

    return isinstance(model, (str, ModelRef))


def _spec(model: Any) -> Any:
    """A referenced model's spec string (anything else as it is)."""
    return getattr(model, "name", model) if _by_reference(model) else model


def _load_subject(model: Any) -> Subject:
    from smug_opt.batch import ModelRef

    if isinstance(model, Subject):
        return model
    if _by_reference(model):
        ref = model if isinstance(model, ModelRef) else ModelRef(model)
        return replace(as_subject(ref.load()[0]), reference=ref)
    return as_subject(model)


@dataclass(frozen=True, eq=False)
class _Chunk:
    model: Any  # a spec or ModelRef (loaded once per worker) or, in this process, any model
    settings: Settings
    methods: tuple[str, ...]
    items: tuple[tuple[int, np.ndarray, int, Any], ...]  # (index, input, label, annotation)


def evaluate_chunk(chunk: _Chunk) -> list[tuple[int, dict[str, MethodOutcome]]]:
    """Evaluate every input of a chunk (a task: runs wherever the executor puts it)."""
    model = chunk.model
    subject = (worker_cache(("evaluate", model), lambda: _load_subject(model)) if _by_reference(model)
               else _load_subject(model))
    randomised = _randomised(subject, chunk.settings)
    if chunk.settings.softmax:
        subject = Subject(subject.model, _softmax(subject.predict_fn), subject.keras_model)
    return [(i, evaluate_input(subject, chunk.settings, chunk.methods, x, label, note, randomised))
            for i, x, label, note in chunk.items]


def _randomised(subject: Subject, settings: Settings) -> list[tuple[int, Subject]]:
    """The model-randomisation cascade as subjects (empty when the check is off)."""
    if not settings.sanity_stages:
        return []
    from smug_opt.evaluate.randomisation import cascade

    out = []
    for r in cascade(subject.keras_model or subject.model, stages=settings.sanity_stages):
        s = as_subject(r.model)
        if settings.softmax:
            s = Subject(s.model, _softmax(s.predict_fn), s.keras_model)
        out.append((r.layers, s))
    return out


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
    for part in {str(r["part"]) for r in folder.records() if r.get("part") is not None}:
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
    params: SmugParameters | None = None,
    k: int | None = None,
    gamma: float | None = None,
    cell: int | None = None,
    eps: float | None = None,
    query_work: Work | None = None,
    query_time: float | None = None,
    backend: str | BackendChoice = DEFAULT_BACKEND,
    time_limit: float = 60.0,
    boxes: Sequence[Box | None] | None = None,
    rationales: Sequence[np.ndarray] | np.ndarray | None = None,
    sis_threshold: float = 0.5,
    mask_id: int = 0,
    ig_steps: int = 64,
    softmax: bool = False,
    sanity_stages: int = 0,
    road_levels: Sequence[float] = ROAD_LEVELS,
    curve_steps: int = CURVE_STEPS,
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
    SMUG runs with ``params`` (default: the model's own,
    :func:`smug_opt.models.catalog.describe`; ``k``, ``gamma``, ``cell`` given here
    replace theirs) on ``backend`` within ``time_limit`` (``eps``: method robust's, in the
    model's input units; ``query_work`` or else ``query_time``: each of its robustness
    queries' budget; its minimum search as ``params`` says); the SMUG cell is also the
    deletion/insertion grid. ``boxes``: one ground-truth box (or ``None``) per image;
    ``rationales``: one boolean token mask per text. ``sis_threshold`` and ``mask_id`` (the
    pad/mask token, also the text deletion baseline) are for SIS. ``sanity_stages`` > 0 runs
    the model-randomisation check (:mod:`smug_opt.evaluate.randomisation`) with that many
    stages of the cascade (each method's maps computed again on each randomised model).
    ``road_levels``: the fractions of pixels ROAD removes; ``curve_steps``: the points of
    each deletion/insertion curve.
    ``names`` label the inputs
    in records and figures (default: their indices). ``executor`` runs chunks of
    ``chunk_size`` inputs (default: in this process; worker processes and Dask need the
    model as a name or path or a :class:`~smug_opt.batch.ModelRef`, or a picklable predict
    function). With ``out_dir``, every finished input is kept there as it finishes
    (``resume`` continues an interrupted run, ``overwrite`` replaces one) and ``table.md``,
    ``table.json``, ``records.jsonl`` and (images) ``examples.png`` are written at the end.
    A method that fails on an input (ValueError) is recorded there, not raised.
    """
    local = executor is None or isinstance(executor, SequentialExecutor)
    model = str(adapter_or_model) if isinstance(adapter_or_model, Path) else adapter_or_model
    if not local and not _by_reference(model):
        try:
            pickle.dumps(model)
        except Exception:
            raise ValueError("worker processes and Dask load the model themselves: pass its name or "
                             "a saved .keras path (or a picklable predict function)") from None
    subject = _load_subject(model) if not _by_reference(model) or local else None
    inputs = np.asarray(inputs)
    modality = _modality(inputs)
    names_checked = check_methods(methods, modality, subject or Subject(model, lambda b: b, model))
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
    smug = smug_parameters(_spec(model), params, k=k, gamma=gamma, cell=cell, eps=eps,
                           query_work=query_work, query_time=query_time)
    if sanity_stages < 0:
        raise ValueError(f"sanity_stages must be >= 0; got {sanity_stages}")
    if curve_steps < 1:
        raise ValueError(f"curve_steps must be >= 1; got {curve_steps}")
    settings = Settings(smug, backend, time_limit, sis_threshold, mask_id, ig_steps, softmax,
                        road_levels=tuple(float(v) for v in road_levels), sanity_stages=sanity_stages,
                        curve_steps=curve_steps)
    folder = None
    if out_dir is not None:
        named = model_identity(_spec(model)) if _by_reference(model) else {"model": _model_label(model)}
        config = {**named, "methods": list(names_checked), "n": len(inputs),
                  "inputs_sha1": hashlib.sha1(np.ascontiguousarray(inputs).tobytes()).hexdigest(),
                  "labels": labels.tolist(), **settings.record()}
        folder, note = RunFolder.open(out_dir, config, kind="evaluate", resume=resume,
                                      overwrite=overwrite, records_name=_STORE_FILE,
                                      extra_files=_OUTPUT_FILES)
        if note:
            print(f"smug-opt: {note}", file=sys.stderr)
    elif resume or overwrite:
        raise ValueError("resume and overwrite need an output folder (--out)")
    outcomes: dict[int, dict[str, MethodOutcome]] = _restore(folder) if folder is not None else {}
    pending = [i for i in range(len(inputs)) if i not in outcomes]
    task_model = model if _by_reference(model) or not local else subject
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
        if bar is not None:
            bar.close()
        ordered = tuple(outcomes[i] for i in range(len(inputs)))
        result = EvaluationResult(modality, names_checked, ordered, summarize(ordered, names_checked))
        if out_dir is not None:
            result.files.update(_write(Path(out_dir), inputs, result, input_names))
    finally:
        if bar is not None:
            bar.close()
        if folder is not None:
            folder.close()
    return result
