"""What one IG gradient batch through a keras.applications head really costs in memory,
against the footprint that sizes the batches (smug_opt.models.keras_memory) and the
estimate before it (each head layer's output counted once, twice for its gradient).

One architecture and batch size per process: build the model (weights=None, 224×224×3),
trace the adapter's head gradient (no run), then run it on one batch while sampling the
process's resident memory every 5 ms; prints one JSON line with the growth over the
resident memory before the run.

    nice -n 10 python benchmarks/keras_applications/ig_memory.py --arch ConvNeXtTiny --batch 2
"""

from __future__ import annotations

import argparse
import json
import math
import threading
import time

import numpy as np


def layer_output_estimate(adapter) -> int:
    """Bytes per row the estimate before keras_memory gave: every head layer's output
    (4 bytes a value) and its gradient, plus ``h`` and its gradient in float64."""
    import keras

    stem, model = adapter._stem, adapter.model
    last = stem.activation_layer or stem.batch_norm or stem.affine_layer
    nested = [layer for layer in model.layers if last in getattr(layer, "layers", [])]
    if nested:  # ConvNeXt: the stem's rest inside its Sequential, then the outer head
        inner = nested[0].layers
        layers = inner[inner.index(last) + 1 :] + keras.Model(nested[0].output, model.outputs[0]).layers[1:]
    else:
        layers = keras.Model(last.output, model.outputs[0]).layers[1:]
    h_shape = adapter.affine.output_shape
    values = math.prod(h_shape)
    for layer in layers:
        output = layer.output[0] if isinstance(layer.output, (list, tuple)) else layer.output
        values += math.prod(int(s) for s in output.shape[1:])
    return 2 * 4 * values + 2 * 8 * math.prod(h_shape)


def main() -> int:
    import psutil

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--arch", required=True)
    p.add_argument("--batch", type=int, required=True)
    args = p.parse_args()

    from smug_opt.models._keras import import_keras
    from smug_opt.models.keras_adapter import KerasAdapter
    from smug_opt.models.keras_memory import footprint_batch, head_footprint

    keras = import_keras()
    keras.utils.set_random_seed(0)
    model = getattr(keras.applications, args.arch)(weights=None, input_shape=(224, 224, 3))
    adapter = KerasAdapter(model, gradient_batch=args.batch)
    footprint = head_footprint(adapter._functions.head.get_concrete_function().graph,
                               adapter.affine.output_shape)
    before = layer_output_estimate(adapter) / 2**20
    adapter._functions.head_gradient.get_concrete_function()  # trace, do not run
    h = np.abs(np.random.default_rng(0).standard_normal((args.batch, *adapter.affine.output_shape)))
    process = psutil.Process()
    base = process.memory_info().rss
    peak, running = [base], [True]

    def sample() -> None:
        while running[0]:
            peak[0] = max(peak[0], process.memory_info().rss)
            time.sleep(0.005)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    start = time.perf_counter()
    adapter.head_gradient(h, 0)
    seconds = time.perf_counter() - start
    running[0] = False
    sampler.join()
    print(json.dumps({
        "arch": args.arch, "batch": args.batch, "resident_before_gb": round(base / 2**30, 2),
        "growth_mb": round((peak[0] - base) / 2**20, 1), "seconds": round(seconds, 2),
        "footprint_mb_per_row": round(footprint.per_row / 2**20, 1),
        "footprint_fixed_mb": round(footprint.fixed / 2**20), "xla_calls": footprint.xla_calls,
        "footprint_batch": footprint_batch(footprint),
        "layer_output_estimate_mb_per_row": round(before, 1),
    }))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
