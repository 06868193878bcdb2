"""Per-backend, ``auto`` and virtual-best table of one or more bench runs (merged).

    python benchmarks/race_table.py RUN_DIR [RUN_DIR ...]

Solved = proven OPTIMAL; SGM = shifted geometric mean (s = 10 s) with unsolved runs at
the limit; the virtual best takes, per instance, the fastest single backend (``auto``
excluded). Also lists instances a single backend proved and ``auto`` did not.
"""

from __future__ import annotations

import json
import math
import sys
from collections import defaultdict
from pathlib import Path


def sgm(times: list[float], shift: float = 10.0) -> float:
    return math.exp(sum(math.log(max(1.0, t + shift)) for t in times) / len(times)) - shift


def main(runs: list[str]) -> None:
    records = [json.loads(line) for run in runs
               for line in (Path(run) / "results.jsonl").read_text().splitlines() if line]
    limit = records[0]["time_limit"]
    times: dict[str, dict[str, float]] = defaultdict(dict)
    for r in records:
        solved = r["status"] == "OPTIMAL" and r["times"] is not None
        times[r["instance"]][r["backend"]] = r["times"]["total"] if solved else limit
    backends = sorted({r["backend"] for r in records} - {"auto"})
    instances = sorted(i for i in times if all(b in times[i] for b in [*backends, "auto"]))
    vb = [min(times[i][b] for b in backends) for i in instances]
    best = sgm(vb)
    print(f"| backend | solved ({len(instances)}) | SGM (s) | × virtual best |")
    print("|---|---|---|---|")
    for b in [*backends, "auto"]:
        ts = [times[i][b] for i in instances]
        print(f"| {b} | {sum(t < limit for t in ts)} | {sgm(ts):.3f} | {sgm(ts) / best:.2f} |")
    print(f"| virtual best | {sum(t < limit for t in vb)} | {best:.3f} | 1.00 |")
    missed = [i for i, t in zip(instances, vb, strict=True) if t < limit and times[i]["auto"] >= limit]
    print(f"\ninstances a single backend proved and auto did not: {missed or 'none'}")


if __name__ == "__main__":
    main(sys.argv[1:])
