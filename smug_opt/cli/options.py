"""Flags several sub-commands share: where the work runs, and what a model file does not say."""

from __future__ import annotations

import argparse

from smug_opt.executors import EXECUTORS, Executor, ExecutorKind, check_executor_args, make_executor

__all__ = ["add_executor_options", "add_model_input_options", "check_executor_options", "check_model_arg",
           "executor_from_args", "input_range_arg", "input_shape_arg"]


def add_executor_options(p: argparse.ArgumentParser, *, what: str) -> None:
    """``--workers N --executor local|dask --scheduler ADDR`` (``what``: the unit of work)."""
    g = p.add_argument_group("where it runs (the same flags for explain, evaluate and bench run)")
    g.add_argument("--workers", type=int, default=1,
                   help=f"{what} at once on this machine (default 1: in this process, the "
                        "cleanest timings)")
    g.add_argument("--executor", type=_executor_kind, choices=EXECUTORS, default=ExecutorKind.LOCAL,
                   help="local worker processes (default) or a Dask distributed cluster")
    g.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="Dask scheduler address for --executor dask (e.g. tcp://host:8786)")


def _executor_kind(text: str) -> ExecutorKind | str:
    """``--executor``'s value as an :class:`ExecutorKind` (an unknown one is left to
    argparse's choices, which name the known ones)."""
    return ExecutorKind(text) if text in EXECUTORS else text


def check_executor_options(args: argparse.Namespace) -> None:
    """Reject a bad combination of the executor flags (before any model or solver loads)."""
    check_executor_args(args.executor, args.workers, args.scheduler)


def executor_from_args(args: argparse.Namespace) -> Executor:
    """The executor the flags describe (a context manager: close it when done)."""
    return make_executor(args.executor, workers=args.workers, scheduler=args.scheduler)


def check_model_arg(value: str, *, flag: str = "--model") -> None:
    """A model spec (embedded name, .keras/.h5/.onnx/.pt2 file, package.module:factory),
    checked before any framework loads, so a wrong path or a file that is no model fails
    at once."""
    from smug_opt.models.resolve import check_model_spec

    check_model_spec(value, flag=flag)


def add_model_input_options(group: argparse._ArgumentGroup) -> None:
    """``--input-shape``, ``--input-layout`` and ``--input-range``: what an ONNX or PyTorch
    model does not say."""
    from smug_opt.models.resolve import INPUT_LAYOUTS

    group.add_argument("--input-shape", metavar="D1,D2,...",
                       help="per-example input shape of a package.module:factory PyTorch module "
                            "without an input_shape attribute, e.g. 1,28,28")
    group.add_argument("--input-layout", choices=INPUT_LAYOUTS,
                       help="layout of an ONNX/PyTorch model's 3-D image input where the file does "
                            "not say it (default: its first Conv's, else guessed from the shape)")
    group.add_argument("--input-range", metavar="LO,HI",
                       help="the model's valid input range, e.g. 0,1; image pixels 0-255 then map "
                            "linearly onto it (instead of --preprocess/--pixel-scale)")


def input_shape_arg(text: str | None) -> tuple[int, ...] | None:
    """``--input-shape D1,D2,...`` parsed (None when not given)."""
    if text is None:
        return None
    try:
        shape = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise ValueError(f"--input-shape expects sizes like 1,28,28, got {text!r}") from None
    if min(shape) < 1:
        raise ValueError(f"--input-shape sizes must be positive, got {text!r}")
    return shape


def input_range_arg(text: str | None) -> tuple[float, float] | None:
    """``--input-range LO,HI`` parsed (None when not given)."""
    if text is None:
        return None
    try:
        lo, hi = (float(v) for v in text.split(","))
    except ValueError:
        raise ValueError(f"--input-range expects LO,HI (e.g. 0,1), got {text!r}") from None
    if not lo < hi:
        raise ValueError(f"--input-range needs LO < HI, got {text!r}")
    return lo, hi
