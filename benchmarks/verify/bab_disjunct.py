"""Branch and bound on disjuncts of one ``mnistfc`` instance, side by side with and without
per-domain interval re-bounding, each under a budget of CPU seconds of this process (the
deadline reads the process's CPU clock, so the load does not change what is measured).

    OPENBLAS_NUM_THREADS=1 nice -n 10 python benchmarks/verify/bab_disjunct.py 256x4 prop_0_0.03 \\
        --disjuncts 7 0 --cpu 25 --refine all 0

``--trace S`` prints, every S CPU seconds, the open domains and the search's lower bound on
the disjunct (the least, over the open domains, of each one's best row bound: the search
closes the disjunct when it passes 0), read from the stack of open domains.
"""

from __future__ import annotations

import argparse
import resource
import time
import types
from pathlib import Path

import torch

import smug_opt.deadline as deadline_module
import smug_opt.robustness.bab as bab_module
import smug_opt.robustness.bab_domains as bab_domains
from smug_opt.deadline import Deadline
from smug_opt.robustness.bab import branch_and_bound
from smug_opt.robustness.instance import load_instance_model
from smug_opt.robustness.query import RobustnessQuery
from smug_opt.vnnlib import read_vnnlib

NETS = Path(__file__).resolve().parents[3] / "shared/nets/vnncomp2021/benchmarks/mnistfc"


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class _TracedStack(bab_domains.Stack):
    """The stack of open domains, keeping each pushed domain's best row bound beside it and
    printing the least of them every ``every`` CPU seconds."""

    every = 1.0

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.best: list[torch.Tensor] = []
        self.start = self.last = _cpu()
        self.pushed = 0

    def push(self, splits, alphas, betas, bound, coefficients, bounds=None) -> None:
        super().push(splits, alphas, betas, bound, coefficients, bounds)
        self.best.append(bound.max(dim=-1).values)
        self.pushed += int(bound.shape[0])
        now = _cpu()
        if now - self.last >= self.every:
            self.last = now
            open_ = torch.cat(self.best)
            print(f"  {now - self.start:6.1f} CPU s: {self.pushed} pushed, {self.size} open, "
                  f"lower bound {float(open_.min()):+.4f}, median open {float(open_.median()):+.4f}",
                  flush=True)

    def pop(self, batch: int) -> bab_domains.Domains:
        n = self.counts[-1]
        if n <= batch:
            self.best.pop()
        else:
            self.best[-1] = self.best[-1][: n - batch]
        return super().pop(batch)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("net", help="256x2, 256x4 or 256x6")
    parser.add_argument("prop", help="e.g. prop_0_0.03")
    parser.add_argument("--disjuncts", type=int, nargs="+", default=[0])
    parser.add_argument("--cpu", type=float, default=25.0, help="CPU seconds per search")
    parser.add_argument("--refine", nargs="+", default=["0", "all"],
                        help="refine_layers values: a count, or 'all'")
    parser.add_argument("--steps", type=int, default=None, help="α/β steps per new domain")
    parser.add_argument("--shallow-first", action="store_true",
                        help="split the shallowest layer first (branch_and_bound's shallow_first)")
    parser.add_argument("--trace", type=float, default=None,
                        help="print the open domains' lower bound every this many CPU seconds")
    args = parser.parse_args()
    model = load_instance_model(NETS / f"mnist-net_{args.net}.onnx")
    spec = read_vnnlib(NETS / f"{args.prop}.vnnlib.gz")
    query = RobustnessQuery.from_spec(model.flat, model.preprocess, spec)
    bounds = query.chain_bounds()
    if bounds is None:
        raise SystemExit(f"{args.net} is not a chain of dense layers and ReLUs")
    print("unstable ReLUs per layer:", [int(bounds.unstable(i).sum()) for i in range(len(bounds.lo))])
    if args.trace is not None:
        _TracedStack.every = args.trace
        bab_module.Stack = _TracedStack  # type: ignore[misc]
    deadline_module.time = types.SimpleNamespace(monotonic=time.process_time, time=time.time)
    for k in args.disjuncts:
        d = query.disjuncts[k]
        for mode in args.refine:
            layers = None if mode == "all" else int(mode)
            cpu, wall = _cpu(), time.monotonic()
            r = branch_and_bound(bounds, d.matrix, d.rhs, d.strict, Deadline.after(args.cpu),
                                 steps=args.steps, refine_layers=layers,
                                 shallow_first=args.shallow_first)
            print(f"{args.net} {args.prop} disjunct {k} refine_layers={mode} "
                  f"shallow_first={args.shallow_first}: {r.status}, "
                  f"{r.domains} domains, {_cpu() - cpu:.1f} CPU s, {time.monotonic() - wall:.1f} s wall "
                  f"{r.message}", flush=True)


if __name__ == "__main__":
    main()
