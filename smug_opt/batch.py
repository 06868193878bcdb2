"""Explain many inputs: chunks of inputs are tasks on an executor (this process, local
worker processes or a Dask cluster); each worker loads the model once; results stream back
into a resumable run folder.

The run folder (see :mod:`smug_opt.runstore`): ``records.jsonl`` (one line per input, the
fields of a single explain's ``record.json`` plus ``index``, ``name``, ``input``, ``part``,
``row``), ``arrays/part-NNNNNN.npz`` (``index``, ``mask``, ``saliency``, ``cell_mask``, one
row per explained input: ``numpy.load`` reads them), ``overlays/`` (optional) and
``summary.md`` (statuses, mask sizes, times) when the run ends.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from smug_opt.executors import Executor, SequentialExecutor
from smug_opt.explain_settings import ExplainSettings
from smug_opt.input_layout import in_input_shape
from smug_opt.model_ref import ModelRef, model_loads
from smug_opt.parameters import Method
from smug_opt.runstore import RunFolder, model_identity

__all__ = ["BatchRun", "ExplainSettings", "ExplainedInput", "ModelRef", "explain_many",
           "summary_markdown"]

KIND = "explain"
OVERLAYS_DIR = "overlays"
SUMMARY_FILE = "summary.md"
@dataclass(frozen=True, eq=False)
class ExplainedInput:
    """One input's outcome: its record (the fields of ``record.json``) and, when the solver
    found a mask, the mask, saliency and cell mask (None otherwise: ``record`` says why)."""

    index: int
    name: str
    record: dict[str, Any]
    mask: np.ndarray | None
    saliency: np.ndarray | None
    cell_mask: np.ndarray | None

    @property
    def ok(self) -> bool:
        return self.mask is not None

    @property
    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """``(mask, saliency, cell_mask)`` when the solver found a mask, else None."""
        if self.mask is None or self.saliency is None or self.cell_mask is None:
            return None
        return self.mask, self.saliency, self.cell_mask


@dataclass(frozen=True, eq=False)
class _Chunk:
    model: Any  # a ModelRef, or (in this process only) a model adapter
    settings: ExplainSettings
    items: tuple[tuple[int, str, Any], ...]  # (index, name, an array or a file path)
    overlays_dir: str | None


@dataclass(frozen=True, eq=False)
class _ChunkDone:
    inputs: list[ExplainedInput]
    worker_pid: int
    model_loads: int


@dataclass(frozen=True, eq=False)
class _ChunkFailed:
    indices: tuple[int, ...]
    message: str


def _adapter(model: Any) -> tuple[Any, dict[str, Any]]:
    if isinstance(model, ModelRef):
        return model.load()
    from smug_opt.models.resolve import as_adapter

    return as_adapter(model), {"model": getattr(getattr(model, "model", model), "name", "model")}


def _read(source: Any, adapter: Any, settings: ExplainSettings) -> tuple[np.ndarray, dict[str, Any]]:
    if isinstance(source, str):
        from smug_opt.inputs import load_input

        x, resized = load_input(Path(source), adapter.input_shape, settings.pixel_scale,
                                settings.preprocessing, settings.input_range)
        return x, {"input": source} | ({"resized_from": list(resized)} if resized else {})
    x = np.asarray(source, dtype=np.float64)
    shape = tuple(adapter.input_shape)
    if len(shape) == 1 and x.ndim >= 2:
        return x, {}  # a picture for a flat input keeps its shape: it gives the mask grid
    return in_input_shape(x, shape), {}


_Explained = tuple[dict[str, Any], np.ndarray | None, np.ndarray | None, np.ndarray | None]
"""One input's record fields, mask, saliency and cell mask."""
_ExplainOne = Callable[[np.ndarray, str], _Explained]
"""Explains one input (its values, its name) with the chunk's model and settings."""


