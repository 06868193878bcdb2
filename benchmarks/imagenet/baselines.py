"""EfficientNet-Lite0 on six real photos: what the mask becomes under each baseline and γ.

For each photo (scikit-image astronaut/chelsea/coffee/rocket, scikit-learn china/flower; the
central square at 224×224), IG through the real network picks k first-layer neurons once;
then for every baseline (what a masked pixel becomes) and γ the first-layer problem is
built and solved. A row of the table: the mask, how many of the k rows the empty mask
already satisfies, the status and the solve time. The IG timing is compared with a plain
torch gradient over the same points (the same head module, one backward per batch).

    python benchmarks/imagenet/baselines.py [--k 3000] [--cell 4] [--out benchmarks/imagenet]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np


def plain_gradient_seconds(adapter, h: np.ndarray, target: int, steps: int, batch: int) -> float:
    """Seconds for torch alone to run the head and differentiate it at IG's ``steps``
    points plus ``h`` and 0 (the same points IG visits), in batches of ``batch``."""
    import torch

    from smug_opt.models.torch_graph import view_to_net

    module = adapter._module("head")
    alphas = np.concatenate([(np.arange(steps) + 0.5) / steps, [1.0, 0.0]])
    h_t = torch.as_tensor(h, dtype=module.dtype)
    start = time.perf_counter()
    for i in range(0, len(alphas), batch):
        a = torch.as_tensor(alphas[i:i + batch], dtype=module.dtype).view(-1, *([1] * h.ndim))
        points = (a * h_t).requires_grad_(True)
        score = module(view_to_net(points, adapter._h_view))[:, target]
        torch.autograd.grad(score.sum(), points)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, default=3000)
    parser.add_argument("--cell", type=int, default=4)
    parser.add_argument("--steps", type=int, default=64)
    parser.add_argument("--gammas", default="0,0.5,0.9")
    parser.add_argument("--baselines", default="zero,black,mean,blur")
    parser.add_argument("--photos", default="astronaut,chelsea,coffee,rocket,china,flower")
    parser.add_argument("--backend", default="highs")
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent)
    args = parser.parse_args()

    import torch

    from smug_opt.encode.first_layer import encode_first_layer
    from smug_opt.mask_baseline import baseline_affine_input
    from smug_opt.models import imagenet
    from smug_opt.models.catalog import describe
    from smug_opt.models.integrated_gradients import integrated_gradients, top_k_neurons
    from smug_opt.models.resolve import as_adapter
    from smug_opt.solving import solve

    torch.set_num_threads(2)
    adapter = as_adapter(imagenet.EFFICIENTNET_LITE0)
    model = describe(adapter)
    grid = adapter.mask_grid(args.cell, adapter.input_shape)
    rows = []
    timing = []
    for name in args.photos.split(","):
        x = imagenet.photo(name)
        outputs = adapter.predict(x[None])[0]
        top = model.top_classes(outputs, 1)[0]
        t0 = time.perf_counter()
        attribution = integrated_gradients(adapter, x, steps=args.steps)
        ig_seconds = time.perf_counter() - t0
        o, h = adapter.first_layer(x)
        plain = plain_gradient_seconds(adapter, h, attribution.target, args.steps, adapter.gradient_batch)
        timing.append({"photo": name, "ig_seconds": ig_seconds, "plain_gradient_seconds": plain,
                       "ratio": ig_seconds / plain})
        neurons = top_k_neurons(attribution, args.k, eligible=o.reshape(-1) > 0)
        xa = adapter.affine_input(x)
        for baseline in args.baselines.split(","):
            xb = baseline_affine_input(adapter, baseline, x, pixel_mean=model.pixel_mean)
            for gamma in (float(g) for g in args.gammas.split(",")):
                t1 = time.perf_counter()
                enc = encode_first_layer(adapter.affine, xa, neurons, gamma=gamma, grid=grid, baseline=xb)
                result = solve(enc.problem, args.backend, time_limit=args.time_limit)
                seconds = time.perf_counter() - t1
                row = {"photo": name, "class": top["class"], "name": top["name"],
                       "p": round(top["probability"], 3), "baseline": baseline, "gamma": gamma,
                       "k": int(neurons.size), "cells": grid.num_cells,
                       "empty_mask_rows": enc.empty_mask_rows, "status": result.status.name,
                       "mask": None if result.x is None else int(result.x[:grid.num_cells].round().sum()),
                       "seconds": round(seconds, 2)}
                rows.append(row)
                print(json.dumps(row), flush=True)
        print(json.dumps(timing[-1]), flush=True)
    load = os.getloadavg()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "baselines.json").write_text(json.dumps(
        {"rows": rows, "ig_timing": timing, "loadavg": load,
         "args": {key: str(value) for key, value in vars(args).items()}},
        indent=1) + "\n")
    print(f"load average {load[0]:.1f}")


if __name__ == "__main__":
    main()
