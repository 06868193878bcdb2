"""The ``smug-opt`` command line: one sub-command per module in this package.

Each sub-command module offers ``add_parser(subparsers)`` and ``run(args) -> int`` and
imports its heavy dependencies (solvers, TensorFlow) only inside ``run``.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import signal
import sys
from collections.abc import Sequence

from smug_opt.console import one_line_warnings, results_only_stdout
from smug_opt.errors import ParameterError
from smug_opt.interrupt import TerminationState, signals_interrupt
from smug_opt.spawn import end_descendants

__all__ = ["EXIT_ERROR", "EXIT_INTERRUPTED", "EXIT_NO_ANSWER", "EXIT_OK", "build_parser", "flag_for", "main"]

EXIT_OK = 0
"""The command did what was asked (a solve: a verified answer, OPTIMAL or FEASIBLE)."""
EXIT_ERROR = 1
"""Bad input (the message names the flag or file), or a wrong answer caught by a check.
Usage errors (an unknown flag) keep argparse's own exit code, 2."""
EXIT_NO_ANSWER = 3
"""The work ran but gave no answer: INFEASIBLE (proven), NO_SOLUTION (limit hit), solver ERROR;
a batch where some input ended without a mask."""
EXIT_INTERRUPTED = 130
"""Interrupted (Ctrl-C); resumable commands keep what finished. SIGTERM and SIGHUP end a
command the same way, with exit code 143 and 129 (128 + the signal's number)."""

_COMMANDS = ("backends", "solve", "export", "explain", "stress", "bench", "evaluate", "inspect", "verify",
             "check_certificate")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The full argument parser, with every sub-command that is installed (``only``, a
    sub-command's name: with that one alone, so the others' modules are not imported:
    ``check-certificate`` starts in ~1 s of CPU less)."""
    from smug_opt import __version__

    parser = argparse.ArgumentParser(
        prog="smug-opt",
        description="Minimal-mask explanations of neural networks (SMUG) on any exact solver.",
    )
    parser.add_argument("--version", action="version", version=f"smug-opt {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _COMMANDS:
        if only is not None and name != only.replace("-", "_"):
            continue
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
    words = sys.argv[1:] if argv is None else list(argv)
    # a command line naming its sub-command as it is spelled parses the same with that one
    # alone; any other (a typo, `check_certificate`) gets every command in its usage error
    named = words[0] if words and words[0] in (name.replace("_", "-") for name in _COMMANDS) else None
    parser = build_parser(only=named)
    args = parser.parse_args(words)
    if not hasattr(args, "_run"):
        parser.print_help()
        return 2
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    one_line_warnings()
    state = TerminationState()
    try:
        with results_only_stdout(), signals_interrupt() as state:
            code = int(args._run(args) or 0)
        return state.exit_code or code  # a command that handled the signal itself
    except KeyboardInterrupt:
        end_descendants()  # busy solver workers and pool processes: at once, not at exit
        signame = "" if state.signum is None else f" ({signal.Signals(state.signum).name})"
        print(f"interrupted{signame}", file=sys.stderr)
        return state.exit_code or EXIT_INTERRUPTED
    except ParameterError as exc:  # the library's name for it, shown as the flag a user typed
        print(f"smug-opt {args.command}: error: {exc.named(flag_for(exc.parameter))}", file=sys.stderr)
        return EXIT_ERROR
    except (ValueError, FileNotFoundError, NotADirectoryError, IsADirectoryError, RuntimeError) as exc:
        print(f"smug-opt {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except OSError as exc:  # a full disk, a folder one may not write: the file and the reason
        where = f" {exc.filename}" if exc.filename else ""
        hint = "; free some space or write elsewhere" if exc.errno == errno.ENOSPC else ""
        print(f"smug-opt {args.command}: error: cannot read or write{where}: {exc.strerror or exc}"
              f"{hint}", file=sys.stderr)
        return EXIT_ERROR


_FLAGS = {"relative_gap": "--gap", "memory_limit_mb": "--memory-limit", "mlp_layers": "--model (its layers)",
          "grid_shape": "--grid"}
"""The flags whose names are not the parameter's with dashes."""


def flag_for(parameter: str) -> str:
    """The command-line flag that sets the library's ``parameter`` (``time_limit``: ``--time-limit``)."""
    return _FLAGS.get(parameter, "--" + parameter.replace("_", "-"))
