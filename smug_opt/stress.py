"""The stress case on MNIST as a benchmark suite: whole-network minimal masks for held-out
digits, per backend, through the bench harness, with the paper's per-digit table.

:func:`stress_suite` registers one suite per (model, bounds, cell, seed, n): one instance
per digit (a fixed-seed draw from the held-out split), the problem of
:func:`smug_opt.encode.full_network` built once and cached like any suite's, and a
:class:`ModelCheck` that each job runs on the returned mask (a float64 forward pass of the
real weights, :func:`~smug_opt.models.mlp.verify_mask_in_model`). :func:`run_stress`
runs it with :func:`smug_opt.bench.run_benchmark` (one killable process per job, records in
``results.jsonl``, resumable) and writes the per-digit view (:func:`stress_table`) to
``table.md`` and ``table.json``. A digit counts as solved only when the solver proved
optimality and the mask passed the exact check and the model check.
"""

from __future__ import annotations

import json
import math
import os
import re
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from smug_opt.backend_choice import DEFAULT_BACKEND
from smug_opt.encode.layer_bounds import DEFAULT_BOUNDS
from smug_opt.errors import ParameterError
from smug_opt.stress_models import StressModel, load_stress_model

if TYPE_CHECKING:
    from smug_opt.bench.records import RunRecord
    from smug_opt.bench.suites import Suite
    from smug_opt.ir import Problem

__all__ = [
    "ModelCheck",
    "digit_rows",
    "load_stress_model",
    "run_stress",
    "stress_markdown",
    "stress_suite",
    "stress_table",
]

Z3_ENCODINGS = ("paper", "exact", "pb")
SUITES = {"mnist": (28, 28), "cifar10": (32, 32)}
"""The stress suites and their images' (H, W) grid."""


def _backend_label(backend: str, z3_encoding: str) -> str:
    return f"{backend}:{z3_encoding}" if backend == "z3" else backend


@dataclass(frozen=True, eq=False)
class ModelCheck:
    """A job's check of a returned mask in the source model (picklable):
    ``inputs[test_index]`` is the input as the model takes it. A Dense stack is checked
    by a float64 forward pass of its weights; any other model by its own runtime
    (:func:`~smug_opt.stress_models.runtime_scores`), whose dtype and score margin the
    check reports."""

    model: StressModel
    inputs: Mapping[int, np.ndarray]

    def __call__(self, problem: Problem, solution: np.ndarray) -> dict[str, Any]:
        from smug_opt.encode.full_network import solution_mask
        from smug_opt.models.mlp import verify_mask_in_model
        from smug_opt.stress_models import masked_model_input, runtime_scores

        x = self.inputs[int(problem.metadata["test_index"])]
        label = int(problem.metadata["label"])
        pixels = solution_mask(problem, solution).reshape(-1)
        mlp = self.model.mlp
        if mlp is not None:
            affine = mlp.dense_input(x)
            of_pixel = np.arange(affine.size) // (affine.size // pixels.size)  # MLP input: channels last
        else:
            pre = self.model.lowered[0]
            affine = pre(np.reshape(x, (1, -1)))[0]
            of_pixel = np.arange(affine.size) % pixels.size
        nonzero = np.zeros(pixels.size, dtype=bool)
        np.logical_or.at(nonzero, of_pixel, affine != 0)
        mask = np.flatnonzero(pixels & nonzero)
        out: dict[str, Any] = {"mask_pixels": int(mask.size), "mask": mask.tolist()}
        if mlp is not None:
            kept = pixels[of_pixel]
            return {"verified_in_model": bool(verify_mask_in_model(mlp, affine, kept, label)),
                    "runtime": "float64 weights", **out}
        scores, dtype = runtime_scores(self.model, masked_model_input(pre, x, pixels[of_pixel])[None])
        margin = float(scores[0, label] - np.delete(scores[0], label).max())
        return {"verified_in_model": margin > 0, "runtime": dtype, "runtime_margin": margin, **out}


