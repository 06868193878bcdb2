"""``smug-opt evaluate``: the paper's Table 1 (LSC, Win%, sparsity) and beyond, per method."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from smug_opt.backend_choice import DEFAULT_BACKEND
from smug_opt.cli.explain_robust import add_query_budget_options, query_budget
from smug_opt.cli.options import (
    add_executor_options,
    add_model_input_options,
    check_executor_options,
    check_model_arg,
    executor_from_args,
    input_range_arg,
    input_shape_arg,
)
from smug_opt.outputs import check_out_dir

if TYPE_CHECKING:
    from smug_opt.evaluate.boxes import Box

__all__ = ["add_parser", "run"]

SUITES = {"mnist-cnn": "mnist-cnn", "text": "text-cnn"}
"""The embedded suites and the embedded model each one evaluates."""


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "evaluate", help="score SMUG against baselines: LSC, Win%%, sparsity, deletion/insertion, ROAD, "
                                  "randomisation check",
        description="Evaluate saliency methods as in the paper's section 4. Without --model "
                    "an embedded suite is used (--suite mnist-cnn or text).")
    p.add_argument("--suite", choices=tuple(SUITES), help="embedded suite (default mnist-cnn)")
    p.add_argument("--model", help="an image classifier (with --images): a .keras/.h5, .onnx or .pt2 "
                   "file, or package.module:factory")
    add_model_input_options(p.add_argument_group("what an ONNX/PyTorch model does not say"))
    p.add_argument("--images", type=Path, help="a folder of images (.png/.jpg/.npy)")
    p.add_argument("--specs", type=Path, help="a folder of VNN-LIB robustness specs (.vnnlib[.gz]): "
                   "evaluate on the test images they bound, with their labels (instead of --images)")
    p.add_argument("--boxes", type=Path, help="CSV name,top,left,bottom,right of ground-truth boxes")
    p.add_argument("--pixel-scale", type=float, default=255.0,
                   help="divide --images pixels by this (default 255)")
    p.add_argument("--methods", help="comma-separated methods (default: those the model declares, "
                   "all that apply)")
    p.add_argument("--n", type=int, default=200, help="inputs of an embedded suite (default 200)")
    p.add_argument("--backend", default=DEFAULT_BACKEND,
                   help=f"backend for smug (default {DEFAULT_BACKEND})")
    smug_defaults = _defaults_help()
    p.add_argument("--k", type=int, help=f"SMUG neurons (default: the model's own; {smug_defaults})")
    p.add_argument("--gamma", type=float, help="SMUG γ (default: the model's own, 0 for every "
                   "embedded model)")
    p.add_argument("--cell", type=int, help="SMUG cell size, also the deletion/insertion grid "
                   "(default: the model's own)")
    p.add_argument("--eps", type=float, help="method robust: how far each free pixel may move (L∞, the "
                   "model's input units, e.g. 0.05 on [0, 1] digits)")
    add_query_budget_options(p)
    p.add_argument("--time-limit", type=float, default=60.0, help="seconds per solve (default 60)")
    p.add_argument("--road-levels", type=_fractions, metavar="P,P,...",
                   help="fractions of pixels ROAD removes (default 0.1,0.2,...,0.9)")
    p.add_argument("--curve-steps", type=int, default=100, metavar="N",
                   help="points of each deletion/insertion curve (default 100)")
    p.add_argument("--sanity-stages", type=int, default=0, metavar="N",
                   help="run the model-randomisation sanity check (Adebayo et al. 2018) with N "
                        "stages of the top-down cascade (default 0: off)")
    p.add_argument("--out", type=Path, default=Path("eval"),
                   help="output folder (default eval/); each finished input is kept there")
    p.add_argument("--resume", action="store_true",
                   help="continue an interrupted run in --out (same flags), skipping finished inputs")
    p.add_argument("--overwrite", action="store_true", help="replace a previous run in --out")
    p.add_argument("--chunk", type=int, default=4, help="inputs per task (default 4)")
    add_executor_options(p, what="tasks (chunks of inputs)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def _fractions(text: str) -> tuple[float, ...]:
    """``0.1,0.5,0.9`` → fractions strictly between 0 and 1."""
    try:
        values = tuple(float(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated fractions, got {text!r}") from None
    if not values or not all(0 < v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"every fraction must be strictly between 0 and 1, got {text!r}")
    return values


def _check_args(args: argparse.Namespace) -> None:
    """Reject bad flags before any model loads."""
    checks = [
        (args.n < 1, f"--n must be at least 1, got {args.n}"),
        (args.k is not None and args.k < 1, f"--k must be at least 1, got {args.k}"),
        (args.cell is not None and args.cell < 1, f"--cell must be at least 1, got {args.cell}"),
        (args.gamma is not None and not args.gamma >= 0, f"--gamma must be at least 0, got {args.gamma}"),
        (not args.time_limit > 0, f"--time-limit must be positive, got {args.time_limit:g}"),
        (not args.pixel_scale > 0, f"--pixel-scale must be positive, got {args.pixel_scale:g}"),
        (args.chunk < 1, f"--chunk must be at least 1, got {args.chunk}"),
        (args.curve_steps < 1, f"--curve-steps must be at least 1, got {args.curve_steps}"),
        (args.eps is not None and not args.eps > 0, f"--eps must be positive, got {args.eps}"),
        (_robust(args) and args.eps is None, "--methods robust needs --eps (e.g. 0.05)"),
        (not _robust(args) and (args.query_work is not None or args.query_time is not None),
         "--query-work and --query-time are for --methods robust"),
        (args.sanity_stages < 0, f"--sanity-stages must be at least 0, got {args.sanity_stages}"),
        (args.images is not None and args.specs is not None, "give --images or --specs, not both"),
        ((args.images is None and args.specs is None) != (args.model is None),
         "--model goes with --images or --specs"),
        (args.specs is not None and not args.specs.is_dir(), f"--specs {args.specs} is not a folder"),
        (args.suite is not None and args.model is not None, "give --suite or --model/--images, not both"),
        (args.images is not None and not (args.images or Path()).is_dir(),
         f"--images {args.images} is not a folder"),
    ]
    for bad, message in checks:
        if bad:
            raise ValueError(message)
    if args.methods is None or {"smug", "robust"} & set(args.methods.split(",")):
        from smug_opt.backend_choice import BackendChoice

        args.backend = BackendChoice.parse(args.backend)  # parsed once; unknown names fail here
    if _robust(args):
        query_budget(args)
    check_executor_options(args)
    if args.model is not None:
        check_model_arg(args.model)
    check_out_dir(args.out)


def _robust(args: argparse.Namespace) -> bool:
    return args.methods is not None and "robust" in args.methods.split(",")


def _defaults_help() -> str:
    """The embedded models' SMUG defaults, for the help text: ``mnist-cnn k=200 cell=2, ...``."""
    from smug_opt.models import zoo
    from smug_opt.models.description import GENERIC_IMAGE_MODEL

    own = ", ".join(f"{m}: k={zoo.description(m).smug.k}, cell={zoo.description(m).smug.cell}"
                    for m in SUITES.values())
    generic = GENERIC_IMAGE_MODEL.smug
    return f"{own}; a model file: k={generic.k}, cell={generic.cell}"


