"""The stress case on MNIST: whole-network minimal masks for held-out digits, per backend.

For each digit (a fixed-seed draw from the held-out split) the problem of
:func:`smug_opt.encode.full_network` is encoded once and cached as a ``.smug`` file; each
backend solves it under the time limit; every returned mask is checked twice, exactly
against the problem (by :func:`smug_opt.solve`) and by a float64 forward pass of the real
weights (:func:`~smug_opt.encode.full_network.verify_mask_in_model`). A digit counts as
solved only when the solver proved optimality and both checks passed. Records go to
``results.jsonl`` (one per digit and backend; a rerun skips those already there); the
paper's per-digit table goes to ``table.md`` and ``table.json``.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["load_stress_model", "run_stress", "stress_table", "table_markdown"]

Z3_ENCODINGS = ("paper", "exact", "pb")
RESULTS = "results.jsonl"


def load_stress_model(model: str) -> tuple[Any, str]:
    """``(MLP, tag)`` for a zoo model name or a ``.keras``/``.h5`` file of a Dense MLP."""
    from smug_opt.encode.full_network import as_mlp
    from smug_opt.models import zoo

    if model in zoo.available_models():
        return as_mlp(zoo.load(model), model), model
    path = Path(model)
    if path.suffix in (".keras", ".h5", ".hdf5"):
        from smug_opt.models.keras_adapter import load_model

        return as_mlp(load_model(path), path.stem), path.stem
    raise ValueError(f"model must be one of {', '.join(zoo.available_models())} or a .keras/.h5 "
                     f"file, got {model!r}")


def _backend_label(backend: str, z3_encoding: str) -> str:
    return f"{backend}:{z3_encoding}" if backend == "z3" else backend


def _extras(backend: str, z3_encoding: str) -> dict[str, Any]:
    return {"encoding": z3_encoding} if backend == "z3" else {}


def _check_backends(backends: Sequence[str]) -> list[str]:
    from smug_opt import available_backends

    names = [b.strip() for b in backends if b.strip()]
    if not names:
        raise ValueError("give at least one backend")
    usable = available_backends()
    missing = [b for b in names if b not in usable]
    if missing:
        raise ValueError(f"backend(s) {', '.join(missing)} not usable here; usable: "
                         f"{', '.join(usable) or 'none'} (see `smug-opt backends`)")
    return names


def _read_records(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    records = []
    for line in path.read_text().splitlines():
        if line.strip():
            records.append(json.loads(line))
    return records


def _key(record: Mapping[str, Any]) -> tuple:
    return (record["model_digest"], record["bounds"], record["cell"], record["time_limit"],
            record["index"], record["backend"])


def run_stress(n: int = 100, backends: Sequence[str] = ("highs",), time_limit: float = 600.0,
               out_dir: str | os.PathLike[str] = "stress", model: str = "mnist-mlp", seed: int = 0,
               bounds: str = "lp", resume: bool = True, progress: bool = True, *,
               z3_encoding: str = "paper", cell: int = 1) -> dict[str, Any]:
    """Run the stress case and return the per-digit table (also written to ``out_dir``).

    ``n`` digits are drawn with ``seed`` from the held-out split; ``backends`` are registry
    names (``z3`` runs with ``extras={"encoding": z3_encoding}``). With ``resume``, records
    already in ``out_dir/results.jsonl`` for the same model weights, bounds, cell, time
    limit, digit and backend are kept and not rerun. ``progress`` shows a bar on stderr.
    """
    from smug_opt.data import pick_test_digits

    if z3_encoding not in Z3_ENCODINGS:
        raise ValueError(f"z3_encoding must be one of {', '.join(Z3_ENCODINGS)}, got {z3_encoding!r}")
    if not time_limit > 0:
        raise ValueError(f"time_limit must be positive seconds, got {time_limit!r}")
    names = _check_backends(backends)
    mlp, tag = load_stress_model(model)
    indices, xs, ys = pick_test_digits(n, seed=seed)
    out = Path(out_dir)
    (out / "problems").mkdir(parents=True, exist_ok=True)
    results = out / RESULTS
    config = {"suite": "mnist", "model": tag, "model_digest": mlp.digest, "bounds": bounds, "cell": cell,
              "time_limit": float(time_limit), "seed": seed, "n": n, "z3_encoding": z3_encoding,
              "backends": [_backend_label(b, z3_encoding) for b in names]}
    done = {_key(r) for r in _read_records(results)} if resume else set()
    load_start = os.getloadavg()[0]
    bar = _progress(n * len(names), progress)
    try:
        with results.open("a" if resume else "w") as sink:
            for index, x, digit in zip(indices.tolist(), xs, ys.tolist(), strict=True):
                todo = [b for b in names if (mlp.digest, bounds, cell, float(time_limit), index,
                                             _backend_label(b, z3_encoding)) not in done]
                bar.update(len(names) - len(todo))
                if not todo:
                    continue
                problem, encode_seconds = _problem(out, mlp, tag, index, x, bounds, cell)
                for backend in todo:
                    bar.set_postfix_str(f"digit {index} {backend}", refresh=True)
                    record = _solve_one(problem, mlp, x, backend, z3_encoding, time_limit)
                    record.update(config_fields(config), index=index, digit=int(digit),
                                  encode_seconds=encode_seconds)
                    sink.write(json.dumps(record) + "\n")
                    sink.flush()
                    bar.update(1)
    finally:
        bar.close()
    records = [r for r in _read_records(results) if _matches(r, config, set(indices.tolist()))]
    table = stress_table(records, config["backends"])
    table["config"] = config
    table["machine"] = {"cpu_count": os.cpu_count(), "load_average_start": load_start,
                        "load_average_end": os.getloadavg()[0]}
    (out / "table.json").write_text(json.dumps(table, indent=2) + "\n")
    (out / "table.md").write_text(table_markdown(table) + "\n")
    return table


def config_fields(config: Mapping[str, Any]) -> dict[str, Any]:
    """The configuration fields every record carries."""
    return {k: config[k] for k in ("suite", "model", "model_digest", "bounds", "cell", "time_limit", "seed")}


def _matches(record: Mapping[str, Any], config: Mapping[str, Any], indices: set[int]) -> bool:
    return (all(record.get(k) == v for k, v in config_fields(config).items() if k != "seed")
            and record["index"] in indices and record["backend"] in config["backends"])


def _progress(total: int, enabled: bool) -> Any:
    from tqdm import tqdm

    return tqdm(total=total, disable=not enabled, file=sys.stderr, unit="solve", dynamic_ncols=True)


def _problem(out: Path, mlp: Any, tag: str, index: int, x: np.ndarray, bounds: str, cell: int
             ) -> tuple[Any, float]:
    """The digit's problem, from the cache or encoded now (and cached); and encoding seconds."""
    from smug_opt.encode import full_network
    from smug_opt.problem_file import load_problem, save_problem

    path = out / "problems" / f"{tag}-{mlp.digest[:8]}-{bounds}-c{cell}-{index:04d}.smug"
    if path.is_file():
        problem = load_problem(path)
        if problem.metadata.get("model_digest") == mlp.digest:
            return problem, float(problem.metadata["encode_seconds"])
    start = time.perf_counter()
    problem = full_network(mlp, x, cell=cell, bounds=bounds, name=tag)
    seconds = time.perf_counter() - start
    problem = problem.with_metadata(encode_seconds=seconds, test_index=index)
    save_problem(problem, path)
    return problem, seconds