def stress_suite(model: str = "mnist-mlp", *, n: int = 100, seed: int = 0, bounds: str = DEFAULT_BOUNDS,
                 cell: int = 1, suite: str = "mnist", specs: str | None = None) -> tuple[Suite, str]:
    """Register (or re-register) the stress suite of ``suite``'s first ``n`` inputs:
    held-out MNIST digits in ``seed``'s order (:func:`~smug_opt.data.pick_test_digits`),
    or the images recovered from the VNN-LIB specs under ``specs``
    (:func:`~smug_opt.data.vnnlib.spec_images`; the only source for ``cifar10``), encoded
    with ``bounds`` and ``cell`` (an input on which the model predicts no class, its scores
    tied for the top, is left out with a warning); return it and the model's tag. Its version is the
    weights' digest and the encoding's version, so other weights or another encoder
    rebuild the cached problems."""
    import time

    from smug_opt.bench.suites import InstanceSpec, Suite, register_suite
    from smug_opt.encode import full_network
    from smug_opt.encode.full_network import ENCODING_VERSION

    if suite not in SUITES:
        raise ValueError(f"suite must be one of {', '.join(SUITES)}, got {suite!r}")
    loaded = load_stress_model(model)
    grid = SUITES[suite]
    network, where = _encoder_input(loaded, grid)
    by_index = _with_prediction(_stress_inputs(loaded, suite, n, seed, specs), network, where)
    specs_list = [InstanceSpec(f"d{i:05d}", {"test_index": i, "digit": y}) for i, (_, y) in by_index.items()]

    def build(spec: InstanceSpec) -> Problem:
        index = int(spec.params["test_index"])
        start = time.perf_counter()
        problem = full_network(network, by_index[index][0], cell=cell, bounds=bounds, name=loaded.tag,
                               **where)
        return problem.with_metadata(encode_seconds=time.perf_counter() - start, test_index=index,
                                     digit=by_index[index][1])

    light = replace(loaded, mlp=replace(loaded.mlp, adapter=None)) if loaded.mlp is not None else loaded
    check = ModelCheck(light, {i: x for i, (x, _) in by_index.items()})
    # Not named by n: the draw is prefix-stable, so a run extended to more digits keeps
    # (and does not rerun) the digits it has already measured.
    source = "" if specs is None else "-" + Path(specs).name
    name = re.sub(r"[^A-Za-z0-9_.\-]", "_", f"stress-{suite}{source}-{loaded.tag}-{bounds}-c{cell}-s{seed}")
    what = f"held-out digits (seed {seed})" if specs is None else f"images from the specs in {specs}"
    bench_suite = Suite(name, f"stress case: {loaded.tag} whole network, {n} {what}, {bounds} bounds, "
                              f"cell {cell}", lambda: specs_list, build,
                        version=f"{loaded.digest}-e{ENCODING_VERSION}", check=check)
    register_suite(bench_suite, replace=True)
    return bench_suite, loaded.tag


def _encoder_input(model: StressModel, grid: tuple[int, int]) -> tuple[Any, dict[str, Any]]:
    """What :func:`~smug_opt.encode.full_network` encodes for ``model`` (its Dense stack,
    or its lowered network) and the keyword arguments that say how to read an input."""
    if model.mlp is not None:
        return model.mlp, {}
    pre, flat = model.lowered
    return flat, {"preprocess": pre, "shape": grid if len(flat.input_shape) == 1 else None}


def _with_prediction(by_index: dict[int, tuple[np.ndarray, int]], network: Any, where: dict[str, Any]
                     ) -> dict[int, tuple[np.ndarray, int]]:
    """``by_index`` without the inputs on which the network predicts no class (its scores
    tie for the top: nothing to keep), each dropped with a warning naming it."""
    from smug_opt.encode.full_network import TiedPrediction, predicted_label

    kept = {}
    for index, (x, y) in by_index.items():
        try:
            predicted_label(network, x, **where)
        except TiedPrediction as tie:
            warnings.warn(f"input {index} (true label {y}) left out of the stress case: {tie}", stacklevel=3)
            continue
        kept[index] = (x, y)
    return kept


def _stress_inputs(model: StressModel, suite: str, n: int, seed: int, specs: str | None
                   ) -> dict[int, tuple[np.ndarray, int]]:
    """``{index: (model input, true label)}`` of the first ``n`` inputs."""
    if specs is not None:
        from smug_opt.data.vnnlib import spec_images

        channels = 1 if suite == "mnist" else 3
        found = spec_images(specs, channels, model.channels_first)[:n]
        return {i: (_model_input(image.x, model, f"the images of {specs}"), image.label)
                for i, image in enumerate(found)}
    if suite != "mnist":
        raise ValueError(f"the {suite} suite reads its images from VNN-LIB specs: give specs (--specs DIR)")
    from smug_opt.data import pick_test_digits

    indices, digits, labels = pick_test_digits(n, seed=seed)
    return {int(i): (_model_input(x, model, "MNIST digits"), int(y))
            for i, x, y in zip(indices.tolist(), digits, labels, strict=True)}


