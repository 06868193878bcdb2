"""The ``smug-opt`` command line: one sub-command per module in this package.

Each sub-command module offers ``add_parser(subparsers)`` and ``run(args) -> int`` and
imports its heavy dependencies (solvers, TensorFlow) only inside ``run``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

__all__ = ["build_parser", "main"]

_COMMANDS = ("backends", "solve", "export", "explain", "stress", "bench", "evaluate")


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser, with every sub-command that is installed."""
    from smug_opt import __version__

    parser = argparse.ArgumentParser(
        prog="smug-opt",
        description="Minimal-mask explanations of neural networks (SMUG) on any exact solver.",
    )
    parser.add_argument("--version", action="version", version=f"smug-opt {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _COMMANDS:
        try:
            module = importlib.import_module(f"smug_opt.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"smug_opt.cli.{name}":
                raise
            continue
        sub = module.add_parser(subparsers)
        sub.set_defaults(_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``smug-opt``; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "_run"):
        parser.print_help()
        return 2
    try:
        return int(args._run(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except (ValueError, FileNotFoundError, RuntimeError) as exc:
        print(f"smug-opt {args.command}: error: {exc}", file=sys.stderr)
        return 1