def _solve_one(problem: Any, mlp: Any, x: np.ndarray, backend: str, z3_encoding: str,
               time_limit: float) -> dict[str, Any]:
    """Solve, check the mask in the real model, and describe the outcome as a record."""
    from smug_opt import Status, solve
    from smug_opt.encode.full_network import solution_mask, verify_mask_in_model

    result = solve(problem, backend, time_limit=time_limit, extras=_extras(backend, z3_encoding))
    label = int(problem.metadata["label"])
    in_model = mask = None
    if result.x is not None:
        pixels = solution_mask(problem, result.x)
        in_model = verify_mask_in_model(mlp, x, pixels, label)
        mask = np.flatnonzero(pixels.reshape(-1) & (np.asarray(x).reshape(pixels.size, -1) != 0).any(1))
    solved = result.status is Status.OPTIMAL and bool(result.verified) and bool(in_model)
    failure = None
    if result.verified is False:
        failure = "rejected by the exact check: " + result.verification
    elif in_model is False:
        failure = "the mask does not keep the label in the model's float64 forward pass"
    return {
        "backend": _backend_label(backend, z3_encoding),
        "solver": result.solver,
        "label": label,
        "predicted": int(problem.metadata["predicted"]),
        "status": result.status.name,
        "solved": solved,
        "failure": failure,
        "objective": _finite(result.objective),
        "bound": _finite(result.bound),
        "gap": _finite(result.gap),
        "seconds": result.times.total,
        "solve_seconds": result.times.solve,
        "lower_seconds": result.times.lower,
        "verify_seconds": result.times.verify,
        "verified": result.verified,
        "verified_in_model": in_model,
        "mask_cells": None if result.objective is None else round(result.objective),
        "mask_pixels": None if mask is None else int(mask.size),
        "mask": None if mask is None else mask.tolist(),
        "unstable": problem.metadata.get("unstable"),
        "greedy_cells": problem.metadata.get("greedy_cells"),
        "killed": result.killed,
        "attempts": len(result.attempts),
        "message": result.message,
    }


