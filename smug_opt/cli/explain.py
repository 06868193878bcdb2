"""``smug-opt explain``: a SMUG mask and saliency map for one input, on any backend."""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np

from smug_opt.backend_choice import BackendChoice
from smug_opt.batch import ExplainSettings
from smug_opt.cli.embedded_inputs import embedded_example, say
from smug_opt.cli.explain_output import certificate_beside, ig_progress, render_explanation
from smug_opt.cli.explain_robust import add_robust_options, check_robust_args, query_budget, run_robust
from smug_opt.cli.options import (
    add_executor_options,
    add_model_input_options,
    check_executor_options,
    check_model_arg,
    executor_from_args,
    input_range_arg,
    input_shape_arg,
)
from smug_opt.cli.solve import (
    add_certificate_options,
    add_solver_options,
    check_certificate_options,
    solver_kwargs,
)
from smug_opt.executors import ExecutorKind
from smug_opt.inputs import PREPROCESSING_MODES
from smug_opt.models.catalog import describe
from smug_opt.outputs import check_out_dir, write_single_run
from smug_opt.parameters import Baseline, Method, SmugParameters

__all__ = ["add_parser", "run"]




def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "explain", help="explain one prediction: minimal mask + saliency map",
        description="Explain a model's prediction with SMUG. Without --model, an embedded "
                    "model trained on real MNIST digits explains a held-out digit.")
    src = p.add_argument_group("model and input")
    src.add_argument("--model", help="a .keras/.h5, .onnx or torch.export .pt2 file, "
                     "package.module:factory (a callable returning a torch.nn.Module), or an "
                     "embedded model (mnist-cnn, mnist-mlp, mnist-mlp-deep, mnist-resnet, "
                     "text-cnn; default mnist-cnn)")
    src.add_argument("--input", type=Path,
                     help="an image (.png/.jpg) or an array (.npy); a folder of them, or an .npy "
                          "holding one input per row, explains each (a batch run: records.jsonl, "
                          "arrays/*.npz, summary.md). Images of another size are resized to the "
                          "model's input (bilinear); arrays never are")
    src.add_argument("--tokens", help="a text to explain (embedded text model's vocabulary: "
                     "see --list-vocab; unknown words become <unk>, with a warning)")
    src.add_argument("--list-vocab", action="store_true",
                     help="print the embedded text model's vocabulary and exit")
    src.add_argument("--index", type=int, default=0,
                     help="which held-out example of the embedded data (default 0)")
    src.add_argument("--pixel-scale", type=float, default=255.0,
                     help="divide image pixels by this (default 255: [0, 1] inputs)")
    src.add_argument("--preprocess", choices=PREPROCESSING_MODES,
                     help="how image pixels become model inputs: unit = divide by --pixel-scale "
                          "(default, but the model's own for an embedded one: raw for "
                          "efficientnet-lite0); raw = 0-255 (EfficientNet, ConvNeXt); tf = [-1, 1] "
                          "(MobileNetV2, InceptionV3); caffe = BGR minus the ImageNet means "
                          "(VGG16, ResNet50); torch = ImageNet standardisation (DenseNet121)")
    add_model_input_options(src)
    src.add_argument("--grid", help="override the mask grid of a flat dense input, e.g. 28x28 "
                     "(normally it follows from the model and the input)")
    smug = p.add_argument_group("SMUG")
    own, generic = _defaults_help()
    smug.add_argument("--method", choices=tuple(m.value for m in Method),
                      help=f"default {generic.method}")
    smug.add_argument("--k", type=int, help=f"neurons to keep active (default: the model's own; "
                      f"a model file {generic.k}; {own('k')})")
    smug.add_argument("--gamma", type=float, help=f"activity threshold γ (default: the model's own; "
                      f"a model file {generic.gamma:g}; {own('gamma')})")
    smug.add_argument("--cell", type=int, help=f"mask cell size in pixels/tokens (default: the "
                      f"model's own; a model file {generic.cell}; {own('cell')})")
    smug.add_argument("--steps", type=int, help=f"Integrated Gradients steps (default: the model's "
                      f"own; a model file {generic.steps})")
    smug.add_argument("--baseline", choices=tuple(b.value for b in Baseline),
                      help="what a masked pixel becomes: zero = 0 after preprocessing (the paper's), "
                           "black = a black picture, mean = the training data's mean pixel, blur = "
                           f"a blurred copy of the input (default: the model's own; a model file "
                           f"{generic.baseline})")
    smug.add_argument("--target", type=int, help="class to explain (default: the prediction)")
    smug.add_argument("--ig-batch", type=int, help="Integrated Gradients points per batch "
                      "(default: sized from the model's memory footprint)")
    add_robust_options(p)
    add_solver_options(p)
    add_certificate_options(p, extra="; the problem it is about is written beside it (FILE with "
                                     "the suffix .smug). Single inputs only")
    p.add_argument("--out", type=Path, default=Path("results"),
                   help="output folder (default results/); a single explain replaces the "
                        "previous run's files there")
    batch = p.add_argument_group("batch runs (--input FOLDER or an .npy of many inputs)")
    batch.add_argument("--resume", action="store_true",
                       help="continue the batch run in --out, skipping finished inputs")
    batch.add_argument("--overwrite", action="store_true",
                       help="replace a previous batch run in --out")
    batch.add_argument("--overlays", action="store_true", help="also write overlays/NAME.png per image")
    batch.add_argument("--chunk", type=int, default=8, help="inputs per task (default 8)")
    add_executor_options(p, what="tasks (chunks of inputs)")
    p.add_argument("--quiet", action="store_true", help="no progress messages")
    return p