def _model_input(x: np.ndarray, model: StressModel, what: str) -> np.ndarray:
    """``x`` in the model's input shape; ValueError naming both when the sizes differ."""
    x = np.asarray(x)
    if x.size != math.prod(model.input_shape):
        raise ValueError(f"model {model.tag!r} reads inputs of shape {model.input_shape}; {what} have "
                         f"shape {x.shape}")
    return x.reshape(model.input_shape)


def run_stress(n: int = 100, backends: Sequence[str] = (DEFAULT_BACKEND,), time_limit: float = 600.0,
               out_dir: str | os.PathLike[str] = "stress", model: str = "mnist-mlp", seed: int = 0,
               bounds: str = DEFAULT_BOUNDS, resume: bool = True, progress: bool = True, *,
               z3_encoding: str = "paper", cell: int = 1, suite: str = "mnist",
               specs: str | None = None) -> dict[str, Any]:
    """Run the stress case and return the per-digit table (also written to ``out_dir``).

    The first ``n`` digits of ``seed``'s order of the held-out split are used; ``backends``
    are registry names (``z3`` runs as ``z3:<z3_encoding>`` with
    ``extras={"encoding": z3_encoding}``). With ``resume``, jobs already in
    ``out_dir/results.jsonl`` are kept and not rerun (so ``n = 4`` after ``n = 3`` solves
    one more digit) and the table shows the run's ``n`` digits only; else the run
    directory's records are replaced. ``progress`` shows a bar on stderr.
    """
    from smug_opt.bench.harness import RUN_FILE, RunConfig, resolve_backends, run_benchmark
    from smug_opt.bench.records import RESULTS_FILE, read_records
    from smug_opt.filelock import FolderLock

    if z3_encoding not in Z3_ENCODINGS:
        raise ValueError(f"z3_encoding must be one of {', '.join(Z3_ENCODINGS)}, got {z3_encoding!r}")
    if not time_limit > 0:
        raise ParameterError("time_limit", f"must be positive seconds, got {time_limit!r}")
    names = [b.strip() for b in backends if b.strip()]
    if not names:
        raise ValueError("give at least one backend")
    resolve_backends(names)
    labels = [_backend_label(b, z3_encoding) for b in names]
    bench_suite, tag = stress_suite(model, n=n, seed=seed, bounds=bounds, cell=cell, suite=suite, specs=specs)
    out = Path(out_dir)
    with FolderLock.acquire(out):  # held while stale records go and the benchmark runs
        if not resume:
            for stale in (out / RESULTS_FILE, out / RUN_FILE):
                stale.unlink(missing_ok=True)
        extras = {label: {"encoding": z3_encoding} for label in labels if label.startswith("z3:")}
        config = RunConfig(backends=tuple(labels), time_limit=float(time_limit), suites=(bench_suite.name,),
                           extras=extras)
        load_start = os.getloadavg()[0]
        run_benchmark(config, out, quiet=not progress)
        digits = {spec.name for spec in bench_suite.specs()}
        records = [r for r in read_records(out / RESULTS_FILE)
                   if r.suite == bench_suite.name and r.instance in digits]
        table = stress_table(digit_rows(records), labels)
        table["config"] = {"suite": suite, "specs": specs, "model": tag, "suite_version": bench_suite.version,
                           "bounds": bounds, "cell": cell, "time_limit": float(time_limit), "seed": seed,
                           "n": n, "inputs": len(digits), "z3_encoding": z3_encoding, "backends": labels,
                           "bench_suite": bench_suite.name}
        table["machine"] = {"cpu_count": os.cpu_count(), "load_average_start": load_start,
                            "load_average_end": os.getloadavg()[0]}
        (out / "table.json").write_text(json.dumps(table, indent=2) + "\n")
        (out / "table.md").write_text(stress_markdown(table) + "\n")
        return table


def digit_rows(records: Iterable[RunRecord]) -> list[dict[str, Any]]:
    """The per-digit view of a stress run's records: backend label, true digit, status,
    whether it counts as solved, why a mask was wrong (None if not), seconds, objective."""
    from smug_opt.backend import Status

    rows = []
    for r in records:
        in_model = r.checks.get("verified_in_model")
        failure = None
        if r.verified is False or r.reverified is False:
            failure = "rejected by the exact check: " + r.verification
        elif in_model is False:
            failure = "the mask does not keep the label in the model's float64 forward pass"
        elif "check_error" in r.checks:
            failure = "the model check failed: " + str(r.checks["check_error"])
        rows.append({
            "backend": r.backend, "digit": int(r.features["digit"]),
            "index": int(r.features["test_index"]), "status": r.status.name, "proof": r.proof,
            "solved": r.status is Status.OPTIMAL and r.verified is True and in_model is True,
            "failure": failure, "seconds": r.seconds, "objective": r.objective,
            "encode_seconds": float(r.features.get("encode_seconds", 0.0)),
        })
    return rows