def _finite(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


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


def table_markdown(table: Mapping[str, Any]) -> str:
    """The per-digit table (the paper's appendix layout) and a summary, as markdown."""
    config = table.get("config", {})
    head = "| backend | | " + " | ".join(str(d) for d in range(10)) + " | ALL |"
    rule = "|---|---|" + "---:|" * 11
    lines = []
    if config:
        lines.append(f"Stress case: {config['model']} ({config['model_digest']}), bounds {config['bounds']}, "
                     f"cell {config['cell']}, time limit {config['time_limit']:g} s, {config['n']} digits "
                     f"(seed {config['seed']}). Columns are the true digit; solved = proven optimal, "
                     f"verified exactly and in the model; runtimes are means over solved digits.")
        lines.append("")
    lines += [head, rule]
    for backend, row in table["backends"].items():
        cells = [*(row["per_digit"][str(d)] for d in range(10)), row["all"]]
        solved = " | ".join(f"{c['solved']}/{c['total']}" for c in cells)
        lines.append(f"| {backend} | solved | {solved} |")
        lines.append("| | mean s | " + " | ".join(_number(c["mean_seconds"]) for c in cells) + " |")
    lines += ["", "| backend | solved | statuses | wrong masks | median s | max s | median cells | "
                  "median encode s |", "|---|---:|---|---:|---:|---:|---:|---:|"]
    for backend, row in table["backends"].items():
        statuses = ", ".join(f"{k} {v}" for k, v in sorted(row["statuses"].items()))
        lines.append(f"| {backend} | {row['all']['solved']}/{row['all']['total']} | {statuses or '-'} | "
                     f"{row['wrong_masks']} | {_number(row['median_seconds'])} | "
                     f"{_number(row['max_seconds'])} | {_number(row['median_mask_cells'])} | "
                     f"{_number(row['median_encode_seconds'])} |")
    machine = table.get("machine")
    if machine:
        start, end = machine["load_average_start"], machine["load_average_end"]
        lines += ["", f"Machine: {machine['cpu_count']} cores, load average {start:.1f} at start, "
                      f"{end:.1f} at end."]
    return "\n".join(lines)


def _number(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.3g}"
