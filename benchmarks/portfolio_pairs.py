"""Which backends should race: every pair's virtual best on the committed bench results.

    python benchmarks/portfolio_pairs.py [benchmarks/results/RUN ...]

For each run (default: every folder under benchmarks/results with a results.jsonl), prints
each backend's solved count and shifted geometric mean (``smug_opt.bench.metrics``: solved
= proven OPTIMAL or INFEASIBLE and not wrong, unsolved at the limit, s = 10 s), the
virtual best of all backends, and the same for every pair (per instance the faster of the
two). smug_opt.portfolio's ``auto`` orders come from this table.
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

from smug_opt.bench.metrics import InstanceResult, JobOutcome, results_by_instance, shifted_geometric_mean
from smug_opt.bench.records import read_records


def _best(results: list[InstanceResult]) -> tuple[float, bool]:
    """The virtual best of ``results`` on one instance: its seconds and whether it solved."""
    solved = [r.seconds for r in results if r.outcome is JobOutcome.SOLVED]
    return (min(solved), True) if solved else (max(r.seconds for r in results), False)


def table(run: Path) -> list[str]:
    records = [r for r in read_records(run / "results.jsonl") if r.backend != "auto"]
    limit = records[0].time_limit
    by_instance = results_by_instance(records)
    backends = sorted({r.backend for r in records})
    instances = sorted(k for k, v in by_instance.items() if len(v) == len(backends))

    def row(label: str, chosen: tuple[str, ...]) -> str:
        best = [_best([by_instance[i][b] for b in chosen]) for i in instances]
        solved = sum(ok for _, ok in best)
        return f"| {label} | {solved}/{len(best)} | {shifted_geometric_mean(t for t, _ in best):.3f} |"

    lines = [f"### {run.name} ({len(instances)} instances, {limit:g} s)", "",
             "| backends | solved | SGM (s) |", "|---|---|---|"]
    lines += [row(b, (b,)) for b in backends]
    lines.append(row("virtual best", tuple(backends)))
    lines += [row(f"{a} + {b}", (a, b)) for a, b in itertools.combinations(backends, 2)]
    return [*lines, ""]


def main(argv: list[str]) -> None:
    found = Path("benchmarks/results").glob("*/results.jsonl")
    runs = [Path(a) for a in argv] or sorted(p.parent for p in found)
    for run in runs:
        print("\n".join(table(run)))


if __name__ == "__main__":
    main(sys.argv[1:])