def explain_chunk(chunk: _Chunk) -> _ChunkDone:
    """Explain every input of a chunk (a task: runs wherever the executor puts it)."""
    adapter, info = _adapter(chunk.model)
    robust = chunk.settings.params.method is Method.ROBUST
    explain_one = _robust_explainer(chunk, adapter) if robust else _smug_explainer(chunk, adapter, info)
    done = []
    for index, name, source in chunk.items:
        start = time.perf_counter()
        base = {"index": index, "name": name, **info}
        if not isinstance(source, str):
            base["input"] = f"row {index}"
        try:
            x, extra = _read(source, adapter, chunk.settings)
            record, mask, saliency, cell_mask = explain_one(x, name)
        except (ValueError, FileNotFoundError) as exc:
            record = {**base, "status": "ERROR", "error": str(exc), "seconds": time.perf_counter() - start}
            done.append(ExplainedInput(index, name, record, None, None, None))
            continue
        record = {**base, **extra, **record, "seconds": time.perf_counter() - start}
        done.append(ExplainedInput(index, name, record, mask, saliency, cell_mask))
    return _ChunkDone(done, os.getpid(), model_loads())


def _smug_explainer(chunk: _Chunk, adapter: Any, info: dict[str, Any]) -> _ExplainOne:
    """One input explained by SMUG (its overlay drawn where the run keeps them)."""
    from smug_opt.explanation import explain

    def explain_one(x: np.ndarray, name: str) -> _Explained:
        e = explain(adapter, x, **chunk.settings.explain_kwargs())
        record = e.record()
        if e.ok and chunk.overlays_dir is not None:
            record["overlay"] = _write_overlay(e, x, Path(chunk.overlays_dir), name, info["model"])
        cell_mask = None if e.cell_mask is None else e.cell_mask.reshape(e.grid.shape)
        return record, e.mask, e.saliency, cell_mask

    return explain_one


def _robust_explainer(chunk: _Chunk, adapter: Any) -> _ExplainOne:
    """One input's verified explanation (method robust): the fixed values are the mask,
    saliency and cell mask of the run's arrays."""
    from smug_opt.robustness.batch_item import explain_robust_input, robust_network

    network = robust_network(chunk.model if isinstance(chunk.model, ModelRef) else adapter, chunk.settings)

    def explain_one(x: np.ndarray, name: str) -> _Explained:
        overlay = None if chunk.overlays_dir is None else Path(chunk.overlays_dir) / f"{name}.png"
        record, fixed = explain_robust_input(network, x, chunk.settings, overlay)
        return record, fixed, fixed.astype(np.float64), fixed

    return explain_one


def _write_overlay(e: Any, x: np.ndarray, folder: Path, name: str, model: str) -> str | None:
    from smug_opt import render

    if len(e.grid.spatial_shape) < 2:
        return None  # text: the records and arrays say which tokens were kept
    hw = e.grid.spatial_shape[:2]
    path = folder / f"{name}.png"  # the input's whole name: d.png and d.jpg get one each
    tmp = path.with_name(path.name + ".tmp.png")
    render.overlay_png(x.reshape((*hw, -1)), e.saliency.reshape((*hw, -1)).max(axis=-1), tmp,
                       title=render.overlay_title(e, model))
    os.replace(tmp, path)
    return str(path.relative_to(folder.parent))


class BatchRun(Iterator[ExplainedInput]):
    """The explanations of a batch as they finish (an iterator). ``skipped``: inputs already
    done in the run folder; ``failed``: inputs whose task failed (not recorded: a resumed
    run retries them); ``without_mask``: recorded inputs that ended with no mask (ERROR,
    INFEASIBLE, NO_SOLUTION), counted once the run has ended; ``summary``: the markdown
    summary then."""

    def __init__(self, stream: Iterator[ExplainedInput], folder: RunFolder | None,
                 planned: int, skipped: int, note: str) -> None:
        self._stream = stream
        self.folder = folder
        self.planned = planned
        self.skipped = skipped
        self.note = note
        self.failed = 0
        self.without_mask = 0
        self.summary = ""

    def __next__(self) -> ExplainedInput:
        return next(self._stream)

    def close(self) -> None:
        """Stop the run: tasks not yet started are cancelled and the run folder's lock is
        released (a run iterated to its end releases it by itself)."""
        self._stream.close()  # type: ignore[attr-defined]
        if self.folder is not None:
            self.folder.close()


