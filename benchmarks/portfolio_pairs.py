"""Which backends should race: every pair's virtual best on the committed bench results,
and the race orders of ``backend="auto"`` that follow from them.

    python benchmarks/portfolio_pairs.py [benchmarks/results/RUN ...]
    python benchmarks/portfolio_pairs.py --write-orders

The first prints, for each run (default: every folder under benchmarks/results with a
results.jsonl), each backend's solved count and shifted geometric mean
(``smug_opt.bench.metrics``: solved = proven OPTIMAL or INFEASIBLE and not wrong,
unsolved at the limit, s = 10 s), the virtual best of all backends, and the same for
every pair (per instance the faster of the two).

``--write-orders`` rewrites ``smug_opt/data/race_orders.json`` (the orders
:mod:`smug_opt.portfolio` reads, shipped in the wheel) from the run each problem class
names there, by :func:`reordered`: a measured difference reorders backends only beyond the
file's ``noise`` (an SGM ratio), so a re-run that moves within the machine's noise keeps
the orders, and one that separates the backends changes them.
"""

from __future__ import annotations

import itertools
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from smug_opt.bench.metrics import InstanceResult, JobOutcome, results_by_instance, shifted_geometric_mean
from smug_opt.bench.records import read_records

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
ORDERS_FILE = ROOT / "smug_opt" / "data" / "race_orders.json"


class Score(NamedTuple):
    """A backend's (or a pair's virtual best's) instances solved and shifted geometric mean."""

    solved: int
    sgm: float


def _best(results: list[InstanceResult]) -> tuple[float, bool]:
    """The virtual best of ``results`` on one instance: its seconds and whether it solved."""
    solved = [r.seconds for r in results if r.outcome is JobOutcome.SOLVED]
    return (min(solved), True) if solved else (max(r.seconds for r in results), False)


def scores(run: Path) -> tuple[float, int, dict[tuple[str, ...], Score]]:
    """The run's time limit, its instance count and the :class:`Score` of every backend
    (a 1-tuple), every pair and all of them together (the virtual best)."""
    records = [r for r in read_records(run / "results.jsonl") if r.backend != "auto"]
    by_instance = results_by_instance(records)
    backends = sorted({r.backend for r in records})
    instances = sorted(k for k, v in by_instance.items() if len(v) == len(backends))

    def score(chosen: tuple[str, ...]) -> Score:
        best = [_best([by_instance[i][b] for b in chosen]) for i in instances]
        return Score(sum(ok for _, ok in best), shifted_geometric_mean(t for t, _ in best))

    groups = [(b,) for b in backends] + [tuple(backends)] + list(itertools.combinations(backends, 2))
    return records[0].time_limit, len(instances), {g: score(g) for g in groups}


def table(run: Path) -> list[str]:
    limit, count, found = scores(run)
    backends = sorted(b for (b, *more) in found if not more)

    def row(label: str, group: tuple[str, ...]) -> str:
        return f"| {label} | {found[group].solved}/{count} | {found[group].sgm:.3f} |"

    lines = [f"### {run.name} ({count} instances, {limit:g} s)", "",
             "| backends | solved | SGM (s) |", "|---|---|---|"]
    lines += [row(b, (b,)) for b in backends]
    lines.append(row("virtual best", tuple(backends)))
    lines += [row(f"{a} + {b}", (a, b)) for a, b in itertools.combinations(backends, 2)]
    return [*lines, ""]


def better(a: Score, b: Score, noise: float) -> bool:
    """Whether ``a`` beats ``b`` beyond noise: more solved, or as many with an SGM more
    than ``noise`` (a ratio) lower."""
    return a.solved > b.solved or (a.solved == b.solved and a.sgm * (1.0 + noise) < b.sgm)


def reordered(order: Sequence[str], found: Mapping[tuple[str, ...], Score], noise: float) -> list[str]:
    """``order`` updated by a run's scores: the best measured pair (most solved, then the
    lowest SGM, then by name) leads if it beats the leading pair beyond ``noise``; the rest keep their
    places unless one beats those ahead of it beyond ``noise`` (backends the run did not
    measure keep theirs; measured ones the order lacks join at the end)."""
    backends = sorted(b for (b, *more) in found if not more)
    pairs = {tuple(sorted(g)): s for g, s in found.items() if len(g) == 2}
    order = [*order, *(b for b in backends if b not in order)]
    lead = tuple(order[:2])
    best = min(pairs, key=lambda g: (-pairs[g].solved, pairs[g].sgm, g))
    current = pairs.get(tuple(sorted(lead)))
    if current is None or better(pairs[best], current, noise):
        lead = tuple(sorted(best, key=lambda b: (-found[(b,)].solved, found[(b,)].sgm)))
    rest = [b for b in order if b not in lead]
    slots = [i for i, b in enumerate(rest) if (b,) in found]
    ranked: list[str] = []
    for b in (rest[i] for i in slots):
        at = len(ranked)
        while at > 0 and better(found[(b,)], found[(ranked[at - 1],)], noise):
            at -= 1
        ranked.insert(at, b)
    for i, b in zip(slots, ranked, strict=True):
        rest[i] = b
    return [*lead, *rest]


def written_orders(data: Mapping, results: Path = RESULTS) -> dict:
    """``data`` (the orders file's content) with each class's order updated from its run."""
    classes = {name: {**spec, "order": reordered(spec["order"], scores(results / spec["run"])[2],
                                                 data["noise"])}
               for name, spec in data["classes"].items()}
    return {**data, "classes": classes}


def main(argv: list[str]) -> None:
    if argv == ["--write-orders"]:
        data = json.loads(ORDERS_FILE.read_text())
        new = written_orders(data)
        ORDERS_FILE.write_text(json.dumps(new, indent=2) + "\n")
        for name, spec in new["classes"].items():
            was = data["classes"][name]["order"]
            change = "" if spec["order"] == was else f" (was {', '.join(was)})"
            print(f"{name}: {', '.join(spec['order'])}{change}")
        return
    found = RESULTS.glob("*/results.jsonl")
    runs = [Path(a) for a in argv] or sorted(p.parent for p in found)
    for run in runs:
        print("\n".join(table(run)))


if __name__ == "__main__":
    main(sys.argv[1:])
