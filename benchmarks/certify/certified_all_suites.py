"""``certify=True`` on every bench suite and the stress suites: claims, certified exact, how, cost.

For each instance: ``solve(p, "highs", time_limit=T, certify=False)`` (isolated worker; the
solve's own time is its ``times.total``), then, right after it in the same process,
:func:`smug_opt.certify.certify` -- what ``certify=True`` runs after the solve: the safe
LP bound, the safe search, z3 for the residual -- on that result with its own budget of
``--certify-time`` seconds (so a solve that used up the time limit still shows what its
certification costs; a result that claims nothing is not certified). A claim is the
float solver's OPTIMAL/INFEASIBLE; "construction" is one exact before certification
(``proof`` already "exact"). The ratio is the certification's seconds over the solve's,
over the claims certification ran on; the same in CPU seconds (the solve's: this process and
its solver worker; the certification's: this process, its z3 workers and safe-search workers),
which the machine's load inflates less.

    python benchmarks/certify/certified_all_suites.py run SUITE_OR_DIR... --out DIR \
        [--time-limit 20] [--certify-time 60] [--match RE] [--every N]
    python benchmarks/certify/certified_all_suites.py report DIR > table.md

``run`` appends to ``DIR/results.jsonl`` and skips instances already there (resumable).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import time
from pathlib import Path

import numpy as np
import psutil

from smug_opt import load_problem, solve
from smug_opt.bench.suites import get_suite, instances_from_dir, load_suite
from smug_opt.certify import certify, exact_backend
from smug_opt.deadline import Deadline

METHODS = (  # (how certify's note names it, the table's name)
    ("exact enumeration", "enumeration"),
    ("the safe LP bound", "LP bound"),
    ("a branch-and-bound with safe LP bounds", "search"),
    ("(exact) proved", "z3"),
)
CLAIMS = ("OPTIMAL", "INFEASIBLE")


def method(solved, certified) -> str:
    """How ``certified``'s claim was established ("" when it is not exact)."""
    if certified.proof != "exact":
        return ""
    if solved.proof == "exact":
        return "construction"
    added = certified.message[len(solved.message):]
    for phrase, name in METHODS:
        if phrase in added:
            return name
    return "other"


def ask(problem, choice, deadline, start):
    """Certification's exact questions: an uncertified solve on the exact backend."""
    return solve(problem, choice, time_limit=deadline, certify=False, start=start,
                 extras=dict(exact_backend().exact_extras))


def cpu_seconds() -> float:
    """CPU seconds so far of this process, its live children (the solver workers, by
    psutil) and its children that ended (safe-search workers)."""
    own, ended = time.process_time(), os.times()
    live = sum(t.user + t.system for t in (c.cpu_times() for c in psutil.Process().children(recursive=True)))
    return own + live + ended.children_user + ended.children_system


def instances(source: str):
    path = Path(source)
    if path.is_dir():
        return path.name, instances_from_dir(path)
    get_suite(source)
    return source, load_suite(source, progress=False)


def run(args: argparse.Namespace) -> None:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = out / "results.jsonl"
    done = set()
    if results.exists():
        done = {(r["suite"], r["instance"]) for r in map(json.loads, results.read_text().splitlines())}
    for source in args.sources:
        suite, insts = instances(source)
        insts = [i for i in insts if re.search(args.match, i.name)][::args.every]
        for inst in insts:
            if (suite, inst.name) in done:
                continue
            problem = load_problem(inst.problem_path)
            cpu = cpu_seconds()
            solved = solve(problem, "highs", time_limit=args.time_limit, certify=False)
            solve_cpu = cpu_seconds() - cpu
            claimed = solved.status.name if solved.status.name in CLAIMS else ""
            began, cpu = time.monotonic(), cpu_seconds()
            r = solved
            if claimed:
                r = certify(problem, solved, ask=ask, deadline=Deadline.after(args.certify_time))
            spent, certify_cpu = time.monotonic() - began, cpu_seconds() - cpu
            record = {"suite": suite, "instance": inst.name, "claim": claimed, "status": r.status.name,
                      "proof": None if r.proof is None else str(r.proof.value), "objective": r.objective,
                      "solve_s": solved.times.total, "certify_s": spent, "method": method(solved, r),
                      "solve_cpu_s": solve_cpu, "certify_cpu_s": certify_cpu,
                      "message": r.message, "load": os.getloadavg()[0],
                      "binaries": int(problem.binary.sum()), "relus": int(problem.num_relus)}
            with results.open("a") as f:
                f.write(json.dumps(record) + "\n")
            print(f"{suite} {inst.name}: {claimed or '-'} -> {r.status.name} ({record['proof']}, "
                  f"{record['method'] or '-'}) solve {solved.times.total:.2f} s, certify {spent:.2f} s",
                  flush=True)


