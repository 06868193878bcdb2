"""Which backends to race on the strengthened bias-free stems: each setting solves every
chosen instance of the suite (strengthened, every piece) within the same limit, one solve at a
time, and the table says status, objective, bound, gap and seconds side by side; the parts
table says where the cells sit (the bound stalls in the largest parts).

    python benchmarks/bias_free_stems/race.py OUT --settings z3-defaults,auto \
        --filter 'conv7s2-f64-china-s0,conv7s2-f64-flower-s0,keras-ResNet50-china,keras-DenseNet121-china'

A setting is ``auto``, ``size-rule`` (``auto`` with each part raced as its size says, HiGHS +
CBC below 3,000 rows: the rule before :data:`~smug_opt.strengthen.solve_parts.PART_RACE`),
``z3-defaults`` (``auto`` with z3 at its own settings on the parts: the rule before
:data:`~smug_opt.strengthen.solve_parts.PART_Z3_EXTRAS`), ``unbundled`` (``auto`` with every
part solved alone: the rule before :mod:`smug_opt.strengthen.bundles`), ``no-search`` (``auto``
with HiGHS + z3 on every part: the rule before
:mod:`smug_opt.strengthen.neighbourhood_search`), ``found-cores`` (``auto`` with z3 keeping its
cores as found on every part: the rule before
:data:`~smug_opt.strengthen.solve_parts.SMALL_PART_Z3_EXTRAS`), ``found-window-cores``
(``auto`` with the search's windows solved by z3 keeping its cores as found: the rule before
``core.minimize`` in :data:`~smug_opt.strengthen.neighbourhood_search.WINDOW_Z3_EXTRAS`),
``no-rc2`` (``auto`` with z3 alone beside the search on the large parts: the rule before
:data:`~smug_opt.strengthen.solve_parts.SEARCHED_PARTNERS` held RC2), ``no-z3`` (``auto`` with
RC2 alone beside the search there, and z3 without its core batches: the large parts' z3 option
would otherwise keep them from the search, which races only what takes its extras) or
backends joined by ``+``
(raced: ``highs+z3`` is ``backend="highs,z3"``).
The problems come from the bench cache (built once, as ``smug-opt bench run`` builds them);
each result is one line of ``OUT/results.jsonl`` (a rerun skips what is there); the table of
all of them is printed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path


def _problems(suite: str, names: list[str]) -> dict:
    """The suite's problems by name: from the bench cache where they are built, else built into
    it once, as ``bench run`` does (which builds the whole suite)."""
    from smug_opt.bench.suites import load_suite, suite_dir
    from smug_opt.problem_file import load_problem

    manifest = suite_dir(suite) / "manifest.json"
    built = json.loads(manifest.read_text())["instances"] if manifest.is_file() else {}
    paths = {name: suite_dir(suite) / built[name]["file"] for name in names if name in built}
    if len(paths) < len(names) or not all(path.is_file() for path in paths.values()):
        paths = {i.name: i.problem_path for i in load_suite(suite)}
    return {name: load_problem(paths[name]) for name in names}


def _parts(problem) -> list[dict]:
    from smug_opt.strengthen import strengthen

    parts = strengthen(problem).parts
    return sorted(({"cells": int(p.columns.size), "rows": int(p.problem.num_rows)} for p in parts),
                  key=lambda d: -d["cells"])


def _solve(problem, setting: str, time_limit: float):
    from smug_opt import solve
    from smug_opt.strengthen import bundles, neighbourhood_search, solve_parts

    rule, z3_extras, bundle = solve_parts.part_choice, solve_parts.PART_Z3_EXTRAS, bundles.BUNDLE_WEIGHT
    small_extras, window_extras = solve_parts.SMALL_PART_Z3_EXTRAS, neighbourhood_search.WINDOW_Z3_EXTRAS
    least, partners = neighbourhood_search.MIN_CELLS, solve_parts.SEARCHED_PARTNERS
    if setting in ("no-rc2", "no-z3"):
        solve_parts.SEARCHED_PARTNERS = ("z3",) if setting == "no-rc2" else ("rc2",)
    if setting == "no-z3":
        solve_parts.PART_Z3_EXTRAS = {}
    if setting == "size-rule":
        solve_parts.part_choice = lambda choice: choice
    if setting == "z3-defaults":
        solve_parts.PART_Z3_EXTRAS = {}
    if setting == "unbundled":
        bundles.BUNDLE_WEIGHT = 0
    if setting == "no-search":
        neighbourhood_search.MIN_CELLS = 10**9
    if setting == "found-cores":
        solve_parts.SMALL_PART_Z3_EXTRAS = {}
    if setting == "found-window-cores":
        neighbourhood_search.WINDOW_Z3_EXTRAS = {k: v for k, v in window_extras.items()
                                                 if k != "core.minimize"}
    try:
        rules = ("size-rule", "z3-defaults", "unbundled", "no-search", "found-cores", "found-window-cores",
                 "no-rc2", "no-z3")
        backend = "auto" if setting in rules else setting.replace("+", ",")
        return solve(problem, backend, time_limit=time_limit, strengthen=True)
    finally:
        solve_parts.part_choice, solve_parts.PART_Z3_EXTRAS, bundles.BUNDLE_WEIGHT = rule, z3_extras, bundle
        neighbourhood_search.MIN_CELLS, solve_parts.SEARCHED_PARTNERS = least, partners
        solve_parts.SMALL_PART_Z3_EXTRAS, neighbourhood_search.WINDOW_Z3_EXTRAS = small_extras, window_extras


def _cpu_seconds() -> float:
    """CPU seconds of this process and its workers so far (live ones and reaped ones)."""
    import resource

    import psutil

    own = psutil.Process()
    total = sum(own.cpu_times()[:2])
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    total += reaped.ru_utime + reaped.ru_stime
    for child in own.children(recursive=True):
        try:
            total += sum(child.cpu_times()[:2])
        except psutil.Error:
            continue
    return total


def table(rows: list[dict]) -> str:
    """The results side by side: one line per instance and setting."""
    lines = ["| instance | setting | status | objective | bound | gap | seconds | CPU s | load "
             "| proof | largest parts (cells/rows) |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: r["instance"]):
        gap = "–" if r["gap"] is None else f"{100 * r['gap']:.1f} %"
        objective = "–" if r["objective"] is None else f"{r['objective']:.0f}"
        parts = ", ".join(f"{p['cells']}/{p['rows']}" for p in r["largest_parts"])
        lines.append(f"| {r['instance']} | {r['setting']} | {r['status']} | {objective} "
                     f"| {r['bound']:.0f} | {gap} | {r['seconds']} | {r.get('cpu_seconds', '–')} "
                     f"| {r['load']} | {r.get('proof') or '–'} | {parts} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--settings", default="size-rule,auto")
    ap.add_argument("--filter", required=True, help="instance names, separated by commas")
    ap.add_argument("--suite", default="bias-free-stems")
    ap.add_argument("--time-limit", type=float, default=60.0)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    results = args.out / "results.jsonl"
    done = {(r["instance"], r["setting"]) for r in map(json.loads, results.read_text().splitlines())} \
        if results.exists() else set()
    for name, problem in _problems(args.suite, args.filter.split(",")).items():
        parts = _parts(problem)
        for setting in args.settings.split(","):
            if (name, setting) in done:
                continue
            load = os.getloadavg()[0]
            t, cpu = time.perf_counter(), _cpu_seconds()
            r = _solve(problem, setting, args.time_limit)
            row = {"instance": name, "setting": setting, "status": r.status.name, "objective": r.objective,
                   "bound": r.bound, "gap": r.gap, "seconds": round(time.perf_counter() - t, 1),
                   "cpu_seconds": round(_cpu_seconds() - cpu, 1),
                   "load": round(load, 1), "proof": r.proof.value if r.proof else None,
                   "parts": len(parts), "largest_parts": parts[:3]}
            print(json.dumps(row), flush=True)
            with results.open("a") as f:
                f.write(json.dumps(row) + "\n")
    print(table([json.loads(line) for line in results.read_text().splitlines()]))


if __name__ == "__main__":
    main()
