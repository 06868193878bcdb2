"""How much a convex relaxation of ``cifar10_small``'s dense head loses, even with perfect
knowledge of what the convolutions feed it: can any bound of that kind prove a size?

    nice -n 10 python benchmarks/stress_external/head_relaxation_gap.py --inputs 6 0 4

For each input, every mask of at most 2 cells is evaluated (the network's own float64
pass, :meth:`~smug_opt.encode.masked.MaskedNetwork.values`): their first dense layer's
pre-activations ``z3`` (128), the second's ``z4`` (64) and the worst-row slack. From
those exact sets, three upper bounds on the best slack of a mask of at most 2 cells:

- ``crown``: per output row, the linear bound that CROWN-style back-substitution through
  the two hidden ReLU layers of the head gives (upper chords, lower slopes 0 or 1 by the
  larger side), with each neuron's interval the exact one over those masks, maximised
  exactly over the masks' ``z3``; the best row's (a mask must satisfy every row);
- ``lp``: the LP ``max t`` s.t. ``t ≤`` every row, the head's ReLUs relaxed by triangles
  over the same exact intervals, ``z3`` anywhere in the convex hull of the masks' ``z3``
  (column generation with HiGHS through scipy): the tightest bound any per-neuron convex
  relaxation of the head gets, given the exact set the convolutions can feed it;
- the true best slack.

Any sound bound over the masks of ``m`` cells that relaxes the head neuron by neuron is at
least the ``lp`` figure computed with ``m``'s intervals and set, which widen with ``m``:
when ``lp − true`` at ``m = 2`` exceeds the best slack at ``m = 3``'s distance below 0,
such a bound cannot rule out size 3. Float64, no error bounds: a measurement that steers
the work, not a proof.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import scipy.sparse as sp
from run import NETWORKS
from scipy.optimize import linprog

from smug_opt.data.vnnlib import spec_images
from smug_opt.encode.masked import MaskedNetwork, cell_masks
from smug_opt.models.grid import regular_grid
from smug_opt.stress_models import load_stress_model

BATCH = 2048
HEAD = (5, 7, 9)
"""Flat indices of the head's linear layers (dense 128, dense 64, scores): ``z3``, ``z4``, scores."""


