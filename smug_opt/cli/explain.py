"""``smug-opt explain``: a SMUG mask and saliency map for one input, on any backend."""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

from smug_opt.cli.solve import add_solver_options, solver_kwargs

__all__ = ["add_parser", "load_image", "run"]

EMBEDDED_IMAGE_MODEL = "mnist-cnn"
EMBEDDED_TEXT_MODEL = "text-cnn"
# presets for the embedded models (a 28×28 digit, 100-token reviews): the paper's k = 3000
# and 4×4 cells are sized for 224×224 ImageNet inputs
EMBEDDED_PRESETS = {"mnist-cnn": (200, 2), "mnist-mlp": (32, 2), "mnist-mlp-deep": (64, 2),
                    "text-cnn": (25, 1)}
PAPER_K, PAPER_CELL = 3000, 4


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "explain", help="explain one prediction: minimal mask + saliency map",
        description="Explain a model's prediction with SMUG. Without --model, an embedded "
                    "model trained on real MNIST digits explains a held-out digit.")
    src = p.add_argument_group("model and input")
    src.add_argument("--model", help="a .keras/.h5 file or an embedded model name "
                     "(mnist-cnn, mnist-mlp, mnist-mlp-deep, text-cnn; default mnist-cnn)")
    src.add_argument("--input", type=Path, help="an image (.png/.jpg) or an array (.npy)")
    src.add_argument("--tokens", help="a text to explain (embedded text model's vocabulary)")
    src.add_argument("--index", type=int, default=0,
                     help="which held-out example of the embedded data (default 0)")
    src.add_argument("--pixel-scale", type=float, default=255.0,
                     help="divide image pixels by this (default 255: [0, 1] inputs)")
    src.add_argument("--grid", help="read a flat dense input as an image, e.g. 28x28")
    smug = p.add_argument_group("SMUG")
    smug.add_argument("--method", choices=("smug", "smug_base"), default="smug")
    smug.add_argument("--k", type=int, help=f"neurons to keep active (default {PAPER_K}; "
                      "embedded models: 200 CNN, 32 MLP, 25 text)")
    smug.add_argument("--gamma", type=float, default=0.0, help="activity threshold γ (default 0)")
    smug.add_argument("--cell", type=int, help=f"mask cell size in pixels/tokens (default "
                      f"{PAPER_CELL}; embedded: 2 for digits, 1 for text)")
    smug.add_argument("--steps", type=int, default=64, help="Integrated Gradients steps (64)")
    smug.add_argument("--target", type=int, help="class to explain (default: the prediction)")
    add_solver_options(p)
    p.add_argument("--out", type=Path, default=Path("results"), help="output folder (results/)")
    p.add_argument("--quiet", action="store_true", help="no progress messages")
    return p


def load_image(path: Path, input_shape: tuple[int, ...], pixel_scale: float) -> np.ndarray:
    """An image or array file as one model input of ``input_shape``."""
    if not path.is_file():
        raise FileNotFoundError(f"no input file at {path}")
    if path.suffix.lower() == ".npy":
        x = np.load(path, allow_pickle=False).astype(np.float64)
    else:
        from PIL import Image, UnidentifiedImageError

        channels = input_shape[-1] if len(input_shape) == 3 else 1
        try:
            img = Image.open(path).convert("L" if channels == 1 else "RGB")
        except UnidentifiedImageError:
            raise ValueError(f"{path} is not an image PIL can read") from None
        x = np.asarray(img, dtype=np.float64) / pixel_scale
    if x.shape != input_shape and x.size == math.prod(input_shape):
        x = x.reshape(input_shape)  # (28, 28) → (28, 28, 1) or (784,)
    if x.shape != input_shape:
        raise ValueError(f"{path} holds shape {x.shape}; the model expects {input_shape}")
    return x


def _say(args: argparse.Namespace, message: str) -> None:
    if not args.quiet:
        print(f"smug-opt: {message}", file=sys.stderr, flush=True)


def _embedded_example(name: str, index: int, tokens: str | None) -> tuple[np.ndarray, dict[str, Any]]:
    if name == EMBEDDED_TEXT_MODEL:
        from smug_opt.data.text import default_vocabulary, load_reviews

        vocab = default_vocabulary()
        if tokens is not None:
            return vocab.encode(tokens), {"text": tokens}
        reviews = load_reviews()
        if not 0 <= index < len(reviews.x_test):
            raise ValueError(f"--index must be in [0, {len(reviews.x_test)}), got {index}")
        rationale = np.flatnonzero(reviews.rationale_test[index])
        return reviews.x_test[index], {"review_index": index, "label": int(reviews.y_test[index]),
                                       "rationale_positions": rationale.tolist()}
    from smug_opt.data.mnist import load_digits

    digits = load_digits()
    if not 0 <= index < len(digits.x_test):
        raise ValueError(f"--index must be in [0, {len(digits.x_test)}), got {index}")
    x = digits.x_test[index]
    if name.startswith("mnist-mlp"):
        x = x.reshape(-1)
    return x, {"digit_index": index, "label": int(digits.y_test[index])}