def _defaults_help() -> tuple[Any, SmugParameters]:
    """For the help text: a function naming the embedded models' defaults for one
    parameter, and the defaults of a model file."""
    from smug_opt.models import zoo
    from smug_opt.models.description import GENERIC_IMAGE_MODEL

    def own(parameter: str) -> str:
        return "embedded: " + ", ".join(f"{name} {getattr(zoo.description(name).smug, parameter)}"
                                        for name in zoo.available_models())

    return own, GENERIC_IMAGE_MODEL.smug


def _check_args(args: argparse.Namespace) -> None:
    """Reject bad flags before any model loads (a few milliseconds, not seconds)."""
    checks = [
        (args.k is not None and args.k < 1, f"--k must be at least 1, got {args.k}"),
        (args.cell is not None and args.cell < 1, f"--cell must be at least 1, got {args.cell}"),
        (args.steps is not None and args.steps < 1, f"--steps must be at least 1, got {args.steps}"),
        (not args.time_limit > 0, f"--time-limit must be positive, got {args.time_limit:g}"),
        (args.gamma is not None and not args.gamma >= 0,
         f"--gamma must be at least 0 (each kept neuron stays above gamma times its activation), "
         f"got {args.gamma}"),
        (args.target is not None and args.target < 0, f"--target must be a class index ≥ 0, "
                                                       f"got {args.target}"),
        (not args.pixel_scale > 0, f"--pixel-scale must be positive, got {args.pixel_scale:g}"),
        (args.chunk < 1, f"--chunk must be at least 1, got {args.chunk}"),
        (args.ig_batch is not None and args.ig_batch < 1, f"--ig-batch must be at least 1, got "
                                                          f"{args.ig_batch}"),
    ]
    for bad, message in checks:
        if bad:
            raise ValueError(message)
    check_robust_args(args)
    if args.method in (None, Method.SMUG.value, Method.ROBUST.value):
        BackendChoice.parse(args.backend)  # an unknown or unusable backend: the installed ones are named
    check_executor_options(args)
    args.input_range = input_range_arg(args.input_range)
    args.input_shape = input_shape_arg(args.input_shape)
    if args.input_range is not None and (args.preprocess not in (None, "unit")
                                       or args.pixel_scale != 255.0):
        raise ValueError("give --input-range or --preprocess/--pixel-scale, not both: with "
                         "--input-range image pixels map linearly onto the model's range")
    if args.model is not None:
        check_model_arg(args.model)
    if args.input is not None and not args.input.exists():
        raise FileNotFoundError(f"--input {args.input}: no such file or folder")
    if args.input is not None and args.tokens is not None:
        raise ValueError("give --input or --tokens, not both")
    if args.tokens is not None and not re.findall(r"[\w']+", args.tokens):
        raise ValueError(f"--tokens {args.tokens!r} holds no word to explain")
    check_out_dir(args.out)
    check_certificate_options(args)


def _settings(args: argparse.Namespace, name: str) -> ExplainSettings:
    """The flags over the model's own defaults (:func:`~smug_opt.models.catalog.describe`)."""
    kwargs = solver_kwargs(args)
    options = {key: value for key, value in kwargs.items()
               if key not in ("backend", "time_limit", "memory_limit_mb")}
    return ExplainSettings.for_model(
        name, method=args.method, k=args.k, gamma=args.gamma, cell=args.cell, steps=args.steps,
        baseline=args.baseline, eps=args.eps, minimum=args.minimum or None, query_time=args.query_time,
        query_work=query_budget(args) if args.method == Method.ROBUST.value else None,
        backend=kwargs["backend"], target=args.target,
        time_limit=float(kwargs["time_limit"]), memory_limit_mb=kwargs["memory_limit_mb"],
        grid_shape=_grid(args.grid),
        solver_options=options, pixel_scale=args.pixel_scale,
        preprocessing=args.preprocess or describe(name).image_preprocessing,
        ig_batch=args.ig_batch, input_range=args.input_range)


