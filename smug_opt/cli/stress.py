"""``smug-opt stress mnist``: whole-network minimal masks on held-out digits, per backend."""

from __future__ import annotations

import argparse

from smug_opt.stress import Z3_ENCODINGS

__all__ = ["add_parser", "run"]


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "stress", help="the paper's stress case: minimal masks through the whole network",
        description="Encode the whole MLP for held-out digits, solve on each backend, check every "
                    "mask exactly and in the model, and write results.jsonl, table.md and table.json.")
    p.add_argument("suite", choices=["mnist"], help="the instance suite")
    p.add_argument("--n", type=int, default=100,
                   help="number of held-out digits (default 100): the first N of the seed's fixed "
                        "order, so a larger N in the same --out keeps and extends a smaller run")
    p.add_argument("--backend", "--backends", dest="backends", default="highs",
                   help="backend names separated by commas (default highs; see `smug-opt backends`)")
    p.add_argument("--time-limit", type=float, default=600.0,
                   help="seconds per solve (default 600: the whole network is a much harder problem "
                        "than explain's first layer, whose default is 60)")
    p.add_argument("--out", default="stress", help="output directory (default ./stress)")
    p.add_argument("--bounds", choices=["lp", "interval", "none"], default="lp",
                   help="pre-activation bounds: interval then LP (default), interval, or none")
    p.add_argument("--model", default="mnist-mlp",
                   help="mnist-mlp (784-32-10, default), mnist-mlp-deep (784-64-64-10) or a .keras file")
    p.add_argument("--cell", type=int, default=1, help="mask cell size in pixels (default 1)")
    p.add_argument("--seed", type=int, default=0, help="seed of the digit draw (default 0)")
    p.add_argument("--z3-encoding", choices=Z3_ENCODINGS, default="paper",
                   help="z3 backend formulation (default paper: the reference encoding)")
    p.add_argument("--no-resume", action="store_true", help="rerun everything, replacing results.jsonl")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def _check_args(args: argparse.Namespace) -> None:
    """Reject bad flags before any model loads."""
    from smug_opt.backend_choice import BackendChoice
    from smug_opt.cli.options import check_model_arg
    from smug_opt.outputs import check_out_dir

    for bad, message in [
        (args.n < 1, f"--n must be at least 1, got {args.n}"),
        (not args.time_limit > 0, f"--time-limit must be positive, got {args.time_limit:g}"),
        (args.cell < 1, f"--cell must be at least 1, got {args.cell}"),
    ]:
        if bad:
            raise ValueError(message)
    names = [b.strip() for b in args.backends.split(",") if b.strip()]
    if not names:
        raise ValueError("--backend: give at least one backend name")
    for name in names:
        BackendChoice.parse(name)  # 'auto' (the racing portfolio) runs as one pseudo-backend
    check_model_arg(args.model)
    check_out_dir(args.out)


def run(args: argparse.Namespace) -> int:
    _check_args(args)
    from smug_opt.stress import run_stress, stress_markdown

    table = run_stress(
        n=args.n, backends=args.backends.split(","), time_limit=args.time_limit, out_dir=args.out,
        model=args.model, seed=args.seed, bounds=args.bounds, resume=not args.no_resume,
        progress=not args.quiet, z3_encoding=args.z3_encoding, cell=args.cell,
    )
    print(stress_markdown(table))
    wrong = sum(row["wrong_masks"] for row in table["backends"].values())
    return 1 if wrong else 0
