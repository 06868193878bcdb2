"""Branch and bound on disjuncts of one ``mnistfc`` instance, side by side with and without
per-domain interval re-bounding, each under a budget of CPU seconds of this process (the
deadline reads the process's CPU clock, so the load does not change what is measured).

    OPENBLAS_NUM_THREADS=1 nice -n 10 python benchmarks/verify/bab_disjunct.py 256x4 prop_0_0.03 \\
        --disjuncts 7 0 --cpu 25 --refine all 0
"""

from __future__ import annotations

import argparse
import resource
import time
import types
from pathlib import Path

import smug_opt.deadline as deadline_module
from smug_opt.deadline import Deadline
from smug_opt.robustness.bab import branch_and_bound
from smug_opt.robustness.instance import load_instance_model
from smug_opt.robustness.query import RobustnessQuery
from smug_opt.vnnlib import read_vnnlib

NETS = Path(__file__).resolve().parents[3] / "shared/nets/vnncomp2021/benchmarks/mnistfc"


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("net", help="256x2, 256x4 or 256x6")
    parser.add_argument("prop", help="e.g. prop_0_0.03")
    parser.add_argument("--disjuncts", type=int, nargs="+", default=[0])
    parser.add_argument("--cpu", type=float, default=25.0, help="CPU seconds per search")
    parser.add_argument("--refine", nargs="+", default=["0", "all"],
                        help="refine_layers values: a count, or 'all'")
    parser.add_argument("--steps", type=int, default=None, help="α/β steps per new domain")
    args = parser.parse_args()
    model = load_instance_model(NETS / f"mnist-net_{args.net}.onnx")
    spec = read_vnnlib(NETS / f"{args.prop}.vnnlib.gz")
    query = RobustnessQuery.from_spec(model.flat, model.preprocess, spec)
    bounds = query.chain_bounds()
    if bounds is None:
        raise SystemExit(f"{args.net} is not a chain of dense layers and ReLUs")
    print("unstable ReLUs per layer:", [int(bounds.unstable(i).sum()) for i in range(len(bounds.lo))])
    deadline_module.time = types.SimpleNamespace(monotonic=time.process_time, time=time.time)
    for k in args.disjuncts:
        d = query.disjuncts[k]
        for mode in args.refine:
            layers = None if mode == "all" else int(mode)
            cpu, wall = _cpu(), time.monotonic()
            r = branch_and_bound(bounds, d.matrix, d.rhs, d.strict, Deadline.after(args.cpu),
                                 steps=args.steps, refine_layers=layers)
            print(f"{args.net} {args.prop} disjunct {k} refine_layers={mode}: {r.status}, "
                  f"{r.domains} domains, {_cpu() - cpu:.1f} CPU s, {time.monotonic() - wall:.1f} s wall "
                  f"{r.message}", flush=True)


if __name__ == "__main__":
    main()
