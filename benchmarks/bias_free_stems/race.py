"""Which backends to race on the strengthened bias-free stems: each setting solves every
chosen instance of the suite (strengthened, every piece) within the same limit, one solve at a
time, and the table says status, objective, bound, gap and seconds side by side; the parts
table says where the cells sit (the bound stalls in the largest parts).

    python benchmarks/bias_free_stems/race.py OUT --settings auto,highs+z3 \
        --filter 'conv7s2-f64-china-s0,conv7s2-f64-flower-s0,keras-ResNet50-china,keras-DenseNet121-china'

A setting is ``auto`` or backends joined by ``+`` (raced: ``highs+z3`` is ``backend="highs,z3"``).
The problems come from the bench cache (built once, as ``smug-opt bench run`` builds them);
each result is one line of ``OUT/results.jsonl`` (a rerun skips what is there).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path


def _problems(names: list[str]) -> dict:
    """The suite's problems by name (built into the bench cache once, as ``bench run`` does)."""
    from smug_opt.bench.suites import load_suite
    from smug_opt.problem_file import load_problem

    instances = {i.name: i for i in load_suite("bias-free-stems")}
    return {name: load_problem(instances[name].problem_path) for name in names}


def _parts(problem) -> list[dict]:
    from smug_opt.strengthen import strengthen

    parts = strengthen(problem).parts
    return sorted(({"cells": int(p.columns.size), "rows": int(p.problem.num_rows)} for p in parts),
                  key=lambda d: -d["cells"])


def main() -> None:
    from smug_opt import solve

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--settings", default="auto,highs+z3")
    ap.add_argument("--filter", required=True, help="instance names, separated by commas")
    ap.add_argument("--time-limit", type=float, default=60.0)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    results = args.out / "results.jsonl"
    done = {(r["instance"], r["setting"]) for r in map(json.loads, results.read_text().splitlines())} \
        if results.exists() else set()
    for name, problem in _problems(args.filter.split(",")).items():
        parts = _parts(problem)
        for setting in args.settings.split(","):
            if (name, setting) in done:
                continue
            load = os.getloadavg()[0]
            t = time.perf_counter()
            r = solve(problem, setting.replace("+", ","), time_limit=args.time_limit, strengthen=True)
            row = {"instance": name, "setting": setting, "status": r.status.name, "objective": r.objective,
                   "bound": r.bound, "gap": r.gap, "seconds": round(time.perf_counter() - t, 1),
                   "load": round(load, 1), "parts": len(parts), "largest_parts": parts[:3]}
            print(json.dumps(row), flush=True)
            with results.open("a") as f:
                f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
