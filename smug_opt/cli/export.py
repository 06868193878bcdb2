"""``smug-opt export``: write a saved problem as LP, MPS or SMT-LIB2 for outside solvers."""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["add_parser", "run"]


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser("export", help="write a .smug problem as lp, mps or smt2")
    p.add_argument("problem", type=Path, help="a problem file (.smug)")
    p.add_argument("--to", dest="fmt", required=True, choices=("lp", "mps", "smt2"),
                   help="output format")
    p.add_argument("-o", "--output", type=Path, required=True, help="output file")
    return p


def run(args: argparse.Namespace) -> int:
    from smug_opt import load_problem
    from smug_opt.export import export

    problem = load_problem(args.problem)
    export(problem, args.fmt, args.output)
    print(f"wrote {args.output} ({args.fmt}, {problem!r})")
    return 0
