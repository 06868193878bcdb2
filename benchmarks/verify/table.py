"""The verify table: our answers on VNN-COMP 2021's instances beside every tool's published ones.

    python benchmarks/verify/table.py [--shared ../shared/nets] > benchmarks/verify/TABLE.md

Reads the run folders ``benchmarks/verify/<benchmark>/records.jsonl`` written by
``smug-opt verify --instances ... --out benchmarks/verify/<benchmark>`` and the competition's
per-tool csv files (benchmark, net, property, prepare time, result, run time). A published
``holds``/``UNSAT`` is unsat, ``violated``/``SAT`` is sat; anything else is unsolved. An answer
contradicts another when one says unsat and the other sat on the same instance; our sat
answers carry a counterexample confirmed by forward passes (onnxruntime included), so a
published unsat against one of them is wrong.
"""

from __future__ import annotations

import argparse
import csv
import json
from collections import Counter
from pathlib import Path

BENCHMARKS = {"mnistfc": "mnistfc/mnistfc_instances.csv", "verivital": "verivital/verivital_instances.csv"}
WORDS = {"holds": "unsat", "unsat": "unsat", "violated": "sat", "sat": "sat"}


def _key(net: str, prop: str) -> tuple[str, str]:
    return Path(net).name, Path(prop).name.removesuffix(".gz")


def published(results_dir: Path, benchmark: str) -> dict[str, dict[tuple[str, str], str]]:
    out: dict[str, dict[tuple[str, str], str]] = {}
    for path in sorted(results_dir.glob("*.csv")):
        answers: dict[tuple[str, str], str] = {}
        with open(path, newline="") as f:
            for row in csv.reader(f):
                if len(row) >= 5 and row[0] == benchmark:
                    answers[_key(row[1], row[2])] = WORDS.get(row[4].strip().lower(), "-")
        out[path.stem] = answers
    return out


def ours(run: Path) -> dict[tuple[str, str], dict]:
    records = run / "records.jsonl"
    if not records.is_file():
        return {}
    return {_key(r["model"], r["property"]): r
            for r in map(json.loads, records.read_text().splitlines()) if r}


def table(shared: Path) -> str:
    lines = ["# smug-opt verify on VNN-COMP 2021 instances", ""]
    here = Path(__file__).resolve().parent
    for benchmark, csv_name in BENCHMARKS.items():
        with open(shared / "vnncomp2021" / "benchmarks" / csv_name, newline="") as f:
            instances = [_key(r[0], r[1]) for r in csv.reader(f) if r]
        tools = published(shared / "vnncomp2021_results", benchmark)
        mine = ours(here / benchmark)
        run = [k for k in instances if k in mine]
        count = Counter(mine[k]["answer"] for k in run)
        lines += [f"## {benchmark} ({len(instances)} instances; {len(run)} run here)", ""]
        lines += ["| tool | solved | unsat | sat | unsat against a confirmed sat of ours | against the "
                  "majority of the others | solved of the instances run here |",
                  "|---|---:|---:|---:|---:|---:|---:|"]
        our_sat = {k for k in run if mine[k]["answer"] == "sat"}
        our_unsat = {k for k in run if mine[k]["answer"] == "unsat"}
        solved_here = count["unsat"] + count["sat"]
        ours_answers = {k: mine[k]["answer"] for k in run}
        everyone = {**tools, "smug-opt": ours_answers}
        lines.append(f"| **smug-opt** | **{solved_here}** | {count['unsat']} | {count['sat']} | - | "
                     f"{_against_majority('smug-opt', everyone, instances)} | {solved_here}/{len(run)} |")
        conflicts: list[str] = []
        by_solved = sorted(tools.items(), key=lambda t: -sum(v in ("sat", "unsat") for v in t[1].values()))
        for tool, answers in by_solved:
            vals = [answers.get(k, "-") for k in instances]
            wrong = sum(answers.get(k) == "unsat" for k in our_sat)
            on_run = sum(answers.get(k, "-") in ("sat", "unsat") for k in run)
            lines.append(f"| {tool} | {vals.count('unsat') + vals.count('sat')} | {vals.count('unsat')} | "
                         f"{vals.count('sat')} | {wrong} | {_against_majority(tool, everyone, instances)} | "
                         f"{on_run}/{len(run)} |")
            conflicts += [f"{tool} says sat on {k[0]} {k[1]} where we proved unsat "
                          f"(published unsat there: {sum(t.get(k) == 'unsat' for t in tools.values())}, "
                          f"sat: {sum(t.get(k) == 'sat' for t in tools.values())})"
                          for k in sorted(our_unsat) if answers.get(k) == "sat"]
        best = sum(any(t.get(k) in ("sat", "unsat") for t in tools.values()) for k in instances)
        lines += ["", "Published counts include answers the competition judged wrong; the csv files do "
                      "not mark them, so the last columns count answers against our confirmed "
                      "counterexamples and against the majority.", "",
                  f"Virtual best of the published tools: {best}/{len(instances)}. "
                      f"Our answers by how they were reached: "
                      + ", ".join(f"{how} {n}" for how, n in sorted(Counter(
                          _how(mine[k]) for k in run).items())) + ".", ""]
        lines += [_reach(tools, everyone, instances, ours_answers), ""]
        unknown = [k for k in run if mine[k]["answer"] == "unknown"]
        if unknown:
            lines += [*_unknown_by_group(unknown, tools, everyone, instances), ""]
        cost = _cost([mine[k] for k in run])
        if cost:
            lines += [cost, ""]
        retried = _retried(here / benchmark)
        if retried:
            lines += [f"Run again (`--retry-unknown`), the last record counting: {', '.join(retried)}.", ""]
        missing = [f"{k[0].removesuffix('.onnx').removeprefix('mnist-net_')} {k[1]}" for k in instances
                   if k not in mine]
        if missing:
            lines += [f"Not run ({len(missing)}): {', '.join(missing)}.", ""]
        if conflicts:
            lines += ["Contradictions with our unsat answers (to investigate):", ""]
            lines += [f"- {c}" for c in conflicts] + [""]
        else:
            lines += ["No published sat contradicts an unsat of ours.", ""]
    return "\n".join(lines)


