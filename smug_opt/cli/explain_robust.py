"""``smug-opt explain --method robust``: the pixels that, kept fixed, provably keep the
prediction while every other pixel moves within ε; ``--minimum`` searches the smallest
such set and proves a lower bound on its size."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import numpy as np

from smug_opt.cli.embedded_inputs import embedded_example, say
from smug_opt.query_work import DEFAULT_QUERY_WORK, Work, parse_work

__all__ = ["add_query_budget_options", "add_robust_options", "check_robust_args", "query_budget",
           "run_robust"]


def add_robust_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("verified explanation (--method robust)")
    g.add_argument("--eps", type=float,
                   help="how far every pixel outside the explanation may move (L∞, in the model's "
                        "input units before any in-graph normalisation, clipped to its input range; "
                        "VeriX's protocol: 0.05 on [0, 1] digits)")
    g.add_argument("--minimum", action="store_true",
                   help="also search the smallest explanation (implicit hitting sets), reporting "
                        "its size, a proven lower bound and the gap; half of --time-limit goes to it")
    add_query_budget_options(g)


def add_query_budget_options(g: Any) -> None:
    """``--query-work`` and ``--query-time``: each robustness query's budget (an argument
    group or parser)."""
    w = DEFAULT_QUERY_WORK
    g.add_argument("--query-work", metavar="DOMAINS,NODES[,RELU_DOMAINS]", default=None,
                   help=f"each robustness query's budget in counted work: branch and bound domains (and "
                        f"domains times the network's ReLUs) and MILP nodes per disjunct (0: no MILP); "
                        f"default {w.domains},{w.milp_nodes},{w.relu_domains}: the explanation does not "
                        f"depend on the machine's load; --time-limit bounds the whole run")
    g.add_argument("--query-time", type=float, default=None,
                   help="seconds per robustness query instead of --query-work (the explanation "
                        "then depends on the load)")


def check_robust_args(args: argparse.Namespace) -> None:
    """Refuse flags that do not fit the method, before any model loads."""
    robust = args.method == "robust"
    if not robust and (args.eps is not None or args.minimum):
        raise ValueError("--eps and --minimum are for --method robust")
    if not robust and (args.query_work is not None or args.query_time is not None):
        raise ValueError("--query-work and --query-time are for --method robust")
    if not robust:
        return
    if args.eps is None or not args.eps > 0:
        raise ValueError(f"--method robust needs a positive --eps (e.g. 0.05), got {args.eps}")
    query_budget(args)
    if args.tokens is not None:
        raise ValueError("--method robust explains pictures and vectors, not --tokens")


def run_robust(args: argparse.Namespace, name: str) -> int:
    """Explain one input with :func:`smug_opt.robustness.explain_robust` and write
    ``record.json``, ``fixed.npy`` and ``overlay.png`` to ``--out``."""
    from smug_opt.backend_choice import BackendChoice
    from smug_opt.cli import EXIT_ERROR
    from smug_opt.cli.solve import solver_kwargs
    from smug_opt.models.catalog import describe
    from smug_opt.models.network_stem import read_network_stem
    from smug_opt.models.resolve import network_of
    from smug_opt.models.zoo import available_models
    from smug_opt.outputs import write_single_run
    from smug_opt.robustness.model_explanation import explain_robust

    backend = BackendChoice.parse(args.backend)
    say(args, f"loading model {name}")
    network = network_of(name, input_shape=args.input_shape, input_layout=args.input_layout,
                         input_range=args.input_range)
    info: dict[str, Any] = {"model": name}
    if args.input is not None:
        from smug_opt.inputs import load_input

        view_shape = read_network_stem(network).input_view.view_shape
        x, _ = load_input(args.input, tuple(view_shape), args.pixel_scale,
                          args.preprocess or describe(name).image_preprocessing, args.input_range)
        info["input"] = str(args.input)
    elif name in available_models():
        x, extra = embedded_example(name, args.index, None)
        info |= extra
    else:
        raise ValueError("--model was given without --input")
    kwargs = solver_kwargs(args)
    options = {key: kwargs[key] for key in ("threads", "seed", "extras")}
    work = query_budget(args)
    per_query = f"{args.query_time:g}s per query" if work is None else work.describe()
    say(args, f"robust explanation, eps {args.eps:g}{', minimum' if args.minimum else ''}, "
               f"backend {backend} (limit {args.time_limit:g}s, {per_query})")
    timed = {} if args.query_time is None else {"query_time": args.query_time}
    result = explain_robust(network, x, eps=args.eps, minimum=args.minimum, time_limit=args.time_limit,
                            backend=backend, target=args.target, solve_options=options, query_work=work,
                            **timed)
    picture = np.asarray(x, dtype=np.float64)
    if picture.ndim < 2 and round(picture.size ** 0.5) ** 2 == picture.size:
        side = round(picture.size ** 0.5)
        picture = picture.reshape(side, side)
    out = args.out
    shown = picture if picture.ndim >= 2 else None
    removed = write_single_run(out, lambda staged: result.save(staged, shown, info=info))
    if removed:
        say(args, f"replaced the previous run's files in {out}/ ({', '.join(removed)})")
    print(_summary(result, name))
    print(f"wrote {out}/")
    if not result.check.passed:
        print("the attack re-check found a counterexample to the explanation: please report this",
              file=sys.stderr)
        return EXIT_ERROR
    return 0


def query_budget(args: argparse.Namespace) -> Work | None:
    """The work budget per query (None: ``--query-time``'s seconds), checked against the
    backend: a MILP node count needs a backend with a node limit."""
    if args.query_time is not None and args.query_work is not None:
        raise ValueError("give --query-work or --query-time, not both")
    if args.query_time is not None:
        if not args.query_time > 0:
            raise ValueError(f"--query-time must be positive, got {args.query_time:g}")
        return None
    work = DEFAULT_QUERY_WORK if args.query_work is None else parse_work(args.query_work)
    try:
        work.solver_extras(args.backend)
    except ValueError as exc:
        raise ValueError(f"{exc} (--query-time S), or no MILP (--query-work "
                         f"{work.domains},0)") from None
    return work


def _summary(result: Any, name: str) -> str:
    s = result.subset
    line = (f"robust on {name}: class {result.label}, {result.size}/{result.x.size} values fixed at "
            f"eps {result.eps:g} (proof {result.proof}); subset-minimal {s.size}"
            + ("" if s.subset_minimal else f" ({s.undecided} undecided)"))
    m = result.minimum
    if m is not None:
        line += (f"; minimum {m.size}, lower bound {m.lower_bound}, gap {m.gap}"
                 + (" (proven)" if m.proven else f" ({m.message})" if m.message else ""))
    check = "passed" if result.check.passed else "FAILED"
    return line + f"; PGD re-check {check}; {result.seconds:.1f}s"
