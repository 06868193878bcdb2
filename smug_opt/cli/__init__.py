"""The ``smug-opt`` command line: one sub-command per module in this package.

Each sub-command module offers ``add_parser(subparsers)`` and ``run(args) -> int`` and
imports its heavy dependencies (solvers, TensorFlow) only inside ``run``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import sys
from collections.abc import Sequence

from smug_opt.console import one_line_warnings, results_only_stdout

__all__ = ["EXIT_ERROR", "EXIT_INTERRUPTED", "EXIT_NO_ANSWER", "EXIT_OK", "build_parser", "flag_names",
           "main"]

EXIT_OK = 0
"""The command did what was asked (a solve: a verified answer, OPTIMAL or FEASIBLE)."""
EXIT_ERROR = 1
"""Bad arguments or input (the message names the flag), or a wrong answer caught by a check."""
EXIT_NO_ANSWER = 3
"""The work ran but gave no answer: INFEASIBLE (proven), NO_SOLUTION (limit hit), solver ERROR."""
EXIT_INTERRUPTED = 130
"""Interrupted (Ctrl-C); resumable commands keep what finished."""

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
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    one_line_warnings()
    try:
        with results_only_stdout():
            return int(args._run(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except (ValueError, FileNotFoundError, NotADirectoryError, IsADirectoryError, RuntimeError) as exc:
        print(f"smug-opt {args.command}: error: {flag_names(str(exc))}", file=sys.stderr)
        return EXIT_ERROR


_FLAG_NAMES = {"time_limit": "--time-limit", "relative_gap": "--gap", "memory_limit": "--memory-limit",
               "mlp_layers": "--model (its layers)", "grid_shape": "--grid", "pixel_scale": "--pixel-scale"}


def flag_names(message: str) -> str:
    """``message`` with the Python argument names a user never typed replaced by their flags."""
    for name, flag in _FLAG_NAMES.items():
        message = re.sub(rf"(?<![-\w]){name}(?!\w)", flag, message)
    return re.sub(r"^(target|k|gamma|cell|steps) (must|is|should)\b", r"--\1 \2", message)
