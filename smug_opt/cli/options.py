"""Flags several sub-commands share: where the work runs (the executor layer)."""

from __future__ import annotations

import argparse

from smug_opt.executors import EXECUTORS, Executor, check_executor_args, make_executor

__all__ = ["add_executor_options", "check_executor_options", "executor_from_args"]


def add_executor_options(p: argparse.ArgumentParser, *, what: str) -> None:
    """``--workers N --executor local|dask --scheduler ADDR`` (``what``: the unit of work)."""
    g = p.add_argument_group("where it runs (the same flags for explain, evaluate and bench run)")
    g.add_argument("--workers", type=int, default=1,
                   help=f"{what} at once on this machine (default 1: in this process, the "
                        "cleanest timings)")
    g.add_argument("--executor", choices=EXECUTORS, default="local",
                   help="local worker processes (default) or a Dask distributed cluster")
    g.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="Dask scheduler address for --executor dask (e.g. tcp://host:8786)")


def check_executor_options(args: argparse.Namespace) -> None:
    """Reject a bad combination of the executor flags (before any model or solver loads)."""
    check_executor_args(args.executor, args.workers, args.scheduler)


def executor_from_args(args: argparse.Namespace) -> Executor:
    """The executor the flags describe (a context manager: close it when done)."""
    return make_executor(args.executor, workers=args.workers, scheduler=args.scheduler)
