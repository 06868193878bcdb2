"""Flags several sub-commands share: where the work runs (the executor layer)."""

from __future__ import annotations

import argparse
import zipfile
from pathlib import Path

from smug_opt.executors import EXECUTORS, Executor, check_executor_args, make_executor

__all__ = ["add_executor_options", "check_executor_options", "check_model_arg", "executor_from_args"]

_HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"


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


def check_model_arg(value: str, *, flag: str = "--model") -> None:
    """An embedded model's name, or a readable .keras (zip) / .h5 (HDF5) file: checked
    before TensorFlow loads, so a wrong path or a file that is no model fails at once."""
    from smug_opt.models.zoo import available_models

    embedded = available_models()
    if value in embedded:
        return
    path = Path(value)
    if not path.exists():
        raise FileNotFoundError(f"{flag} {value}: no such file, and not an embedded model "
                                f"({', '.join(embedded)})")
    if path.is_dir():
        raise ValueError(f"{flag} {value} is a folder; give a .keras or .h5 model file")
    suffix = path.suffix.lower()
    if suffix == ".keras" and not zipfile.is_zipfile(path):
        raise ValueError(f"{flag} {value} is not a Keras model file (a .keras file is a zip "
                         "archive written by model.save)")
    if suffix in (".h5", ".hdf5"):
        with open(path, "rb") as f:
            if f.read(8) != _HDF5_SIGNATURE:
                raise ValueError(f"{flag} {value} is not an HDF5 Keras model file")
    if suffix not in (".keras", ".h5", ".hdf5"):
        raise ValueError(f"{flag} {value}: expected a .keras or .h5 file, or an embedded model "
                         f"({', '.join(embedded)})")
