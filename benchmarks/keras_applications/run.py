"""SMUG at the paper's scale on the keras.applications architectures (weights=None).

One architecture per process (``--arch``), appending one JSON record to ``--out``: per-stage
times and peak memory of ``smug_opt.explain`` (224×224×3, k = 3000, 4×4 cells, 60 s solve
limit, HiGHS) and, in the same process, a plain ``tf.GradientTape`` IG (compiled once) over the same
66 points (64 path points, ``h`` and 0) in the same batches, for the IG time ratio: run
alternately with smug-opt's (plain, smug-opt, plain, explain), the ratio of the fastest of
each. Memory
is the resident set of this process plus its children (the solver runs in a worker
process), sampled every 20 ms; a run whose total passes ``--max-gb`` is stopped and
recorded as such. ``--table`` renders the records as markdown.

    nice -n 10 python benchmarks/keras_applications/run.py --arch ResNet50 --out results.jsonl
    python benchmarks/keras_applications/run.py --table results.jsonl > table.md
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import sys
import threading
import time
from pathlib import Path

import numpy as np

ARCHITECTURES = {  # name → keras.applications preprocess_input mode
    "VGG16": "caffe", "ResNet50": "caffe", "MobileNetV2": "tf", "InceptionV3": "tf",
    "DenseNet121": "torch", "EfficientNetB0": "raw", "ConvNeXtTiny": "raw",
}


class MemorySampler(threading.Thread):
    """RSS of this process and its children every 20 ms; stops the run past a limit."""

    def __init__(self, limit_bytes: float, on_limit) -> None:
        super().__init__(daemon=True)
        import psutil

        self.process = psutil.Process()
        self.samples: list[tuple[float, int]] = []
        self.limit = limit_bytes
        self.on_limit = on_limit
        self.running = True

    def rss(self) -> int:
        total = self.process.memory_info().rss
        for child in self.process.children(recursive=True):
            with contextlib.suppress(Exception):  # the child ended meanwhile
                total += child.memory_info().rss
        return total

    def run(self) -> None:
        while self.running:
            value = self.rss()
            self.samples.append((time.perf_counter(), value))
            if value > self.limit:
                self.on_limit(value)
            time.sleep(0.02)

    def peak(self, start: float, end: float) -> int:
        inside = [v for t, v in self.samples if start <= t <= end]
        return max(inside, default=0)


def plain_tape(head, h: np.ndarray, target: int):
    """A plain ``tf.GradientTape`` gradient of the target score, compiled once with
    ``tf.function`` as smug-opt's is.

    Compiled, not eager: eagerly, Keras re-creates and XLA-recompiles every grouped
    convolution on each call on CPU (ConvNeXt's 18), which grew an eager tape's process
    past 3 GB on ConvNeXtTiny; and a compiled tape is the stricter baseline."""
    import tensorflow as tf

    @tf.function(input_signature=[tf.TensorSpec((None, *h.shape), tf.float32)])
    def gradients(path: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            tape.watch(path)
            score = head(path)[:, target]
        return tape.gradient(score, path)

    return gradients


def plain_tape_ig(gradients, h: np.ndarray, steps: int, batch: int) -> tuple[float, np.ndarray]:
    """IG with :func:`plain_tape`'s ``gradients`` over the same points and batches as
    smug-opt's (its trace included in the time of the first call)."""
    import tensorflow as tf

    start = time.perf_counter()
    points = np.concatenate([(np.arange(steps) + 0.5) / steps, [1.0, 0.0]])
    total = np.zeros_like(h)
    for i in range(0, points.size, batch):
        alphas = points[i : i + batch]
        path = tf.constant((alphas.reshape(-1, *[1] * h.ndim) * h).astype(np.float32))
        grads = gradients(path).numpy().astype(np.float64)
        total += grads[: max(0, min(alphas.size, steps - i))].sum(axis=0)
    return time.perf_counter() - start, h * total / steps


def run(arch: str, out: Path, max_gb: float, k: int, cell: int, time_limit: float,
        ig_batch: int | None = None) -> dict:
    import sklearn

    from smug_opt.explanation import explain
    from smug_opt.inputs import load_input
    from smug_opt.models._keras import import_keras
    from smug_opt.models.integrated_gradients import integrated_gradients
    from smug_opt.models.keras_adapter import KerasAdapter
    from smug_opt.models.keras_memory import head_footprint

    record: dict = {"arch": arch, "k": k, "cell": cell, "time_limit": time_limit, "status": "started",
                    "load_start": os.getloadavg()}

    def stop(value: int) -> None:
        record["status"] = f"STOPPED: {value / 2**30:.2f} GB > {max_gb} GB"
        with out.open("a") as f:
            f.write(json.dumps(record) + "\n")
        os._exit(3)

    sampler = MemorySampler(max_gb * 2**30, stop)
    sampler.start()
    keras = import_keras()
    keras.utils.set_random_seed(0)
    t = time.perf_counter()
    model = getattr(keras.applications, arch)(weights=None, input_shape=(224, 224, 3))
    adapter = KerasAdapter(model, gradient_batch=ig_batch)
    record["build_s"] = time.perf_counter() - t
    record["params_M"] = model.count_params() / 1e6
    record["first_layer"] = repr(adapter)
    record["ig_batch"] = adapter.gradient_batch
    record["ig_batch_from"] = "--ig-batch" if ig_batch else "footprint"
    record["footprint"] = repr(head_footprint(adapter._functions.head.get_concrete_function().graph,
                                              adapter.affine.output_shape))
    photo = Path(sklearn.__file__).parent / "datasets" / "images" / "china.jpg"
    x, _ = load_input(photo, (224, 224, 3), 255.0, ARCHITECTURES[arch])
    _, h = adapter.first_layer(x)
    # weights=None: a random MobileNetV2 scores every class alike (no class is predicted, and
    # predicted_target refuses a tie), so the first top class is named, as argmax did before
    target = int(np.argmax(adapter.head(h[None])[0]))

    # side by side, alternating (the machine is shared): plain, smug-opt, plain, then
    # explain (smug-opt's IG again); the first of each includes its one-time trace
    gradients = plain_tape(adapter._stem.head, h, target)
    t = time.perf_counter()
    plain_s, plain_values = plain_tape_ig(gradients, h, 64, adapter.gradient_batch)
    record["plain_ig_peak_gb"] = sampler.peak(t, time.perf_counter()) / 2**30
    t = time.perf_counter()
    integrated_gradients(adapter, x, target=target, steps=64, batch_size=ig_batch)
    smug_s = [time.perf_counter() - t]
    plain_s = [plain_s, plain_tape_ig(gradients, h, 64, adapter.gradient_batch)[0]]

    start = time.perf_counter()
    e = explain(adapter, x, k=k, cell=cell, backend="highs", time_limit=time_limit, target=target,
                ig_batch=ig_batch)
    end = time.perf_counter()
    r = e.result
    stages = {"ig": e.times["ig"], "encode": e.times["encode"], "strengthen": r.times.strengthen,
              "lower": r.times.lower, "solve": r.times.solve, "verify": r.times.verify}
    encoded = start + e.times["ig"] + e.times["encode"]
    edges = {"ig": (start, start + e.times["ig"]), "encode": (start + e.times["ig"], encoded),
             "solve": (encoded, end)}
    record.update({
        "status": r.status.name, "verified": r.verified, "proof": r.proof, "gap": r.gap,
        "mask_cells": e.mask_size, "strengthening": _jsonable(r.strengthening),
        "solve_total_s": r.times.total, "solver_message": r.message, "solver_peak_mb": r.peak_memory_mb,
        "attempts": _attempts(r.attempts),
        "cells": e.grid.num_cells, "objective": r.objective, "bound": r.bound,
        "neurons": int(e.neurons.size), "explain_s": end - start,
        **{f"{name}_s": seconds for name, seconds in stages.items()},
        **{f"{name}_peak_gb": sampler.peak(*edges[name]) / 2**30 for name in edges},
        "run_peak_gb": sampler.peak(0, end) / 2**30,
        "plain_ig_s": plain_s, "smug_ig_s": [*smug_s, e.times["ig"]],
        "ig_vs_plain": min(*smug_s, e.times["ig"]) / min(plain_s),
        "ig_agrees_with_plain": float(np.abs(e.attributions.values - plain_values).max()
                                      / max(np.abs(plain_values).max(), 1e-12)),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores (shared, loaded)",
        "load_end": os.getloadavg(),
    })
    sampler.running = False
    with out.open("a") as f:
        f.write(json.dumps(record) + "\n")
    return record


def _peak(gb: float) -> str:
    """A stage's peak; "—" when the 20 ms sampler took no sample in it (a stage that short)."""
    return f"{gb:.2f}" if gb > 0 else "—"


def _seconds(record: dict, key: str, old_key: str) -> str:
    """The runs' seconds, "a / b" (a record before the side-by-side timing has one)."""
    value = record.get(key, record[old_key])
    return " / ".join(f"{v:.1f}" for v in (value if isinstance(value, list) else [value]))


def _attempts(attempts) -> dict:
    """How many attempts (over all levels and strengthened parts) ended how, and the first
    few that did not end OPTIMAL and verified."""
    counts: dict[str, int] = {}
    for a in attempts:
        key = f"{a.status.name} (verified {a.verified})"
        counts[key] = counts.get(key, 0) + 1
    other = [[a.level, a.status.name, a.solver_status, a.verified, a.message[:120], round(a.solve_seconds, 2)]
             for a in attempts if not (a.status.name == "OPTIMAL" and a.verified)]
    return {"counts": counts, "first_others": other[:5]}


def _jsonable(value):
    """``value`` with numpy scalars and arrays made plain JSON."""
    return json.loads(json.dumps(value, default=lambda v: v.tolist() if hasattr(v, "tolist") else str(v)))


def table(path: Path) -> str:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    head = ("| architecture | first layer → σ | IG batch | IG s (1st, 2nd) | plain tape IG s (1st, 2nd) "
            "| IG / plain | encode s | strengthen s | solve s | verify s | solve wall s | status | gap "
            "| mask / cells | peak GB (IG, encode, solve, run) | load avg (start, end) |")
    lines = [head, "|" + "|".join("---" for _ in range(head.count("|") - 1)) + "|"]
    for r in rows:
        if "ig_s" not in r:
            lines.append(f"| {r['arch']} |" + " |" * 10 + f" {r['status']} | | | | |")
            continue
        kind, shape_in, shape_out, activation = re.search(
            r"first layer (\S+) \(([^)]*)\)->\(([^)]*)\) \((.+?)\), \d+ ", r["first_layer"]).groups()
        stem = f"{kind} {shape_in.replace(', ', '×')} → {shape_out.replace(', ', '×')}, {activation}"
        wall = f"{r['solve_total_s']:.1f}" if r.get("solve_total_s") is not None else "—"
        verified = "verified" if r["verified"] else "NOT verified"
        proof = f", proof {r['proof']}" if r.get("proof") else ""
        gap = "—" if r.get("gap") is None else f"{r['gap']:.3f}"
        load = ", ".join(f"{r[key][0]:.1f}" for key in ("load_start", "load_end") if key in r)
        lines.append(
            f"| {r['arch']} | {stem} | {r['ig_batch']} | {_seconds(r, 'smug_ig_s', 'ig_s')} | "
            f"{_seconds(r, 'plain_ig_s', 'plain_ig_s')} | "
            f"{r['ig_vs_plain']:.2f} | {r['encode_s']:.2f} | {r.get('strengthen_s', 0.0):.1f} | "
            f"{r['solve_s']:.1f} | {r['verify_s']:.1f} | {wall} | {r['status']} ({verified}{proof}) | "
            f"{gap} | {r['mask_cells']} / {r['cells']} | "
            f"{', '.join(_peak(r[f'{stage}_peak_gb']) for stage in ('ig', 'encode', 'solve', 'run'))} | "
            f"{load} |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--arch", choices=ARCHITECTURES)
    p.add_argument("--out", type=Path, default=Path("results.jsonl"))
    p.add_argument("--table", type=Path, help="render a results file as markdown")
    p.add_argument("--max-gb", type=float, default=3.0)
    p.add_argument("--k", type=int, default=3000)
    p.add_argument("--cell", type=int, default=4)
    p.add_argument("--time-limit", type=float, default=60.0)
    p.add_argument("--ig-batch", type=int, help="IG points per gradient batch (default: sized from "
                   "the head's memory footprint)")
    args = p.parse_args()
    if args.table:
        sys.stdout.write(table(args.table))
        return 0
    if not args.arch:
        p.error("give --arch or --table")
    if args.ig_batch is not None and args.ig_batch < 1:
        p.error(f"--ig-batch must be at least 1, got {args.ig_batch}")
    print(json.dumps(run(args.arch, args.out, args.max_gb, args.k, args.cell, args.time_limit,
                         args.ig_batch)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
