"""``smug-opt evaluate``: the paper's Table 1 (LSC, Win%, sparsity) and beyond, per method."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

__all__ = ["add_parser", "run"]

SUITES = ("mnist-cnn", "text")
DEFAULT_METHODS = {
    "mnist-cnn": "smug,smug_base,ig,gradcam,centerbox,maxbox,optbox,groundtruth",
    "text": "smug,smug_base,ig,sis",
    "images": "smug,smug_base,ig,gradcam,centerbox,maxbox,optbox",
}


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "evaluate", help="score SMUG against baselines: LSC, Win%%, sparsity, deletion/insertion",
        description="Evaluate saliency methods as in the paper's section 4. Without --model "
                    "an embedded suite is used (--suite mnist-cnn or text).")
    p.add_argument("--suite", choices=SUITES, help="embedded suite (default mnist-cnn)")
    p.add_argument("--model", help="a .keras/.h5 image classifier (with --images)")
    p.add_argument("--images", type=Path, help="a folder of images (.png/.jpg/.npy)")
    p.add_argument("--boxes", type=Path, help="CSV name,top,left,bottom,right of ground-truth boxes")
    p.add_argument("--pixel-scale", type=float, default=255.0,
                   help="divide --images pixels by this (default 255)")
    p.add_argument("--methods", help="comma-separated methods (default: all that apply)")
    p.add_argument("--n", type=int, default=200, help="inputs of an embedded suite (default 200)")
    p.add_argument("--backend", default="highs", help="backend for smug (default highs)")
    p.add_argument("--k", type=int, default=100, help="SMUG neurons (default 100)")
    p.add_argument("--gamma", type=float, default=0.5, help="SMUG γ (default 0.5)")
    p.add_argument("--cell", type=int, default=2, help="SMUG cell size (default 2)")
    p.add_argument("--time-limit", type=float, default=60.0, help="seconds per solve (default 60)")
    p.add_argument("--workers", type=int, default=1, help="inputs evaluated in parallel (default 1)")
    p.add_argument("--out", type=Path, default=Path("eval"), help="output folder (default eval/)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def _methods(text: str | None, default: str) -> list[str]:
    from smug_opt.evaluate import METHODS

    names = [m.strip() for m in (text or default).split(",") if m.strip()]
    unknown = [m for m in names if m not in METHODS]
    if unknown:
        raise ValueError(f"unknown method(s) {', '.join(unknown)}; choose from {', '.join(METHODS)}")
    return names


def run(args: argparse.Namespace) -> int:
    from smug_opt.evaluate import evaluate
    from smug_opt.evaluate.report import table_markdown
    from smug_opt.models import zoo

    extra: dict[str, object] = {}
    if args.images is not None or args.model is not None:
        if args.images is None or args.model is None:
            raise ValueError("--model and --images go together")
        from smug_opt.evaluate import align_boxes, load_boxes_csv, load_image_folder
        from smug_opt.explain import as_adapter

        model = as_adapter(args.model)
        images, names = load_image_folder(args.images, size=model.input_shape[:2])
        inputs = images.astype(np.float64) / args.pixel_scale
        labels = np.argmax(model.predict(inputs), axis=1)  # explain what the model predicts
        if args.boxes is not None:
            extra["boxes"] = align_boxes(names, load_boxes_csv(args.boxes))
        methods = _methods(args.methods, DEFAULT_METHODS["images"])
        target = model
    else:
        suite = args.suite or "mnist-cnn"
        methods = _methods(args.methods, DEFAULT_METHODS[suite])
        if suite == "text":
            from smug_opt.data.text import PAD_ID, load_reviews

            reviews = load_reviews()
            n = min(args.n, len(reviews.x_test))
            inputs, labels = reviews.x_test[:n], reviews.y_test[:n]
            extra |= {"rationales": reviews.rationale_test[:n], "mask_id": PAD_ID}
            target = zoo.load("text-cnn", progress=not args.quiet)
        else:
            from smug_opt.data.mnist import pick_test_digits

            _, inputs, labels = pick_test_digits(args.n)
            target = zoo.load("mnist-cnn", progress=not args.quiet)
    result = evaluate(target, inputs, labels, methods, backend=args.backend, k=args.k,
                      gamma=args.gamma, cell=args.cell, time_limit=args.time_limit,
                      workers=args.workers, out_dir=args.out, progress=not args.quiet, **extra)
    print(table_markdown(result.summaries))
    for name, path in result.files.items():
        print(f"wrote {name}: {path}", file=sys.stderr)
    return 0