def _sources(inputs: Any) -> list[tuple[str, Any]] | np.ndarray:
    """(name, source) pairs for a folder or a list of paths, or the array of inputs."""
    if isinstance(inputs, (str, os.PathLike)) and Path(inputs).is_dir():
        from smug_opt.inputs import list_input_files

        return [(p.name, str(p)) for p in list_input_files(Path(inputs))]
    if isinstance(inputs, np.ndarray):
        if inputs.ndim < 2:
            raise ValueError(f"an array of inputs needs a leading input axis; got shape {inputs.shape}")
        return inputs
    if isinstance(inputs, Sequence) and all(isinstance(p, (str, os.PathLike)) for p in inputs):
        return [(Path(p).name, str(p)) for p in inputs]
    raise ValueError("inputs must be an array (N, ...), a folder or a list of image/.npy files; "
                     f"got {type(inputs).__name__}")


def explain_many(
    model: Any,
    inputs: Any,
    *,
    settings: ExplainSettings | None = None,
    executor: Executor | None = None,
    out: str | os.PathLike[str] | None = None,
    resume: bool = False,
    overwrite: bool = False,
    overlays: bool = False,
    chunk_size: int = 8,
    **explain_args: Any,
) -> BatchRun:
    """Explain every input of ``inputs`` and stream the results as they finish.

    ``model``: a spec (an embedded model's name, a .keras/.h5, .onnx or .pt2 path,
    package.module:factory) or a :class:`ModelRef` (any executor), or a model object or
    adapter (this process only: save it for worker processes or Dask). ``inputs``: an
    array (N, ...), a folder of images/.npy files, or a list of such files. The
    :func:`smug_opt.explain` arguments come as ``settings`` or keywords (``k=``,
    ``backend=``...; SMUG parameters not given are the model's own). ``executor``
    (default: this process) runs chunks of ``chunk_size`` inputs as tasks. With ``out``,
    results go to a run folder (module docstring) which ``resume`` continues (skipping
    finished inputs) and ``overwrite`` replaces; ``overlays`` also writes a PNG per image
    input there.
    """
    if settings is not None and explain_args:
        raise ValueError("give explain arguments either as settings= or as keywords, not both")
    settings = settings or ExplainSettings.for_model(model, **explain_args)
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be at least 1, got {chunk_size}")
    executor = executor or SequentialExecutor()
    local = isinstance(executor, SequentialExecutor)
    if isinstance(model, (str, os.PathLike)):
        model = ModelRef(str(model))
    if not isinstance(model, ModelRef) and not local:
        raise ValueError("worker processes and Dask load the model themselves: pass its name or "
                         "a saved model file, not a model object")
    ref = model
    sources = _sources(inputs)
    names = ([str(i) for i in range(len(sources))] if isinstance(sources, np.ndarray)
             else [n for n, _ in sources])
    if len(set(names)) != len(names):
        raise ValueError("two inputs share a file name; names identify inputs in the run folder")
    folder, note = None, ""
    if out is not None:
        named: dict[str, Any] = {"model": "<in-memory model>"}
        if isinstance(ref, ModelRef):
            named = {**model_identity(ref.name), "input_shape": list(ref.input_shape or ()),
                     "input_layout": ref.input_layout}
        config = {**named, "inputs": _describe(inputs), "n": len(names), **settings.to_dict()}
        folder, note = RunFolder.open(out, config, kind=KIND, resume=resume, overwrite=overwrite,
                                      extra_files=(OVERLAYS_DIR, SUMMARY_FILE))
    elif resume or overwrite or overlays:
        raise ValueError("--resume, --overwrite and --overlays need an output folder (--out)")
    done = folder.done() if folder is not None else set()
    pending = [i for i, n in enumerate(names) if n not in done]
    overlays_dir = None
    if overlays and folder is not None:
        (folder.path / OVERLAYS_DIR).mkdir(exist_ok=True)
        overlays_dir = str(folder.path / OVERLAYS_DIR)
    chunks = (_Chunk(ref, settings, tuple(
        (i, names[i], sources[i] if isinstance(sources, np.ndarray) else sources[i][1])
        for i in pending[s:s + chunk_size]), overlays_dir) for s in range(0, len(pending), chunk_size))
    run = BatchRun(iter(()), folder, len(names), len(names) - len(pending), note)
    run._stream = _stream(run, executor, chunks)
    return run


def _describe(inputs: Any) -> str:
    if isinstance(inputs, np.ndarray):
        return f"array {inputs.dtype} {list(inputs.shape)}"
    if isinstance(inputs, (str, os.PathLike)):
        return str(Path(inputs).resolve())
    return f"{len(inputs)} files"