def _trusted(tools: dict[str, dict], everyone: dict[str, dict], instances: list) -> list[str]:
    """The published tools none of whose answers goes against the majority of the others."""
    return [tool for tool in tools if _against_majority(tool, everyone, instances) == 0]


def _reach(tools: dict[str, dict], everyone: dict[str, dict], instances: list, answers: dict) -> str:
    """How many instances anyone decided: every published tool, those no majority
    contradicts, and those with ours."""
    trusted = _trusted(tools, everyone, instances)
    decided = lambda k, names: any(tools[t].get(k) in ("sat", "unsat") for t in names)  # noqa: E731
    by_trusted = sum(decided(k, trusted) for k in instances)
    with_ours = sum(decided(k, trusted) or answers.get(k) in ("sat", "unsat") for k in instances)
    left_out = sorted(set(tools) - set(trusted))
    return (f"Decided by a published tool that no majority contradicts (all but {', '.join(left_out)}): "
            f"{by_trusted}/{len(instances)}; with ours: {with_ours}/{len(instances)} (a run solves more "
            f"only by deciding instances none of them decided).")


def _unknown_by_group(unknown: list, tools: dict[str, dict], everyone: dict[str, dict],
                      instances: list) -> list[str]:
    """Our unknowns per network and the property name's last field (mnistfc: ε), each
    marked with what the trusted tools published (``*``: unsat by some; ``!``: sat)."""
    trusted = _trusted(tools, everyone, instances)
    groups: dict[str, list[str]] = {}
    for net, prop in unknown:
        said = {tools[t].get((net, prop)) for t in trusted}
        mark = "!" if "sat" in said else "*" if "unsat" in said else ""
        stem = prop.removesuffix(".vnnlib")
        group = f"{net.removesuffix('.onnx').removeprefix('mnist-net_')} {stem.rsplit('_', 1)[-1]}"
        groups.setdefault(group, []).append(stem.rsplit("_", 1)[0].removeprefix("prop_") + mark)
    lines = [f"Unknown here, by network and property suffix ({len(unknown)}; `*`: unsat for a trusted "
             f"tool, `!`: sat for one, unmarked: decided by none of them):", ""]
    lines += [f"- {g}: {len(props)}: {', '.join(props)}" for g, props in sorted(groups.items())]
    return lines


def _cost(records: list[dict]) -> str:
    """The wall and CPU seconds of the records that carry them (with the load at their start):
    on a shared machine the CPU seconds say what the answers cost apart from the load."""
    timed = [r for r in records if "cpu_seconds" in r]
    if not timed:
        return ""
    low, high = min(r["load"] for r in timed), max(r["load"] for r in timed)
    loads = f"{low:.1f}" if low == high else f"{low:.1f}-{high:.1f}"
    wall = sum(r["wall_seconds"] for r in timed)
    return (f"Answers with their cost in the record: {len(timed)}, {wall:.0f} s wall, "
            f"{sum(r['cpu_seconds'] for r in timed):.0f} CPU seconds, load {loads} at the start "
            f"(the others were run before the records held it).")


def _retried(run: Path) -> list[str]:
    """The instances with several records, each with its answers in order."""
    records = run / "records.jsonl"
    if not records.is_file():
        return []
    answers: dict[str, list[str]] = {}
    for r in map(json.loads, records.read_text().splitlines()):
        answers.setdefault(f"{r['model'].removesuffix('.onnx')} {r['property']}", []).append(r["answer"])
    return [f"{name} ({' then '.join(a)})" for name, a in answers.items() if len(a) > 1]


def _against_majority(tool: str, everyone: dict[str, dict], instances: list) -> int:
    """Answers of ``tool`` opposite to the strict majority of the other tools that answered,
    when at least two of them did (a lone opposite answer is no majority)."""
    count = 0
    for k in instances:
        mine = everyone[tool].get(k)
        if mine not in ("sat", "unsat"):
            continue
        others = Counter(t.get(k) for name, t in everyone.items() if name != tool)
        opposite = others["sat" if mine == "unsat" else "unsat"]
        if opposite >= 2 and opposite > others[mine]:
            count += 1
    return count


def _how(record: dict) -> str:
    if record["answer"] == "unsat":
        by = set(record.get("decided_by", []))
        if by == {"bounds"}:
            return "unsat by bounds alone"
        if by <= {"bounds", "bab"}:
            return "unsat by bounds and branch and bound"
        return f"unsat with solves (proof {record.get('proof')})"
    if record["answer"] == "sat":
        by = record.get("decided_by", [])
        return ("sat by the attack" if "attack" in by else
                "sat by branch and bound" if "bab" in by else "sat by a solve")
    return record["answer"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = Path(__file__).resolve().parents[3] / "shared" / "nets"  # <repo>/../shared/nets
    parser.add_argument("--shared", type=Path, default=default)
    print(table(parser.parse_args().shared))


if __name__ == "__main__":
    main()