def mask_values(network: MaskedNetwork, cells: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``z3``, ``z4`` and scores of the masks keeping each row of each batch in ``cells``."""
    count = sum(len(c) for c in cells)
    layers = network.net.layers
    z3, z4 = np.zeros((count, layers[HEAD[0]].size)), np.zeros((count, layers[HEAD[1]].size))
    scores = np.zeros((count, network.net.num_outputs))
    at = 0
    for batch in cells:
        values = network.values(cell_masks(batch, network.num_cells))
        for out, index in zip((z3, z4, scores), HEAD, strict=True):
            out[at:at + len(batch)] = values[index]
        at += len(batch)
    return z3, z4, scores


def small_masks(n: int) -> list[np.ndarray]:
    """Every mask of at most 2 of ``n`` cells, as batches of kept cells (the empty one first)."""
    pairs = np.stack(np.triu_indices(n, 1), axis=1)
    return [np.zeros((1, 0), dtype=np.int64), np.arange(n)[:, None],
            *(pairs[s:s + BATCH] for s in range(0, len(pairs), BATCH))]


def grown_triples(pairs: np.ndarray, n: int) -> list[np.ndarray]:
    """Every mask of 3 of ``n`` cells that holds one of ``pairs``, as batches of kept cells."""
    grown = np.repeat(pairs, n, axis=0)
    added = np.tile(np.arange(n), len(pairs))[:, None]
    fresh = ~np.any(grown == added, axis=1)
    triples = np.unique(np.sort(np.hstack([grown, added])[fresh], axis=1), axis=0)
    return [triples[s:s + BATCH] for s in range(0, len(triples), BATCH)]


def head_weights(network: MaskedNetwork) -> list[tuple[np.ndarray, np.ndarray]]:
    """``(W, b)`` of the head's dense layers after ``z3``: ``z4 = W4·relu(z3) + b4``, scores."""
    layers = network.net.layers
    if [layers[i].kind for i in HEAD] != ["linear"] * 3 or layers[HEAD[0]].size != 128:
        raise SystemExit("this measurement reads cifar10_small's head (dense 128, 64, 10)")
    out = []
    for index in HEAD[1:]:
        W, b = layers[index].affine
        out.append((np.asarray(sp.csr_matrix(W).toarray()), np.asarray(b)))
    return out


def _relaxed(g: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, float]:
    """``(A, c)`` with ``g·relu(z) ≤ A·z + c`` for ``lo ≤ z ≤ hi`` (CROWN's slopes)."""
    unstable = (lo < 0) & (hi > 0)
    slope = np.where(unstable, hi / np.where(unstable, hi - lo, 1.0), (lo >= 0).astype(float))
    A = np.where(unstable & (g < 0), g * (hi > -lo), g * slope)
    c = float(np.sum(np.where(unstable & (g > 0), -g * slope * lo, 0.0)))
    return A, c


def crown_bound(network: MaskedNetwork, z3: np.ndarray, z4: np.ndarray) -> float:
    """The best row's CROWN bound, maximised exactly over the masks' ``z3``."""
    (W4, b4), (W5, b5) = head_weights(network)
    bounds = []
    for row, rhs in zip(network.out_rows, network.out_rhs, strict=True):
        g5 = row @ W5
        A4, c4 = _relaxed(g5, z4.min(axis=0), z4.max(axis=0))
        A3, c3 = _relaxed(A4 @ W4, z3.min(axis=0), z3.max(axis=0))
        bounds.append(float((z3 @ A3).max()) + c3 + c4 + A4 @ b4 + row @ b5 - rhs)
    return min(bounds)


def lp_bound(network: MaskedNetwork, z3: np.ndarray, z4: np.ndarray, slack: np.ndarray) -> float:
    """``max t`` over the triangle relaxation of the head with ``z3`` in the convex hull of
    the masks' (column generation from the 200 best masks)."""
    (W4, b4), (W5, b5) = head_weights(network)
    lo3, hi3, lo4, hi4 = z3.min(axis=0), z3.max(axis=0), z4.min(axis=0), z4.max(axis=0)
    n3, n4, rows = W4.shape[1], W4.shape[0], network.out_rows.shape[0]
    columns = list(np.argsort(-slack, kind="stable")[:200])
    while True:
        k = len(columns)
        nv = 1 + 2 * n3 + n4 + k  # t, z3, h3, h4, λ
        o3, oh3, oh4, ol = 1, 1 + n3, 1 + 2 * n3, 1 + 2 * n3 + n4
        eq = [np.concatenate([np.zeros(o3), np.eye(n3)[j], np.zeros(n3 + n4), -z3[columns, j]])
              for j in range(n3)]
        eq.append(np.concatenate([np.zeros(ol), np.ones(k)]))
        b_eq = [0.0] * n3 + [1.0]
        ub: list[np.ndarray] = []
        b_ub: list[float] = []
        box: list[tuple[float | None, float | None]] = [(None, None)] * (1 + n3) + [(0, None)] * (n3 + n4 + k)
        for j in range(n3):
            r = np.zeros(nv)
            if hi3[j] <= 0:
                box[oh3 + j] = (0, 0)
            elif lo3[j] >= 0:
                r[oh3 + j], r[o3 + j] = 1, -1
                eq.append(r)
                b_eq.append(0.0)
            else:
                s = hi3[j] / (hi3[j] - lo3[j])
                r[o3 + j], r[oh3 + j] = 1, -1
                ub.append(r)
                b_ub.append(0.0)
                r = np.zeros(nv)
                r[oh3 + j], r[o3 + j] = 1, -s
                ub.append(r)
                b_ub.append(-s * lo3[j])
        for j in range(n4):
            r = np.zeros(nv)
            if hi4[j] <= 0:
                box[oh4 + j] = (0, 0)
            elif lo4[j] >= 0:
                r[oh4 + j], r[oh3:oh3 + n3] = 1, -W4[j]
                eq.append(r)
                b_eq.append(float(b4[j]))
            else:
                s = hi4[j] / (hi4[j] - lo4[j])
                r[oh3:oh3 + n3], r[oh4 + j] = W4[j], -1
                ub.append(r)
                b_ub.append(-float(b4[j]))
                r = np.zeros(nv)
                r[oh4 + j], r[oh3:oh3 + n3] = 1, -s * W4[j]
                ub.append(r)
                b_ub.append(s * (float(b4[j]) - lo4[j]))
        G, g0 = network.out_rows @ W5, network.out_rows @ b5 - network.out_rhs
        for i in range(rows):
            r = np.zeros(nv)
            r[0], r[oh4:oh4 + n4] = 1, -G[i]
            ub.append(r)
            b_ub.append(float(g0[i]))
        cost = np.zeros(nv)
        cost[0] = -1.0
        res = linprog(cost, A_ub=np.array(ub), b_ub=b_ub, A_eq=np.array(eq), b_eq=b_eq, bounds=box,
                      method="highs")
        if res.status != 0:
            raise SystemExit(f"the LP ended with status {res.status}: {res.message}")
        duals = res.eqlin.marginals
        reduced = z3 @ duals[:n3] - duals[n3]  # λ's reduced cost: negative ones improve
        known = set(columns)
        fresh = [int(i) for i in np.argsort(reduced, kind="stable")[:50]
                 if reduced[i] < -1e-9 and i not in known]
        if not fresh:
            return float(-res.fun)
        columns += fresh


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", type=int, nargs="+", required=True)
    parser.add_argument("--grow", type=int, default=0,
                        help="also the masks of 3 cells grown from this many best pairs")
    args = parser.parse_args()
    model, _, specs, _, _ = NETWORKS["marabou-cifar10-small"]
    loaded = load_stress_model(str(model))
    images = spec_images(str(specs), 3, loaded.channels_first)
    pre, flat = loaded.lowered
    channels, height, width = flat.input_shape
    cell_of = np.tile(regular_grid((height, width), 1).cell_of, channels)
    for index in args.inputs:
        image = images[index]
        network = MaskedNetwork.build(flat, pre(np.asarray(image.x).reshape(1, -1))[0], cell_of,
                                      image.label, 0.0)
        wall, cpu = time.monotonic(), time.process_time()
        masks = small_masks(network.num_cells)
        z3, z4, scores = mask_values(network, masks)
        slack = (scores @ network.out_rows.T - network.out_rhs).min(axis=1)
        unstable = int(np.sum((z3.min(0) < 0) & (z3.max(0) > 0)) + np.sum((z4.min(0) < 0) & (z4.max(0) > 0)))
        print(f"input {index}: masks of <= 2 cells {len(slack)}, best slack {slack.max():.3f}, "
              f"crown {crown_bound(network, z3, z4):+.3f}, lp {lp_bound(network, z3, z4, slack):+.3f} "
              f"({unstable} of the head's 192 ReLUs unstable); {time.monotonic() - wall:.0f} s wall, "
              f"{time.process_time() - cpu:.0f} s CPU, load {os.getloadavg()[0]:.1f}", flush=True)
        if args.grow:
            best = np.argsort(-slack, kind="stable")[:args.grow] - 1 - network.num_cells
            pairs = np.stack(np.triu_indices(network.num_cells, 1), axis=1)[best[best >= 0]]
            t3, t4, ts = mask_values(network, grown_triples(pairs, network.num_cells))
            z3, z4 = np.vstack([z3, t3]), np.vstack([z4, t4])
            slack = np.concatenate([slack, (ts @ network.out_rows.T - network.out_rhs).min(axis=1)])
            print(f"input {index}: plus {len(t3)} masks of 3 cells grown from the {len(pairs)} best pairs, "
                  f"best slack {slack.max():.3f}, lp {lp_bound(network, z3, z4, slack):+.3f} (a lower "
                  f"estimate of the lp over every mask of at most 3 cells); {time.monotonic() - wall:.0f} s "
                  f"wall, {time.process_time() - cpu:.0f} s CPU", flush=True)


if __name__ == "__main__":
    main()
