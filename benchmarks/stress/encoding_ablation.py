"""What each encoding step of the stress case buys: the whole 784-32-10 network, HiGHS in
process (one thread, level 0, no start), the first ``--n`` held-out digits, each encoding
step switched on in turn.

    python benchmarks/stress/encoding_ablation.py [--n 10] [--time-limit 60] [--model mnist-mlp]

Prints a markdown table: solved (HiGHS proved optimality and the mask passed the exact
check), median / max solve seconds, branch-and-bound nodes and simplex iterations summed
over the digits, mean unstable neurons, median encoding seconds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np
from smug_opt_backends.highs_backend import HighsBackend

from smug_opt.backend import SolveOptions, Status
from smug_opt.console import results_only_stdout
from smug_opt.data.mnist import pick_test_digits
from smug_opt.encode.full_network import full_network
from smug_opt.models import zoo
from smug_opt.models.mlp import as_mlp
from smug_opt.verification import verify

# (label, bounds, max_cells, strengthen): each row adds one step to the one before,
# except the second, which is the LP bounds alone.
STEPS = (
    ("interval bounds only", "interval", None, False),
    ("LP bounds only", "lp", None, False),
    ("interval + greedy size cut-off `Σ M <= K`", "interval", "greedy", False),
    ("+ ReLU upper cuts (`strengthen`)", "interval", "greedy", True),
    ("+ LP bounds (the default)", "lp", "greedy", True),
)


def _solve(problem, time_limit: float) -> dict:
    backend = HighsBackend()
    options = SolveOptions(time_limit=time_limit, threads=1)
    began = time.perf_counter()
    model = backend.lower(problem, options, 0)
    raw = backend.optimize(model, problem, options, lambda x, value: None)
    seconds = time.perf_counter() - began
    info = model[0].getInfo()
    solved = raw.status is Status.OPTIMAL and raw.x is not None and verify(problem, raw.x).ok
    return {"solved": solved, "seconds": seconds, "nodes": int(info.mip_node_count),
            "iterations": int(info.simplex_iteration_count)}


def main() -> None:
    with results_only_stdout():  # HiGHS's banner goes to stderr, the table alone to stdout
        _run()


def _run() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=10, help="held-out digits (default 10)")
    parser.add_argument("--time-limit", type=float, default=60.0, help="seconds per solve (default 60)")
    parser.add_argument("--model", default="mnist-mlp", help="zoo MLP (default mnist-mlp)")
    args = parser.parse_args()
    mlp = as_mlp(zoo.load(args.model, progress=False), args.model)
    indices, images, _ = pick_test_digits(args.n)
    print(f"{args.model}, {args.n} digits (test indices {indices.tolist()}), HiGHS 1 thread, "
          f"{args.time_limit:g} s; load average {os.getloadavg()[0]:.1f} at the start\n")
    print("| encoding | solved | median s | max s | B&B nodes (sum) | LP iterations (sum) "
          "| unstable neurons (mean) | encode s (median) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for label, bounds, max_cells, strengthen in STEPS:
        runs, encode, unstable = [], [], []
        for image in images:
            began = time.perf_counter()
            problem = full_network(mlp, image, bounds=bounds, max_cells=max_cells, strengthen=strengthen)
            encode.append(time.perf_counter() - began)
            unstable.append(problem.metadata["unstable"])
            runs.append(_solve(problem, args.time_limit))
        seconds = [r["seconds"] for r in runs]
        solved = sum(r["solved"] for r in runs)
        nodes, iterations = sum(r["nodes"] for r in runs), sum(r["iterations"] for r in runs)
        print(f"| {label} | {solved}/{len(runs)} | {statistics.median(seconds):.2f} | {max(seconds):.1f} "
              f"| {nodes:,} | {iterations:,} | {np.mean(unstable):.1f} | {statistics.median(encode):.2f} |",
              flush=True)
    print(f"\nload average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
