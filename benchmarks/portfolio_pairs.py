"""Which backends should race: every pair's virtual best on the committed bench results.

    python benchmarks/portfolio_pairs.py [benchmarks/results/RUN ...]

For each run (default: every folder under benchmarks/results with a results.jsonl), prints
each backend's solved count and shifted geometric mean (s = 10 s, unsolved at the limit),
the virtual best of all backends, and the same for every pair (per instance the faster of
the two). smug_opt.portfolio's ``auto`` orders come from this table.
"""

from __future__ import annotations

import itertools
import json
import math
import sys
from collections import defaultdict
from pathlib import Path


def sgm(times: list[float], shift: float = 10.0) -> float:
    return math.exp(sum(math.log(max(1.0, t + shift)) for t in times) / len(times)) - shift


def table(run: Path) -> list[str]:
    records = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines() if line]
    records = [r for r in records if r["backend"] != "auto"]
    limit = records[0]["time_limit"]
    times: dict[str, dict[str, float]] = defaultdict(dict)
    for r in records:
        times[r["instance"]][r["backend"]] = r["times"]["total"] if r["status"] == "OPTIMAL" else limit
    instances = sorted(i for i in times if len(times[i]) == len({r["backend"] for r in records}))
    backends = sorted({r["backend"] for r in records})

    def row(label: str, ts: list[float]) -> str:
        return f"| {label} | {sum(t < limit for t in ts)}/{len(ts)} | {sgm(ts):.3f} |"

    lines = [f"### {run.name} ({len(instances)} instances, {limit:g} s)", "",
             "| backends | solved | SGM (s) |", "|---|---|---|"]
    lines += [row(b, [times[i][b] for i in instances]) for b in backends]
    lines.append(row("virtual best", [min(times[i].values()) for i in instances]))
    for a, b in itertools.combinations(backends, 2):
        lines.append(row(f"{a} + {b}", [min(times[i][a], times[i][b]) for i in instances]))
    return [*lines, ""]


def main(argv: list[str]) -> None:
    found = Path("benchmarks/results").glob("*/results.jsonl")
    runs = [Path(a) for a in argv] or sorted(p.parent for p in found)
    for run in runs:
        print("\n".join(table(run)))


if __name__ == "__main__":
    main(sys.argv[1:])