def _methods(text: str | None, default: tuple[str, ...]) -> list[str]:
    from smug_opt.evaluate import METHODS

    names = [m.strip() for m in text.split(",") if m.strip()] if text else list(default)
    unknown = [m for m in names if m not in METHODS]
    if unknown:
        raise ValueError(f"unknown method(s) {', '.join(unknown)}; choose from {', '.join(METHODS)}")
    return names


def run(args: argparse.Namespace) -> int:
    _check_args(args)
    from smug_opt.batch import ModelRef
    from smug_opt.evaluate import evaluate
    from smug_opt.evaluate.report import table_markdown
    from smug_opt.evaluate.road import ROAD_LEVELS
    from smug_opt.models import zoo
    from smug_opt.models.catalog import describe

    model: ModelRef | str
    softmax, mask_id = False, 0
    boxes: list[Box | None] | None = None
    rationales: np.ndarray | None = None
    names: list[str] | None = None
    if args.model is not None:
        from smug_opt.evaluate import align_boxes, load_boxes_csv, load_image_folder
        from smug_opt.inputs import image_size
        from smug_opt.models.resolve import as_adapter

        ref = ModelRef(args.model, input_shape_arg(args.input_shape), args.input_layout,
                       input_range_arg(args.input_range))
        adapter = as_adapter(args.model, input_shape=ref.input_shape, input_layout=ref.input_layout,
                             input_range=ref.input_range)
        methods = _methods(args.methods, describe(str(args.model)).evaluation_methods)
        size = image_size(tuple(adapter.input_shape))
        if args.specs is not None:
            inputs, spec_labels, names = _spec_inputs(args.specs, adapter)
            outputs = np.asarray(adapter.predict(inputs))
            labels = spec_labels
        else:
            if size is None:
                raise ValueError(f"--model {args.model} reads inputs of shape "
                                 f"{tuple(adapter.input_shape)}, not a picture: --images needs an "
                                 "image model (or a flat input of H×H values)")
            images, names = load_image_folder(args.images, size=size)
            _say_resized(args.images, size)
            lo, hi = ref.input_range or (0.0, 255.0 / args.pixel_scale)
            inputs = lo + images.astype(np.float64) / 255.0 * (hi - lo)
            outputs = np.asarray(adapter.predict(inputs))
            labels = np.argmax(outputs, axis=1)  # explain what the model predicts
        if outputs.ndim == 2 and outputs.shape[1] > 1 and not _probabilities(outputs):
            softmax = True
            print("smug-opt evaluate: the model outputs logits (rows are not probabilities); "
                  "confidences are their softmax", file=sys.stderr)
        if args.boxes is not None:
            boxes = align_boxes(names, load_boxes_csv(args.boxes))
        model = ref
    else:
        suite = args.suite or "mnist-cnn"
        model = SUITES[suite]
        methods = _methods(args.methods, describe(model).evaluation_methods)
        if suite == "text":
            from smug_opt.data.text import load_reviews

            reviews = load_reviews()
            n = min(args.n, len(reviews.x_test))
            inputs, labels = reviews.x_test[:n], reviews.y_test[:n]
            rationales = reviews.rationale_test[:n]
            padding = describe(model).padding_token
            if padding is None:
                raise ValueError(f"the {suite} suite's model {model} declares no padding token")
            mask_id = padding
        else:
            from smug_opt.data.mnist import pick_test_digits

            indices, inputs, labels = pick_test_digits(args.n)
            names = [f"test digit #{int(i)}" for i in indices]
        zoo.load(model, progress=not args.quiet)  # trains and caches it on first use
    with executor_from_args(args) as executor:
        budget = {"query_work": query_budget(args), "query_time": args.query_time} if _robust(args) else {}
        result = evaluate(model, inputs, labels, methods, backend=args.backend, k=args.k, eps=args.eps,
                          **budget,
                          gamma=args.gamma, cell=args.cell, time_limit=args.time_limit,
                          sanity_stages=args.sanity_stages, curve_steps=args.curve_steps,
                          road_levels=ROAD_LEVELS if args.road_levels is None else args.road_levels,
                          executor=executor, chunk_size=args.chunk, out_dir=args.out,
                          resume=args.resume, overwrite=args.overwrite, progress=not args.quiet,
                          softmax=softmax, mask_id=mask_id, boxes=boxes, rationales=rationales,
                          names=names)
    print(table_markdown(result.summaries))
    for name, path in result.files.items():
        print(f"wrote {name}: {path}", file=sys.stderr)
    return 0


