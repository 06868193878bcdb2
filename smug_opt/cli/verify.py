"""``smug-opt verify``: does a model satisfy a VNN-LIB property? Prints ``unsat`` (it
holds), ``sat`` (a confirmed counterexample) or ``unknown``; or runs a competition's
instance csv into a resumable run folder."""

from __future__ import annotations

import argparse
import contextlib
import csv
import os
import resource
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from smug_opt.backend_choice import DEFAULT_BACKEND

if TYPE_CHECKING:
    from smug_opt.runstore import RunFolder

__all__ = ["add_parser", "run"]

KIND = "verify"


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "verify", help="check a VNN-LIB property of a network: unsat, sat or unknown",
        description="Answer a VNN-LIB property (input box, unsafe output region) of a network: "
                    "unsat (no input in the box reaches the region: proven by rigorous bounds or "
                    "an exact solve), sat (a counterexample, confirmed by float64 forward passes "
                    "of the model and onnxruntime), unknown (time limit). Exit 0 for any answer.")
    p.add_argument("model", nargs="?", help="the network (.onnx, .pt2, .keras/.h5)")
    p.add_argument("spec", nargs="?", help="the property (.vnnlib or .vnnlib.gz)")
    p.add_argument("--time-limit", type=float, default=None,
                   help="seconds for the answer (default 60; with --instances: the csv's timeout)")
    p.add_argument("--backend", default=DEFAULT_BACKEND,
                   help=f"backend for what the bounds leave open (default {DEFAULT_BACKEND}; 'auto' "
                        "or 'a,b' race)")
    p.add_argument("--results", metavar="FILE",
                   help="write the competition's result file (answer, and the counterexample for sat)")
    p.add_argument("--instances", metavar="CSV",
                   help="run every instance of a competition csv (model, property, timeout; paths "
                        "relative to the csv) into --out")
    p.add_argument("--out", metavar="DIR", help="with --instances: the run folder (records.jsonl)")
    p.add_argument("--resume", action="store_true", help="with --instances: continue a run in --out")
    p.add_argument("--overwrite", action="store_true", help="with --instances: replace a run in --out")
    p.add_argument("--retry-unknown", action="store_true",
                   help="with --resume: run again the instances whose last answer was unknown (the new "
                        "record is appended; an instance's last record counts)")
    p.add_argument("--limit", type=int, default=None, metavar="N",
                   help="with --instances: stop after N instances (this invocation)")
    p.add_argument("--only", action="append", default=None, metavar="TEXT",
                   help="with --instances: run only the instances whose 'model,property' name "
                        "contains TEXT (repeatable: any of them; e.g. to run the likeliest first)")
    return p


def run(args: argparse.Namespace) -> int:
    if args.time_limit is not None and not args.time_limit > 0:
        raise ValueError(f"--time-limit must be positive seconds, got {args.time_limit!r}")
    if args.instances:
        if args.model or args.spec or args.results:
            raise ValueError("--instances runs a csv: give no model, property or --results")
        if not args.out:
            raise ValueError("--instances needs --out DIR (the run folder)")
        return _run_instances(args)
    if not (args.model and args.spec):
        raise ValueError("give a model and a property (smug-opt verify net.onnx spec.vnnlib), "
                         "or --instances CSV --out DIR")
    if args.out or args.resume or args.retry_unknown or args.limit is not None or args.only:
        raise ValueError("--out, --resume, --retry-unknown, --limit and --only go with --instances")
    from smug_opt.robustness.instance import load_instance_model, results_text, verify_files

    model = load_instance_model(args.model)
    verdict, _ = verify_files(model, args.spec, time_limit=args.time_limit or 60.0, backend=args.backend)
    if args.results:
        Path(args.results).write_text(results_text(verdict))
    print(verdict.answer)
    if verdict.message:
        print(f"smug-opt verify: {verdict.message}", file=sys.stderr)
    return 0


