"""How far the masks of 2 and 3 cells are from keeping the label, on a chain network of the
external stress table (``cifar10_small``): which side of a FEASIBLE row's gap is missing.

    nice -n 5 python benchmarks/stress_external/small_masks_gap.py --inputs 0 4 6 --top 256

For each input: every mask of 2 cells evaluated (incrementally, as the encoder does), their
best worst-row slacks, then every mask of 3 cells that contains one of the ``--top`` best
pairs, and the best of those. A slack > 0 keeps the label. Float64, no error bounds: a
measurement to steer the work, not a proof (the encoder's own pass proves the sizes it
rules out).
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from run import NETWORKS

from smug_opt.data.vnnlib import spec_images
from smug_opt.encode.flat_enumeration import mask_slack
from smug_opt.encode.incremental import IncrementalMasks
from smug_opt.encode.masked import MaskedNetwork
from smug_opt.models.grid import regular_grid
from smug_opt.stress_models import load_stress_model

BATCH = 8192


def gap(network: MaskedNetwork, top: int) -> tuple[np.ndarray, float, np.ndarray, int]:
    """The five best pair slacks, the best slack of a 3-cell mask grown from the ``top``
    best pairs, that mask's cells and how many 3-cell masks were evaluated."""
    slack, _ = mask_slack(network, IncrementalMasks(network))
    n = network.num_cells
    pairs = np.stack(np.triu_indices(n, 1), axis=1)
    values = np.concatenate([slack(pairs[s:s + BATCH]) for s in range(0, len(pairs), BATCH)])
    order = np.argsort(-values, kind="stable")
    grown = np.repeat(pairs[order[:top]], n, axis=0)
    added = np.tile(np.arange(n), min(top, len(order)))[:, None]
    fresh = ~np.any(grown == added, axis=1)
    triples = np.unique(np.sort(np.hstack([grown, added])[fresh], axis=1), axis=0)
    slacks = np.concatenate([slack(triples[s:s + BATCH]) for s in range(0, len(triples), BATCH)])
    best = int(np.argmax(slacks))
    return values[order[:5]], float(slacks[best]), triples[best], len(triples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--network", default="marabou-cifar10-small", choices=list(NETWORKS))
    parser.add_argument("--inputs", type=int, nargs="+", required=True)
    parser.add_argument("--top", type=int, default=256, help="best pairs grown by every cell")
    args = parser.parse_args()
    model, suite, specs, _, _ = NETWORKS[args.network]
    loaded = load_stress_model(str(model))
    if specs is None:
        raise SystemExit(f"{args.network} reads held-out digits, not specs: pick a network with specs")
    images = spec_images(str(specs), 1 if suite == "mnist" else 3, loaded.channels_first)
    pre, flat = loaded.lowered
    channels, height, width = flat.input_shape
    cell_of = np.tile(regular_grid((height, width), 1).cell_of, channels)
    for index in args.inputs:
        image = images[index]
        xa = pre(np.asarray(image.x).reshape(1, -1))[0]
        network = MaskedNetwork.build(flat, xa, cell_of, image.label, 0.0)
        wall, cpu = time.monotonic(), time.process_time()
        pairs, triple, cells, evaluated = gap(network, args.top)
        print(f"input {index}: best pairs {np.round(pairs, 3).tolist()}; best of {evaluated} masks "
              f"of 3 cells {triple:.3f} {cells.tolist()}; {time.monotonic() - wall:.0f} s wall, "
              f"{time.process_time() - cpu:.0f} s CPU, load {os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
    main()
