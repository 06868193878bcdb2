"""``smug-opt backends``: the installed backends, their solvers and what they support."""

from __future__ import annotations

import argparse
import json
import warnings

from smug_opt.registry import BackendInfo

__all__ = ["add_parser", "run"]


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser("backends", help="list installed backends and whether they are usable")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    return p


def _supports(info: BackendInfo) -> str:
    caps = info.capabilities
    if caps is None:
        return "-"
    flags = [("strict", caps.strict_inequalities), ("relu", caps.relu),
             ("incumbents", caps.incumbents), ("exact", caps.exact), ("lp", caps.lp),
             ("binary-only", caps.binary_only)]
    return ",".join(name for name, on in flags if on) or "-"


def run(args: argparse.Namespace) -> int:
    from smug_opt.registry import backend_infos

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # load failures are shown in the table
        infos = backend_infos()
    if args.json:
        print(json.dumps([{
            "name": i.name, "usable": i.usable, "reason": i.reason, "solver": i.solver,
            "supports": _supports(i), "target": i.target, "distribution": i.distribution,
            "description": i.description,
        } for i in infos], indent=2))
        return 0
    rows = [("backend", "usable", "solver", "native support", "notes")]
    for i in infos:
        rows.append((i.name, "yes" if i.usable else "no", i.solver or "-", _supports(i),
                     i.description if i.usable else (i.reason or "")))
    widths = [max(len(r[c]) for r in rows) for c in range(4)]
    for r in rows:
        print("  ".join(r[c].ljust(widths[c]) for c in range(4)) + "  " + r[4])
    return 0 if any(i.usable for i in infos) else 1