def run(args: argparse.Namespace) -> int:
    from smug_opt.explain import as_adapter, explain
    from smug_opt.models import zoo

    name = args.model or (EMBEDDED_TEXT_MODEL if args.tokens else EMBEDDED_IMAGE_MODEL)
    embedded = name in zoo.available_models()
    _say(args, f"loading model {name}")
    model = zoo.load(name, progress=not args.quiet) if embedded else name
    adapter = as_adapter(model)
    info: dict[str, Any] = {"model": name}
    if embedded:
        info["model_test_accuracy"] = zoo.test_accuracy(name)
    if args.input is not None:
        x = load_image(args.input, adapter.input_shape, args.pixel_scale)
        info["input"] = str(args.input)
    elif args.tokens is not None:
        if name != EMBEDDED_TEXT_MODEL:
            raise ValueError("--tokens needs the embedded text model's vocabulary; for your own "
                             "text model pass token ids with --input ids.npy")
        x, extra = _embedded_example(name, args.index, args.tokens)
        info |= extra
    elif embedded:
        x, extra = _embedded_example(name, args.index, None)
        info |= extra
    else:
        raise ValueError("--model was given without --input (or --tokens)")
    k_default, cell_default = EMBEDDED_PRESETS.get(name, (PAPER_K, PAPER_CELL))
    k = args.k if args.k is not None else k_default
    cell = args.cell if args.cell is not None else cell_default
    grid = _grid(args.grid) or (((28, 28)) if name.startswith("mnist-mlp") else None)
    kwargs = solver_kwargs(args)
    backend = kwargs.pop("backend")
    time_limit = kwargs.pop("time_limit")
    _say(args, f"{args.method}: k={k}, gamma={args.gamma}, cell={cell}"
               + ("" if args.method == "smug_base" else f", backend {backend} (limit {time_limit:g}s)"))
    e = explain(adapter, x, method=args.method, backend=str(backend), k=k, gamma=args.gamma,
                cell=cell, steps=args.steps, target=args.target, time_limit=float(time_limit),
                grid_shape=grid, solver_options=kwargs)
    out = e.save(args.out)
    record = {**info, **e.record()}
    (out / "record.json").write_text(json.dumps(record, indent=2) + "\n")
    if e.ok:
        _render(e, x, name, info, out)
    r = e.result
    status = "no solver" if r is None else f"{r.status.name} ({r.verification})"
    print(f"{args.method} on {name}: target {e.target}, {e.neurons.size} neurons, "
          f"mask {e.mask_size}/{e.grid.num_cells} cells, status {status}")
    print(f"wrote {out}/")
    return 0 if e.ok else 1


def _render(e: Any, x: np.ndarray, name: str, info: dict[str, Any], out: Path) -> None:
    from smug_opt import render

    if len(e.grid.spatial_shape) >= 2:
        hw = e.grid.spatial_shape[:2]
        saliency = e.saliency.reshape((*hw, -1)).max(axis=-1)
        render.overlay_png(x.reshape((*hw, -1)), saliency, out / "overlay.png")
        return
    if name == EMBEDDED_TEXT_MODEL:
        from smug_opt.data.text import default_vocabulary

        words = default_vocabulary().decode(np.asarray(x))
    else:
        words = [str(int(t)) for t in np.asarray(x).reshape(-1)]
    rationale = None
    if "rationale_positions" in info:
        rationale = np.zeros(len(words), dtype=bool)
        rationale[info["rationale_positions"]] = True
    render.text_html(words, e.saliency, out / "explanation.html", rationale=rationale,
                     title=f"SMUG explanation (target {e.target})")
    kept = e.saliency.reshape(-1) > 0
    shown = [w for w, pad in zip(words, np.asarray(x).reshape(-1) == 0, strict=True) if not pad]
    print(render.text_terminal(shown, e.saliency.reshape(-1)[: len(shown)]))
    if rationale is not None:
        hits = int((kept & rationale).sum())
        print(f"planted rationale: {hits}/{int(rationale.sum())} recalled, "
              f"precision {hits / max(int(kept.sum()), 1):.2f}")


def _grid(text: str | None) -> tuple[int, ...] | None:
    if not text:
        return None
    try:
        return tuple(int(v) for v in text.lower().split("x"))
    except ValueError:
        raise ValueError(f"--grid expects e.g. 28x28, got {text!r}") from None