def _npy_rows(path: Path) -> tuple[int, ...] | None:
    """The shape of an .npy file without reading its data (None for other files)."""
    if path.suffix.lower() != ".npy" or not path.is_file():
        return None
    from smug_opt.bounded import check_npy_file

    try:
        return check_npy_file(path, mapped=True)  # a batch's rows are read as used
    except ValueError as exc:
        raise ValueError(f"--input {exc}") from None


def _list_vocab() -> int:
    from smug_opt.data.text import NEGATIVE_WORDS, POSITIVE_WORDS, default_vocabulary

    vocab = default_vocabulary()
    print(f"positive words: {' '.join(POSITIVE_WORDS)}")
    print(f"negative words: {' '.join(NEGATIVE_WORDS)}")
    fillers = [w for w in vocab.words[2:] if w not in POSITIVE_WORDS and w not in NEGATIVE_WORDS]
    print(f"neutral filler words ({len(fillers)}): {' '.join(fillers)}")
    print(f"special: <pad> (id 0, fills the {vocab.seq_len} positions), <unk> (id 1, any other word)")
    return 0


def run(args: argparse.Namespace) -> int:
    if args.list_vocab:
        return _list_vocab()
    _check_args(args)
    from smug_opt.models.zoo import DEFAULT_IMAGE_MODEL, DEFAULT_TEXT_MODEL

    name = args.model or (DEFAULT_TEXT_MODEL if args.tokens else DEFAULT_IMAGE_MODEL)
    settings = _settings(args, name)
    if args.input is not None and args.input.is_dir():
        return _run_batch(args, name, settings, args.input)
    if args.method == Method.ROBUST.value:
        shape = _npy_rows(args.input) if args.input is not None else None
        if shape is not None and len(shape) >= 2:
            from smug_opt.models.resolve import network_of

            n_in = math.prod(network_of(name, input_shape=args.input_shape, input_layout=args.input_layout,
                                        input_range=args.input_range).input_shape)
            if math.prod(shape) != n_in and math.prod(shape[1:]) == n_in:  # one input per row
                return _run_batch(args, name, settings, args.input)
        return run_robust(args, name)
    batch_only = args.resume or args.overwrite or args.overlays or args.workers > 1
    if batch_only or args.executor is not ExecutorKind.LOCAL:
        shape = _npy_rows(args.input) if args.input is not None else None
        if shape is None or len(shape) < 2:
            raise ValueError("--resume, --overwrite, --overlays, --workers and --executor are for "
                             "batch runs: give --input FOLDER or an .npy with one input per row")
    from smug_opt.models import zoo

    embedded = name in zoo.available_models()
    say(args, f"loading model {name}")
    if embedded:
        zoo.load(name, progress=not args.quiet)  # trains and caches it on first use, with a bar
    adapter, info = _model_ref(args, name).load()
    shape = _npy_rows(args.input) if args.input is not None else None
    if shape is not None and math.prod(shape) != math.prod(adapter.input_shape) \
            and math.prod(shape[1:]) == math.prod(adapter.input_shape):
        return _run_batch(args, name, settings, args.input)
    return _run_single(args, name, settings, adapter, dict(info))


def _model_ref(args: argparse.Namespace, name: str) -> Any:
    from smug_opt.batch import ModelRef

    return ModelRef(name, args.input_shape, args.input_layout, args.input_range)


