"""Adversarial campaign: every backend against exact brute force on thousands of small
instances; writes one JSON line per (instance, backend) and a Markdown table.

    python benchmarks/campaign/campaign.py --per-backend 10000 --time-limit 5 \\
        --out benchmarks/campaign/results [--backends highs,z3] [--deadline-minutes 40] [--certify] \
        [--suite large] [--certificates]

Instance ``i`` is family ``FAMILIES[i % len(FAMILIES)]`` drawn from seed ``i`` (with
``--suite large``: ``planted.LARGE_FAMILIES``, 20-225 binaries, the optimum known by
construction), so every backend sees the same instances and a run can be resumed (done
pairs are skipped) or cut short by ``--deadline-minutes`` (the table then counts what
finished). ``--certificates``: every OPTIMAL/INFEASIBLE answer's VIPR certificate written
and checked by ``smug-opt check-certificate`` (``certificates.py``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from certificates import certificate_outcome
from families import FAMILIES
from judge import judge
from planted import LARGE_FAMILIES

from smug_opt import Problem, solve
from smug_opt.registry import available_backends
from smug_opt.testing import ExactOptimum, exact_optimum

RESULTS = "results.jsonl"
TABLE = "TABLE.md"


def instance(i: int, suite: str = "small") -> tuple[str, Problem, ExactOptimum]:
    """Instance ``i`` of ``suite`` (``small``: families.py, ``large``: planted.py), its family
    and its exact optimum."""
    if suite == "large":
        names = list(LARGE_FAMILIES)
        family = names[i % len(names)]
        planted = LARGE_FAMILIES[family](np.random.default_rng(i))
        return family, planted.problem, ExactOptimum(planted.optimum, planted.optimum is not None)
    names = list(FAMILIES)
    family = names[i % len(names)]
    problem = FAMILIES[family](np.random.default_rng(i))
    return family, problem, exact_optimum(problem)


def _repro(problem: Problem) -> dict[str, Any]:
    """Everything needed to rebuild the instance, every float in hex."""
    hexes = lambda a: [float(v).hex() for v in np.asarray(a).ravel().tolist()]  # noqa: E731
    return {"A": [hexes(row) for row in problem.A.toarray()],
            "senses": [str(s) for s in problem.senses.tolist()], "rhs": hexes(problem.rhs),
            "objective": hexes(problem.objective), "binary": problem.binary.tolist(),
            "lb": hexes(problem.lb), "ub": hexes(problem.ub), "relus": problem.num_relus,
            "repr": repr(problem)}


def run(args: argparse.Namespace) -> None:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / RESULTS
    done: set[tuple[int, str]] = set()
    if path.exists():
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            done.add((rec["i"], rec["backend"]))
    backends = args.backends.split(",") if args.backends else available_backends()
    stop = None if args.deadline_minutes is None else time.monotonic() + 60 * args.deadline_minutes
    with path.open("a") as sink:
        for i in range(args.start, args.start + args.per_backend):
            if stop is not None and time.monotonic() > stop:
                print(f"deadline reached before instance {i}", flush=True)
                break
            todo = [b for b in backends if (i, b) not in done]
            if not todo:
                continue
            family, problem, truth = instance(i, args.suite)
            for backend in todo:
                r = solve(problem, backend, time_limit=args.time_limit, memory_limit_mb=args.memory_limit,
                          certify=args.certify)
                verdict = judge(problem, truth, r)
                rec = {"i": i, "family": family, "backend": backend, "status": r.status.name,
                       "proof": getattr(r, "proof", None), "verdict": verdict.kind, "why": verdict.why,
                       "objective": r.objective, "bound": r.bound,
                       "optimum": None if truth.value is None else float(truth.value),
                       "attained": truth.attained, "wall": r.times.total,
                       "overshoot": r.times.total - args.time_limit, "killed": r.killed,
                       "peak_mb": r.peak_memory_mb, "message": r.message[:300]}
                if args.certificates:
                    rec |= certificate_outcome(problem, r, truth.value, out / "certificates",
                                               f"{i}-{backend}", args.time_limit)
                    if rec.get("certificate", "accepted") not in ("accepted", "none"):
                        print(f"CERTIFICATE {rec['certificate']} {backend} #{i} {family}: {rec['checker']}",
                              flush=True)
                if verdict.kind == "wrong":
                    rec["repro"] = _repro(problem)
                    print(f"WRONG {backend} #{i} {family}: {verdict.why}", flush=True)
                sink.write(json.dumps(rec) + "\n")
                sink.flush()
            if i % 100 == 0:
                print(f"instance {i} done", flush=True)
    write_table(out, args)


def write_table(out: Path, args: argparse.Namespace | None = None) -> str:
    """Summarise ``results.jsonl`` as Markdown (per family and backend, and per backend)."""
    recs = [json.loads(line) for line in (out / RESULTS).read_text().splitlines()]
    cells: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for rec in recs:
        cells[(rec["family"], rec["backend"])].append(rec)
        cells[("all", rec["backend"])].append(rec)
    lines = ["| family | backend | instances | wrong | weak (honest) | right | exact claims "
             "| certificates accepted / none / rejected / accepted-wrong "
             "| overshoot max (s) | worker memory max (MB) | killed |", "|---" * 11 + "|"]
    for (family, backend), group in sorted(cells.items(), key=lambda kv: (kv[0][0] == "all", kv[0])):
        count = {k: sum(r["verdict"] == k for r in group) for k in ("wrong", "weak", "right")}
        over = max(r["overshoot"] for r in group)
        mem = max((r["peak_mb"] or 0.0) for r in group)
        name = f"**{family}**" if family == "all" else family
        exact = sum(r["proof"] == "exact" for r in group)
        certs = "/".join(str(sum(r.get("certificate") == k for r in group))
                         for k in ("accepted", "none", "rejected", "accepted-wrong"))
        lines.append(f"| {name} | {backend} | {len(group)} | {count['wrong']} | {count['weak']} | "
                     f"{count['right']} | {exact} | {certs} | {over:+.2f} | {mem:.0f} | "
                     f"{sum(r['killed'] for r in group)} |")
    text = "\n".join(lines) + "\n"
    if args is not None:
        command = " ".join(["python", "benchmarks/campaign/campaign.py", *sys.argv[1:]])
        text = f"Command: `{command}`\n\n" + text
    (out / TABLE).write_text(text)
    return text


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--per-backend", type=int, default=10_000, help="instances (each on every backend)")
    p.add_argument("--start", type=int, default=0, help="first instance index")
    p.add_argument("--time-limit", type=float, default=5.0)
    p.add_argument("--memory-limit", type=float, default=None, help="MB per worker (default: solve's)")
    p.add_argument("--backends", default=None, help="comma-separated (default: every usable one)")
    p.add_argument("--deadline-minutes", type=float, default=None, help="stop starting instances after")
    p.add_argument("--certify", action="store_true", default=None,
                   help="certify=True on every solve (default: solve's own default)")
    p.add_argument("--suite", choices=("small", "large"), default="small",
                   help="small: families.py (<= 10 binaries); large: planted.py (20-225 binaries)")
    p.add_argument("--certificates", action="store_true",
                   help="write and check the VIPR certificate of every OPTIMAL/INFEASIBLE answer")
    p.add_argument("--out", default="benchmarks/campaign/results")
    p.add_argument("--table-only", action="store_true", help="rewrite TABLE.md from results.jsonl")
    args = p.parse_args()
    if args.table_only:
        print(write_table(Path(args.out), args))
        return
    run(args)
    print(write_table(Path(args.out), args))


if __name__ == "__main__":
    main()
