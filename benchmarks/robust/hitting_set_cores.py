"""How far implicit hitting sets over counterexample cores raise the minimum's lower bound.

For one image: the subset-minimal traversal (30 s), its counterexamples shrunk into cores,
then rounds of: the optimal hitting set ``H`` of every core so far (its size is a proven
lower bound), up to 8 new cores from a 16-restart PGD with ``H`` fixed (one more random
pixel of each new core fixed before the next attack), and, when PGD finds none, from
``decide`` on ``H`` (branch and bound). Prints per round the bound, the cores, and at the end
how many pixels lie in every core and the hitting-set LP's ceiling (inputs / smallest core).

    nice -n 5 .venv/bin/python benchmarks/robust/hitting_set_cores.py "verix mnist-10x2" digit-2 --seconds 25
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
from run import MODELS, images


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("net", choices=list(MODELS))
    p.add_argument("image", help="an image name of run.py (test-mnistfc-prop_0_0.03, digit-2, ...)")
    p.add_argument("--seconds", type=float, default=60.0, help="wall seconds for the hitting-set rounds")
    p.add_argument("--eps", type=float, default=0.05)
    args = p.parse_args()

    from smug_opt.models.resolve import network_of
    from smug_opt.network.lower import lower
    from smug_opt.robustness.attack import attack
    from smug_opt.robustness.decide import decide
    from smug_opt.robustness.explanation import label_changes, robust_explanation
    from smug_opt.robustness.minimum import _hitting_set, shrink_counterexample
    from smug_opt.robustness.query import RobustnessQuery
    from smug_opt.threads import one_blas_thread

    found = {name: x for name, x, _ in images(4, 3)}
    if args.image not in found:
        p.error(f"unknown image {args.image!r}; one of {', '.join(found)}")
    x = found[args.image]
    preprocess, net = lower(network_of(MODELS[args.net], input_range=(0.0, 1.0)))
    label = int(net.forward(preprocess(x[None]))[-1][0].argmax())
    low = np.minimum(np.maximum(x - args.eps, 0.0), x)
    high = np.maximum(np.minimum(x + args.eps, 1.0), x)
    region = label_changes(net.num_outputs, label)
    cores: list[np.ndarray] = []
    seen: set[tuple[int, ...]] = set()

    def add(core: np.ndarray | None) -> bool:
        if core is None or core.size == 0 or tuple(core.tolist()) in seen:
            return False
        seen.add(tuple(core.tolist()))
        cores.append(core)
        return True

    with one_blas_thread():
        cpu = time.process_time()
        subset = robust_explanation(net, preprocess, x, eps=args.eps, label=label, time_limit=30,
                                    solve_options={"isolate": False})
        print(f"traversal: {subset.size} px, subset-minimal {subset.subset_minimal}, "
              f"{len(subset.counterexamples)} counterexamples, {time.process_time() - cpu:.1f} CPU s")
        for cx in subset.counterexamples[:40]:
            add(shrink_counterexample(net, preprocess, x, cx, label, low, high))
        rng = np.random.default_rng(0)
        start, cpu, rounds = time.monotonic(), time.process_time(), 0
        while time.monotonic() - start < args.seconds:
            hit, bound, status = (_hitting_set(cores, x.size, "highs", 10) if cores
                                  else (np.zeros(x.size, dtype=bool), 0, "no cores"))
            if hit is None:
                print(f"hitting set: {status}")
                break
            rounds += 1
            fixed, new = hit.copy(), 0
            for j in range(8):
                result = attack(net, preprocess, np.where(fixed, x, low), np.where(fixed, x, high), region,
                                steps=50, restarts=16, seed=31 * rounds + j)
                if result.loss >= 0 or not add(shrink_counterexample(net, preprocess, x, result.x, label,
                                                                     low, high)):
                    break
                new += 1
                fixed[rng.choice(cores[-1][~fixed[cores[-1]]])] = True
            how = "pgd"
            if new == 0:
                box = (np.where(hit, x, low), np.where(hit, x, high))
                verdict = decide(RobustnessQuery(net, preprocess, *box, region), time_limit=20)
                how = f"decide {verdict.answer}"
                core = (shrink_counterexample(net, preprocess, x, verdict.x, label, low, high)
                        if verdict.answer == "sat" and verdict.x is not None else None)
                if not add(core):
                    print(f"round {rounds}: bound {bound}, |H| {int(hit.sum())}, {how}: stop")
                    break
            sizes = [c.size for c in cores]
            print(f"round {rounds}: bound {bound}, |H| {int(hit.sum())}, new cores by {how}, "
                  f"{len(cores)} cores of {min(sizes)}-{max(sizes)} px, "
                  f"{time.process_time() - cpu:.1f} CPU s", flush=True)
    if cores:
        member = np.zeros((len(cores), x.size), dtype=bool)
        for i, core in enumerate(cores):
            member[i, core] = True
        print(f"{len(cores)} cores: {int(member.all(axis=0).sum())} pixels in every core; hitting-set LP "
              f"bound at most {x.size / min(c.size for c in cores):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
