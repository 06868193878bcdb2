"""Replay the queries of an explanation's last stage on one network and image, with and
without bounds reused between queries (smug_opt.robustness.bounds_memo), timing each
query's CROWN intervals in CPU seconds: the network's own (``bounds``, what the bound
rounds and ``refuted`` read) and, on a max-pool CNN, the ReLU rewrite's (``chain_bounds``,
what branch and bound starts from). The free set: every value but the ``--fixed`` most
sensitive; the queries free one fixed value each, and then chunks of ``--chunk`` values.

    nice -n 10 .venv/bin/python benchmarks/robust/bound_reuse_replay.py "verivital maxpool" --image 4
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> int:
    import run

    from smug_opt.models.network_stem import read_network_stem
    from smug_opt.models.resolve import network_of
    from smug_opt.network.lower import lower
    from smug_opt.robustness.bounds_memo import BoundsMemo
    from smug_opt.robustness.explanation import by_sensitivity, label_changes
    from smug_opt.robustness.model_explanation import _network_input
    from smug_opt.robustness.query import RobustnessQuery
    from smug_opt.threads import one_blas_thread

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("net", choices=list(run.MODELS))
    p.add_argument("--image", type=int, default=4, help="index into run.py's images (4: digit-0)")
    p.add_argument("--fixed", type=int, default=50, help="values left fixed (the most sensitive)")
    p.add_argument("--singles", type=int, default=20, help="single-value queries")
    p.add_argument("--chunk", type=int, default=8, help="values per chunk query (singles/4 chunks)")
    p.add_argument("--eps", type=float, default=0.05)
    args = p.parse_args()
    name, x, _ = run.images(4, 3)[args.image]
    network = network_of(run.MODELS[args.net], input_range=(0.0, 1.0))
    pre, flat = lower(network)
    x = _network_input(network, read_network_stem(network).input_view, x)
    label = int(flat.forward(pre(x[None]))[-1][0].argmax())
    low, high = np.clip(x - args.eps, 0, 1), np.clip(x + args.eps, 0, 1)
    order = by_sensitivity(flat, pre, x, label, high - low)
    free = np.zeros(x.size, dtype=bool)
    free[order[: x.size - args.fixed]] = True
    fixed = order[x.size - args.fixed:]
    extras = [fixed[[i]] for i in range(args.singles)]
    extras += [fixed[i: i + args.chunk] for i in range(0, args.singles // 4 * args.chunk, args.chunk)]
    region = label_changes(flat.num_outputs, label)
    print(f"{args.net} {name}: {int(free.sum())} values free, {len(extras)} queries "
          f"({args.singles} single values, chunks of {args.chunk}); load {os.getloadavg()[0]:.1f}")
    with one_blas_thread():
        for reuse in (False, True):
            memo = BoundsMemo() if reuse else None
            cpu = {"bounds": [], "chain_bounds": []}
            for extra in extras:
                freed = free.copy()
                freed[extra] = True
                q = RobustnessQuery(flat, pre, np.where(freed, low, x), np.where(freed, high, x), region,
                                    memo=memo)
                for part in cpu:
                    t = time.process_time()
                    getattr(q, part) if part == "bounds" else q.chain_bounds()
                    cpu[part].append(time.process_time() - t)
            first = {k: v[0] for k, v in cpu.items()}
            rest = {k: float(np.mean(v[1:])) for k, v in cpu.items()}
            print(f"  {'reused' if reuse else 'from scratch'}: first query bounds {first['bounds']:.3f} s, "
                  f"chain {first['chain_bounds']:.3f} s; later queries, mean per query: bounds "
                  f"{rest['bounds']:.3f} s, chain {rest['chain_bounds']:.3f} s; total "
                  f"{sum(map(sum, cpu.values())):.2f} CPU s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