def report(args: argparse.Namespace) -> None:
    records = [json.loads(line) for line in (Path(args.out) / "results.jsonl").read_text().splitlines()]
    suites = list(dict.fromkeys(r["suite"] for r in records))
    print("| suite | instances | claims | certified exact | % | by construction | enumeration | LP bound "
          "| search | z3 | cert/solve median | cert/solve max | CPU cert/solve median | load |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    misses = []
    for suite in suites:
        rows = [r for r in records if r["suite"] == suite]
        claims = [r for r in rows if r["claim"]]
        exact = [r for r in claims if r["proof"] == "exact"]
        counts = {name: sum(r["method"] == name for r in exact)
                  for name in ("construction", "enumeration", "LP bound", "search", "z3")}
        ratios = np.array([r["certify_s"] / max(r["solve_s"], 1e-9)
                           for r in claims if r["method"] != "construction"])
        median = f"{np.median(ratios):.2f}" if ratios.size else "-"
        cpu = np.array([r["certify_cpu_s"] / max(r["solve_cpu_s"], 1e-9) for r in claims
                        if r["method"] != "construction" and "certify_cpu_s" in r])
        cpu_median = f"{np.median(cpu):.2f}" if cpu.size else "-"
        worst = f"{ratios.max():.2f}" if ratios.size else "-"
        loads = [r["load"] for r in rows]
        share = f"{100 * len(exact) / len(claims):.0f}" if claims else "-"
        print(f"| {suite} | {len(rows)} | {len(claims)} | {len(exact)} | {share} | "
              + " | ".join(str(counts[k]) for k in counts)
              + f" | {median} | {worst} | {cpu_median} | {min(loads):.1f}-{max(loads):.1f} |")
        misses += [r for r in claims if r["proof"] != "exact"]
    slow = [r for r in records if r["claim"] and r["method"] not in ("", "construction")
            and r["certify_s"] > 3 * max(r["solve_s"], 1e-9)]
    if slow:
        print("\nClaims certified in more than 3x their solve's time:\n")
        print("| suite | instance | method | solve s | certify s | ratio |")
        print("|---|---|---|---:|---:|---:|")
        for r in sorted(slow, key=lambda r: -r["certify_s"] / max(r["solve_s"], 1e-9)):
            print(f"| {r['suite']} | {r['instance']} | {r['method']} | {r['solve_s']:.2f} | "
                  f"{r['certify_s']:.2f} | {r['certify_s'] / max(r['solve_s'], 1e-9):.1f} |")
    if misses:
        print("\nClaims not certified exact:\n")
        for r in misses:
            print(f"- {r['suite']} {r['instance']}: {r['claim']} -> {r['status']} "
                  f"(solve {r['solve_s']:.2f} s, certify {r['certify_s']:.2f} s): "
                  f"{r['message'][-300:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_run = sub.add_parser("run")
    p_run.add_argument("sources", nargs="+", help="registered suite names or folders of .smug files")
    p_run.add_argument("--out", required=True)
    p_run.add_argument("--time-limit", type=float, default=20.0)
    p_run.add_argument("--certify-time", type=float, default=60.0)
    p_run.add_argument("--match", default="", help="only instances whose name matches this regex")
    p_run.add_argument("--every", type=int, default=1, help="every N-th instance (a sample)")
    p_report = sub.add_parser("report")
    p_report.add_argument("out")
    args = parser.parse_args()
    run(args) if args.command == "run" else report(args)


if __name__ == "__main__":
    main()
