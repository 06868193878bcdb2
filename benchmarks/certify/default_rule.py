"""The default certification's cost against the solve, per instance, with the problem
features :func:`smug_opt.certify_rule.certified_by_default` reads: the data its rule was
chosen from, and the table of what the rule gives.

For each instance: HiGHS as ``solve`` runs it by default (isolated warm worker) with
``certify=False``; for an OPTIMAL/INFEASIBLE claim not already exact, right after it in
this process, :func:`smug_opt.certify.certify_within_budget` (the default certification,
run whatever the rule says) on that result; wall and CPU seconds of both (the solve's CPU:
this process and its workers, by psutil); the problem's features
(:func:`smug_opt.certify_rule.features`) and sizes (``sizes``:
:func:`smug_opt.bench.suites.problem_features`, for choosing a rule). ``run`` appends one
JSON line per instance to ``DIR/results.jsonl`` (resumable); ``report`` prints, per suite,
the claims, those the rule certifies by default, and the certification's share of the
solve on them and on the rest.

    python benchmarks/certify/default_rule.py run mnist-first-layer text synthetic --out DIR
    python benchmarks/certify/default_rule.py report DIR > table.md
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import time
from pathlib import Path

import numpy as np
import psutil

from smug_opt import load_problem, solve
from smug_opt.bench.suites import load_suite, problem_features
from smug_opt.certify import certify_within_budget
from smug_opt.certify_rule import ProblemFeatures, certified_by_default, features
from smug_opt.deadline import Deadline

CLAIMS = ("OPTIMAL", "INFEASIBLE")


def method(message: str) -> str:
    """How the default certification's note says the claim was proven ("" when it was not)."""
    if "safe LP bound" in message:
        return "LP bound"
    if "branch-and-bound with safe LP bounds" in message:
        return "search"
    return ""


def rule_features(record: dict) -> ProblemFeatures:
    """The rule's features from a record (earlier records hold more of them)."""
    names = [f.name for f in dataclasses.fields(ProblemFeatures)]
    return ProblemFeatures(**{name: record["features"][name] for name in names})


def cpu_seconds() -> float:
    """CPU seconds of this process and its children (the solver workers) so far."""
    me = psutil.Process()
    times = [me.cpu_times(), *(child.cpu_times() for child in me.children(recursive=True))]
    return sum(t.user + t.system for t in times)


def run(suites: list[str], out: Path, time_limit: float, match: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    path = out / "results.jsonl"
    done = {(r["suite"], r["instance"]) for r in map(json.loads, path.open())} if path.exists() else set()
    for suite in suites:
        for inst in load_suite(suite):
            if (suite, inst.name) in done or (match and not re.search(match, inst.name)):
                continue
            p = load_problem(inst.problem_path)
            cpu = cpu_seconds()
            plain = solve(p, "highs", time_limit=time_limit, certify=False)
            record = {"suite": suite, "instance": inst.name, "claim": plain.status.name,
                      "proof": plain.proof, "solve_s": plain.times.total,
                      "solve_cpu_s": cpu_seconds() - cpu,
                      "features": dataclasses.asdict(features(p)), "sizes": problem_features(p),
                      "load": os.getloadavg()[0]}
            if plain.status.name in CLAIMS and plain.proof != "exact":
                began, cpu = time.perf_counter(), time.process_time()
                certified = certify_within_budget(p, plain, Deadline.after(time_limit))
                record.update(certify_s=time.perf_counter() - began,
                              certify_cpu_s=time.process_time() - cpu, certified=certified.proof == "exact",
                              method=method(certified.message[len(plain.message):]))
            with path.open("a") as f:
                f.write(json.dumps(record) + "\n")
            print(suite, inst.name, record.get("method"), f"{record['solve_s']:.2f}",
                  f"{record.get('certify_s', 0):.3f}", flush=True)


def report(folder: Path) -> None:
    rows = [json.loads(line) for line in (folder / "results.jsonl").open()]
    print("| suite | claims | exact before certifying | rule on | certified by default | "
          "default cert/solve median (rule on) | max (rule on) | CPU median (rule on) | "
          "median (rule off) | rule off: would certify | load |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for suite in dict.fromkeys(r["suite"] for r in rows):
        mine = [r for r in rows if r["suite"] == suite and r["claim"] in CLAIMS]
        before = [r for r in mine if r["proof"] == "exact"]
        tried = [r for r in mine if "certify_s" in r]
        on = [r for r in tried if certified_by_default(rule_features(r))]
        off = [r for r in tried if r not in on]

        def ratios(rs: list[dict], cpu: str = "") -> np.ndarray:
            rs = [r for r in rs if f"certify{cpu}_s" in r]
            return (np.array([r[f"certify{cpu}_s"] / r[f"solve{cpu}_s"] for r in rs]) if rs
                    else np.array([np.nan]))

        loads = [r["load"] for r in rows if r["suite"] == suite]
        print(f"| {suite} | {len(mine)} | {len(before)} | {len(on)} | {sum(r['certified'] for r in on)} | "
              f"{np.median(ratios(on)):.3f} | {np.max(ratios(on)):.3f} | "
              f"{np.median(ratios(on, '_cpu')):.3f} | {np.median(ratios(off)):.3f} | "
              f"{sum(r['certified'] for r in off)} | {min(loads):.1f}-{max(loads):.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("run", "report"))
    parser.add_argument("names", nargs="+", help="run: the suites; report: the results folder")
    parser.add_argument("--out", help="run: the results folder")
    parser.add_argument("--time-limit", type=float, default=20.0)
    parser.add_argument("--match", default="", help="only instances whose name matches this regex")
    args = parser.parse_args()
    if args.command == "run":
        run(args.names, Path(args.out), args.time_limit, args.match)
    else:
        report(Path(args.names[0]))


if __name__ == "__main__":
    main()
