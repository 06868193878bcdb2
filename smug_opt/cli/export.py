"""``smug-opt export``: write a saved problem as LP, MPS or SMT-LIB2 for outside solvers."""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["add_parser", "run"]

_DESCRIPTION = """\
Write a .smug problem for an outside solver.

lp, mps: faithful MILP files. Every coefficient, right-hand side, bound and cost is
written as in the problem (shortest round-trip decimal, unscaled, nothing dropped). The
one deliberate change: LP and MPS have no strict relations, so at --level L >= 1 a strict
row a.x > b is written a.x >= b + d (a.x < b as a.x <= b - d) with the margin
d = strict_margin(L, |a|_1/|a|_inf) * |a|_inf, i.e. 1e-6 * (1 + |a|_1/(10 |a|_inf)) * |a|_inf
at level 1 and ten times more per level (at least one ulp of b), above MILP solvers'
default feasibility tolerances (1e-6), so the solutions they return satisfy the strict
rows exactly. --level 0 writes strict rows as non-strict (a
relaxation: its optimum is a lower bound). ReLUs become big-M rows with phase binaries.
The file's header comment repeats the margin used.

smt2: exact (every float as its exact rational, strict rows strict). --dialect z3 (default)
minimises the objective with z3's (minimize ...) extension; --dialect standard is plain
SMT-LIB 2.6 for any solver (cvc5, z3, ...): sat iff a solution with objective <= --bound K
exists (without --bound: iff any solution exists).
"""


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    from smug_opt.export import DEFAULT_LEVEL, FORMATS
    from smug_opt.export_smt import DIALECTS

    p = subparsers.add_parser("export", help="write a .smug problem as lp, mps or smt2",
                              description=_DESCRIPTION,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("problem", type=Path, help="a problem file (.smug)")
    p.add_argument("--to", dest="fmt", required=True, choices=FORMATS, help="output format")
    p.add_argument("--out", "-o", "--output", dest="output", type=Path, required=True,
                   help="output file (-o/--output: older spellings of --out)")
    p.add_argument("--level", type=int, default=None,
                   help=f"lp/mps: strict-row margin level (default {DEFAULT_LEVEL}; 0: no margin, a "
                        "relaxation)")
    p.add_argument("--dialect", choices=DIALECTS, default=None,
                   help="smt2: 'z3' (minimize; default) or 'standard' (any SMT-LIB2 solver)")
    p.add_argument("--bound", type=float, default=None, metavar="K",
                   help="smt2 --dialect standard: ask for a solution with objective <= K")
    return p


def run(args: argparse.Namespace) -> int:
    from smug_opt import load_problem
    from smug_opt.export import DEFAULT_LEVEL, export
    from smug_opt.outputs import check_out_file

    if args.fmt == "smt2" and args.level is not None:
        raise ValueError("--level applies to lp and mps; smt2 is exact (strict rows stay strict)")
    if args.fmt != "smt2" and (args.dialect is not None or args.bound is not None):
        raise ValueError("--dialect and --bound apply to --to smt2")
    if args.bound is not None and args.dialect != "standard":
        raise ValueError("--bound needs --dialect standard (the z3 dialect minimises)")
    check_out_file(args.output)
    problem = load_problem(args.problem)
    export(problem, args.fmt, args.output, level=DEFAULT_LEVEL if args.level is None else args.level,
           dialect=args.dialect or "z3", bound=args.bound)
    if args.fmt == "smt2":
        detail = f"dialect {args.dialect or 'z3'}" + (
            "" if args.bound is None else f", objective <= {args.bound!r}")
    else:
        detail = f"level {DEFAULT_LEVEL if args.level is None else args.level}"
    print(f"wrote {args.output} ({args.fmt}, {detail}, {problem!r})")
    return 0