def _spec_inputs(folder: Path, adapter: object) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """The specs' images and labels, saying how many the model classifies otherwise."""
    from smug_opt.evaluate.loaders import load_spec_images

    view = getattr(adapter, "input_view", None)
    if view is None:
        raise ValueError("--specs needs an ONNX or PyTorch model (the specs bound its inputs in its "
                         "own layout)")
    inputs, labels, names = load_spec_images(folder, view)
    predicted = np.argmax(np.asarray(adapter.predict(inputs)), axis=1)  # type: ignore[attr-defined]
    wrong = int((predicted != labels).sum())
    print(f"smug-opt evaluate: {len(names)} image(s) recovered from the specs in {folder}; the model "
          f"classifies {wrong} of them otherwise than the spec's label (each is explained for its label)",
          file=sys.stderr)
    return inputs, labels, names


def _say_resized(folder: Path, size: tuple[int, int]) -> None:
    """One line naming the images resized to the model's input (the rule explain follows too)."""
    from smug_opt.bounded import open_image
    from smug_opt.inputs import IMAGE_SUFFIXES

    resized = []
    for path in sorted(folder.iterdir()):
        if path.suffix.lower() in IMAGE_SUFFIXES:
            with open_image(path) as img:
                if (img.height, img.width) != tuple(size):
                    resized.append(f"{path.name} ({img.height}x{img.width})")
    if resized:
        print(f"smug-opt evaluate: resized {len(resized)} image(s) to the model's {size[0]}x{size[1]} "
              f"input (bilinear): {', '.join(resized[:5])}{' ...' if len(resized) > 5 else ''}",
              file=sys.stderr)


def _probabilities(outputs: np.ndarray) -> bool:
    """Whether every row of a (N, K) output is a probability vector."""
    return bool(np.all((outputs >= 0) & (outputs <= 1)) and np.allclose(outputs.sum(axis=1), 1.0, atol=1e-3))