def stress_table(records: Iterable[Mapping[str, Any]], backends: Sequence[str]) -> dict[str, Any]:
    """Per backend and per true digit 0–9 (and all): solved / total and the mean seconds
    of the solved; plus counts by status, wrong masks, and median / max solved seconds."""
    by_backend: dict[str, list[Mapping[str, Any]]] = {b: [] for b in backends}
    for r in records:
        if r["backend"] in by_backend:
            by_backend[r["backend"]].append(r)
    table: dict[str, Any] = {"backends": {}}
    for backend, rows in by_backend.items():
        per_digit = {str(d): _cell([r for r in rows if r["digit"] == d]) for d in range(10)}
        seconds = [r["seconds"] for r in rows if r["solved"]]
        statuses: dict[str, int] = {}
        for r in rows:
            statuses[r["status"]] = statuses.get(r["status"], 0) + 1
        table["backends"][backend] = {
            "per_digit": per_digit,
            "all": _cell(rows),
            "statuses": statuses,
            "wrong_masks": sum(r["failure"] is not None for r in rows),
            "proven_exact": sum(r["solved"] and r.get("proof") == "exact" for r in rows),
            "median_seconds": float(np.median(seconds)) if seconds else None,
            "max_seconds": max(seconds) if seconds else None,
            "median_encode_seconds": float(np.median([r["encode_seconds"] for r in rows])) if rows else None,
            "median_mask_cells": (float(np.median([r["objective"] for r in rows if r["solved"]]))
                                  if seconds else None),
        }
    return table


def _cell(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    solved = [r["seconds"] for r in rows if r["solved"]]
    return {"solved": len(solved), "total": len(rows),
            "mean_seconds": float(np.mean(solved)) if solved else None}


def stress_markdown(table: Mapping[str, Any]) -> str:
    """The per-digit table (the paper's appendix layout) and a summary, as markdown."""
    config = table.get("config", {})
    head = "| backend | | " + " | ".join(str(d) for d in range(10)) + " | ALL |"
    rule = "|---|---|" + "---:|" * 11
    lines = []
    if config:
        c = config
        lines.append(f"Stress case: {c['model']} (weights and encoding {c['suite_version']}), "
                     f"bounds {c['bounds']}, cell {c['cell']}, time limit {c['time_limit']:g} s, "
                     f"{c['n']} digits (seed {c['seed']}{_left_out(c)}). Columns are the true digit; "
                     f"solved = proven optimal, verified exactly and in the model; runtimes are means over "
                     f"solved digits.")
        lines.append("")
    lines += [head, rule]
    for backend, row in table["backends"].items():
        cells = [*(row["per_digit"][str(d)] for d in range(10)), row["all"]]
        solved = " | ".join(f"{c['solved']}/{c['total']}" for c in cells)
        lines.append(f"| {backend} | solved | {solved} |")
        lines.append("| | mean s | " + " | ".join(_number(c["mean_seconds"]) for c in cells) + " |")
    lines += ["", "| backend | solved | proven exactly | statuses | wrong masks | median s | max s | "
                  "median cells | median encode s |", "|---|---:|---:|---|---:|---:|---:|---:|---:|"]
    for backend, row in table["backends"].items():
        statuses = ", ".join(f"{k} {v}" for k, v in sorted(row["statuses"].items()))
        lines.append(f"| {backend} | {row['all']['solved']}/{row['all']['total']} | "
                     f"{row.get('proven_exact', '-')} | {statuses or '-'} | "
                     f"{row['wrong_masks']} | {_number(row['median_seconds'])} | "
                     f"{_number(row['max_seconds'])} | {_number(row['median_mask_cells'])} | "
                     f"{_number(row['median_encode_seconds'])} |")
    machine = table.get("machine")
    if machine:
        start, end = machine["load_average_start"], machine["load_average_end"]
        lines += ["", f"Machine: {machine['cpu_count']} cores, load average {start:.1f} at start, "
                      f"{end:.1f} at end."]
    return "\n".join(lines)


def _left_out(config: Mapping[str, Any]) -> str:
    left = int(config["n"]) - int(config.get("inputs", config["n"]))
    return f"; {left} left out: the model predicts no class on them" if left > 0 else ""


def _number(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.3g}"