def _instances(path: Path) -> list[tuple[str, str, float]]:
    rows = []
    with open(path, newline="") as f:
        for number, row in enumerate(csv.reader(f), start=1):
            if not row or not "".join(row).strip():
                continue
            if len(row) != 3:
                raise ValueError(f"{path} line {number}: expected model,property,timeout; got {row}")
            try:
                timeout = float(row[2])
            except ValueError:
                raise ValueError(f"{path} line {number}: timeout {row[2]!r} is not a number") from None
            rows.append((row[0].strip(), row[1].strip(), timeout))
    if not rows:
        raise ValueError(f"{path} lists no instance")
    return rows


def _run_instances(args: argparse.Namespace) -> int:
    from smug_opt.runstore import RunFolder

    csv_path = Path(args.instances).resolve()
    if not csv_path.is_file():
        raise FileNotFoundError(f"no instance csv {csv_path}")
    rows = _instances(csv_path)
    config = {"instances": str(csv_path), "backend": args.backend, "time_limit": args.time_limit}
    if args.retry_unknown and not args.resume:
        raise ValueError("--retry-unknown goes with --resume")
    folder, note = RunFolder.open(args.out, config, kind=KIND, resume=args.resume, overwrite=args.overwrite)
    if note:
        print(note, file=sys.stderr)
    try:
        _run_rows(folder, rows, csv_path, args)
    finally:
        folder.close()
    return 0


def _run_rows(folder: RunFolder, rows: list[tuple[str, str, float]], csv_path: Path,
              args: argparse.Namespace) -> None:
    """Run the instances of ``rows`` that ``args`` selects into the open ``folder``."""
    from smug_opt.robustness.instance import InstanceModel, load_instance_model, verify_files

    done = {name for name, r in _last_records(folder).items()
            if not (args.retry_unknown and r["answer"] == "unknown")}
    models: dict[str, InstanceModel] = {}
    ran = 0
    for index, (model_name, spec_name, timeout) in enumerate(rows):
        name = f"{model_name},{spec_name}"
        if name in done or (args.only and not any(text in name for text in args.only)):
            continue
        if args.limit is not None and ran >= args.limit:
            break
        limit = args.time_limit or timeout
        started, cpu_started = time.monotonic(), _cpu_seconds()
        record = {"name": name, "index": index, "model": model_name, "property": spec_name,
                  "timeout": timeout, "time_limit": limit, "load": round(os.getloadavg()[0], 2)}
        try:
            if model_name not in models:
                models[model_name] = load_instance_model(csv_path.parent / model_name)
            verdict, _ = verify_files(models[model_name], csv_path.parent / spec_name,
                                      time_limit=limit, backend=args.backend)
            record.update(verdict.to_dict())
            record.pop("x")
        except (ValueError, FileNotFoundError) as exc:
            record.update({"answer": "error", "message": str(exc)})
        record["wall_seconds"] = round(time.monotonic() - started, 3)
        record["cpu_seconds"] = round(_cpu_seconds() - cpu_started, 3)
        folder.add([record], None)
        ran += 1
        print(f"{index + 1}/{len(rows)} {name}: {record['answer']} ({record['wall_seconds']:.1f} s)",
              file=sys.stderr)
    answers = [r["answer"] for r in _last_records(folder).values()]
    summary = ", ".join(f"{a} {answers.count(a)}" for a in ("unsat", "sat", "unknown", "error"))
    print(f"{len(answers)}/{len(rows)} instances done: {summary}")


def _cpu_seconds() -> float:
    """CPU seconds of this process and its solver workers, live or ended: on a shared
    machine, what an instance cost apart from the load."""
    import psutil

    ended = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = time.process_time() + ended.ru_utime + ended.ru_stime
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):  # it may end meanwhile
            times = child.cpu_times()
            total += times.user + times.system
    return total


def _last_records(folder: RunFolder) -> dict[str, dict]:
    """Each instance's last record (a retried instance has several)."""
    return {r["name"]: r for r in folder.records()}