def _failed_chunk(chunk: _Chunk, exc: BaseException) -> _ChunkFailed:
    return _ChunkFailed(tuple(i for i, _, _ in chunk.items), f"{type(exc).__name__}: {exc}")


def _stream(run: BatchRun, executor: Executor, chunks: Iterator[_Chunk]) -> Iterator[ExplainedInput]:
    try:
        yield from _explained(run, executor, chunks)
    finally:
        if run.folder is not None:
            run.folder.close()


def _explained(run: BatchRun, executor: Executor, chunks: Iterator[_Chunk]) -> Iterator[ExplainedInput]:
    started = time.perf_counter()
    fresh: list[dict[str, Any]] = []
    for _, outcome in executor.map(explain_chunk, chunks, on_error=_failed_chunk):
        if isinstance(outcome, _ChunkFailed):
            import warnings

            run.failed += len(outcome.indices)
            warnings.warn(f"{len(outcome.indices)} inputs not explained: their task failed "
                          f"({outcome.message}); a rerun with --resume retries them", stacklevel=2)
            continue
        records = [dict(e.record, worker=outcome.worker_pid) for e in outcome.inputs]
        if run.folder is not None:
            run.folder.add(*_rows(records, outcome.inputs))
        fresh.extend(records)
        yield from outcome.inputs
    wall = time.perf_counter() - started
    everything = run.folder.records() if run.folder is not None else fresh
    run.without_mask = sum(r.get("mask_size") is None for r in everything)
    run.summary = summary_markdown(everything, fresh=len(fresh), wall=wall)
    if run.folder is not None:
        (run.folder.path / SUMMARY_FILE).write_text(run.summary)


def _rows(records: list[dict[str, Any]], done: list[ExplainedInput]
          ) -> tuple[list[dict[str, Any]], dict[str, np.ndarray] | None]:
    found = [(e.index, arrays) for e in done if (arrays := e.arrays) is not None]
    row = {index: r for r, (index, _) in enumerate(found)}
    for record in records:
        record["row"] = row.get(record["index"])
    if not found:
        return records, None
    return records, {"index": np.array([index for index, _ in found], dtype=np.int64),
                     **{key: np.stack([arrays[i] for _, arrays in found])
                        for i, key in enumerate(("mask", "saliency", "cell_mask"))}}


def summary_markdown(records: Sequence[Mapping[str, Any]], *, fresh: int, wall: float) -> str:
    """Statuses, mask sizes and times of a batch's records, as a short markdown report."""
    n = len(records)
    statuses: dict[str, int] = {}
    for r in records:
        statuses[r.get("status", "?")] = statuses.get(r.get("status", "?"), 0) + 1
    lines = [f"# Batch explain: {n} inputs", "", "| status | inputs |", "|---|---:|"]
    lines += [f"| {s} | {c} |" for s, c in sorted(statuses.items())]
    missing = sum(r.get("mask_size") is None for r in records)
    if missing:
        lines += ["", f"**{missing} of {n} inputs ended without a mask** (their records' status and "
                      "error say why; the command exits 3)."]
    sizes = [r["mask_size"] for r in records if r.get("mask_size") is not None]
    cells = [r["cells"] for r in records if r.get("mask_size") is not None]
    seconds = [r["seconds"] for r in records if r.get("seconds") is not None]
    lines += ["", "| quantity | median | min | max |", "|---|---:|---:|---:|"]
    if sizes:
        frac = [s / c for s, c in zip(sizes, cells, strict=True)]
        lines.append(f"| mask size (cells) | {np.median(sizes):g} | {min(sizes)} | {max(sizes)} |")
        lines.append(f"| kept fraction | {np.median(frac):.3f} | {min(frac):.3f} | {max(frac):.3f} |")
    if seconds:
        lines.append(f"| seconds per input (in its worker) | {np.median(seconds):.3f} | "
                     f"{min(seconds):.3f} | {max(seconds):.3f} |")
    rate = f"{fresh / wall:.2f} inputs/s" if wall > 0 and fresh else "n/a"
    lines += ["", f"This session: {fresh} inputs explained in {wall:.1f} s wall ({rate}); "
              f"{n - fresh} were already done.", ""]
    return "\n".join(lines)