def _run_batch(args: argparse.Namespace, name: str, settings: ExplainSettings, source: Path) -> int:
    from smug_opt.batch import explain_many
    from smug_opt.cli import EXIT_ERROR, EXIT_NO_ANSWER, EXIT_OK

    if args.certificate is not None:
        raise ValueError("--certificate is for a single input, not a batch run (use `smug-opt "
                         "solve --certificate` on each problem)")

    inputs: Any = source if source.is_dir() else np.load(source, mmap_mode="r", allow_pickle=False)
    with executor_from_args(args) as executor:
        run = explain_many(_model_ref(args, name), source if source.is_dir() else np.asarray(inputs),
                           settings=settings, executor=executor, out=args.out, resume=args.resume,
                           overwrite=args.overwrite, overlays=args.overlays, chunk_size=args.chunk)
        if run.note:
            say(args, run.note)
        say(args, f"batch explain: {run.planned} inputs, {run.skipped} already done, "
                   f"{executor.describe()}")
        from tqdm import tqdm

        with tqdm(total=run.planned - run.skipped, desc="explain", unit="input", file=sys.stderr,
                  disable=args.quiet, dynamic_ncols=True) as bar, contextlib.closing(run):
            for item in run:  # closing: an interrupted run gives its folder's lock back at once
                bar.set_postfix_str(f"{item.name}: {item.record.get('status')}")
                bar.update()
    print(run.summary, end="")
    print(f"wrote {args.out}/ (records.jsonl, arrays/, summary.md)")
    if run.failed:
        print(f"{run.failed} inputs failed in their worker; run again with --resume to retry them",
              file=sys.stderr)
        return EXIT_ERROR
    if run.without_mask:
        print(f"{run.without_mask} of {run.planned} inputs ended without a mask (see summary.md)",
              file=sys.stderr)
        return EXIT_NO_ANSWER
    return EXIT_OK


def _run_single(args: argparse.Namespace, name: str, settings: ExplainSettings, adapter: Any,
                info: dict[str, Any]) -> int:
    from smug_opt.explanation import explain

    embedded = "model_test_accuracy" in info
    s = settings
    if args.input is not None:
        from smug_opt.inputs import load_input

        x, resized = load_input(args.input, adapter.input_shape, args.pixel_scale, s.preprocessing,
                                s.input_range)
        info["input"] = str(args.input)
        if resized:
            info["resized_from"] = list(resized)
            say(args, f"resized {args.input} from {resized[0]}x{resized[1]} to the model's "
                       f"{adapter.input_shape[0]}x{adapter.input_shape[1]} input")
    elif args.tokens is not None:
        if not describe(name).vocabulary:
            raise ValueError("--tokens needs the embedded text model's vocabulary; for your own "
                             "text model pass token ids with --input ids.npy")
        x, extra = embedded_example(name, args.index, args.tokens)
        info |= extra
    elif embedded:
        x, extra = embedded_example(name, args.index, None)
        info |= extra
    else:
        raise ValueError("--model was given without --input (or --tokens)")
    say(args, s.params.describe() + ("" if s.params.method is Method.SMUG_BASE
                                      else f", backend {s.backend} (limit {s.time_limit:g}s)"))
    padding = None
    pad = describe(name).padding_token
    if pad is not None:  # padding is no part of the text: always kept, never counted
        padding = np.asarray(x).reshape(-1) == pad
    e = explain(adapter, x, **s.explain_kwargs(), progress=None if args.quiet else ig_progress(),
                always_keep=padding)
    if describe(name).class_names is not None and adapter.num_outputs > 2:
        outputs = adapter.predict(np.asarray(x)[None])[0]
        info["top5"] = describe(name).top_classes(outputs, logits=adapter.output_kind == "linear")
    out = args.out

    def fill(staged: Path) -> None:
        e.save(staged)
        (staged / "record.json").write_text(json.dumps({**info, **e.record()}, indent=2) + "\n")
        if e.ok:
            render_explanation(e, x, name, info, staged)

    removed = write_single_run(out, fill)
    if removed:
        say(args, f"replaced the previous run's files in {out}/ ({', '.join(removed)})")
    r = e.result
    status = "no solver" if r is None else f"{r.status.name}: {r.exactness('mask')}"
    cells = e.grid.num_cells - (0 if e.fixed is None else int(e.fixed.sum()))
    unit = "tokens" if padding is not None and e.grid.cell == (1,) else "cells"
    mask = f"mask {e.mask_size}/{cells} {unit}" if e.ok else f"no mask (of {cells} {unit})"
    print(f"{e.method} on {name}: target {describe(name).class_label(e.target)}, {e.neurons.size} neurons, "
          f"{mask}, status {status}")
    print(f"wrote {out}/")
    if args.certificate is not None:
        seconds = s.time_limit if args.certificate_time is None else args.certificate_time
        print(f"certificate {certificate_beside(e, args.certificate, seconds)}")
    if not e.ok:
        from smug_opt.cli import EXIT_NO_ANSWER

        print(f"no mask: the solver's status is {status}"
              + (f" ({r.message})" if r is not None and r.message else ""), file=sys.stderr)
        return EXIT_NO_ANSWER
    return 0


def _grid(text: str | None) -> tuple[int, ...] | None:
    if not text:
        return None
    try:
        return tuple(int(v) for v in text.lower().split("x"))
    except ValueError:
        raise ValueError(f"--grid expects e.g. 28x28, got {text!r}") from None
