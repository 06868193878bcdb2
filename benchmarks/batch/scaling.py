"""Batch explain scaling: maps/s for MNIST digits on 1 and 2 local workers and on a Dask
LocalCluster of 2 workers, in one run; per-input overhead; and the per-input time of a
paper-scale (224x224x3, k=3000, 4x4 cells) input, for the 1,000,000-input estimate.

    nice -n 10 python benchmarks/batch/scaling.py --n 200 --out benchmarks/batch

Each executor first explains a warm-up batch (one chunk per worker) so every worker has
loaded the model; the timed run then explains the ``--n`` digits in chunks of ``--chunk``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

import numpy as np

from smug_opt.batch import ExplainSettings, explain_many
from smug_opt.executors import DaskExecutor, Executor, LocalPoolExecutor, SequentialExecutor
from smug_opt.parameters import SmugParameters

MNIST = ExplainSettings(SmugParameters(k=200, cell=2), backend="highs", time_limit=60.0)


def _timed(executor: Executor, x: np.ndarray, chunk: int, warm: np.ndarray) -> dict[str, float]:
    list(explain_many("mnist-cnn", warm, settings=MNIST, executor=executor, chunk_size=1))
    start = time.perf_counter()
    items = list(explain_many("mnist-cnn", x, settings=MNIST, executor=executor, chunk_size=chunk))
    wall = time.perf_counter() - start
    inside = [i.record["seconds"] for i in items]
    ok = sum(i.ok for i in items)
    workers = executor.workers
    return {"inputs": len(items), "ok": ok, "wall_s": wall, "maps_per_s": len(items) / wall,
            "median_in_worker_s": statistics.median(inside), "sum_in_worker_s": sum(inside),
            "overhead_per_input_s": (wall * workers - sum(inside)) / len(items), "workers": workers}


def _paper_scale(n: int) -> float:
    """Median seconds to explain one 224x224x3 input (Inception-v1's stem, k=3000, 4x4 cells)."""
    from smug_opt.bench.generators import paper_scale_model
    from smug_opt.explanation import explain

    model = paper_scale_model()
    rng = np.random.default_rng(0)
    explain(model, rng.random((224, 224, 3)), k=3000, cell=4, backend="highs")  # trace once
    times = []
    for _ in range(n):
        start = time.perf_counter()
        e = explain(model, rng.random((224, 224, 3)), k=3000, cell=4, backend="highs", time_limit=300)
        times.append(time.perf_counter() - start)
        assert e.ok and e.result.verified
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--chunk", type=int, default=8)
    parser.add_argument("--paper-inputs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/batch"))
    args = parser.parse_args()
    from smug_opt.data.mnist import load_digits

    digits = load_digits().x_test
    x, warm = digits[: args.n], digits[-4:]
    rows = {}
    with SequentialExecutor() as ex:
        rows["local, 1 worker (in process)"] = _timed(ex, x, args.chunk, warm[:1])
    with LocalPoolExecutor(2) as ex:
        rows["local, 2 workers"] = _timed(ex, x, args.chunk, warm[:2])
    import distributed

    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client, DaskExecutor(client) as ex:
        rows["dask LocalCluster, 2 workers"] = _timed(ex, x, args.chunk, warm[:2])
    paper = _paper_scale(args.paper_inputs)
    result = {"n": args.n, "chunk": args.chunk, "rows": rows, "paper_scale_s_per_input": paper,
              "machine": f"{platform.machine()}, {os.cpu_count()} cores, shared with other work"}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "scaling.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
