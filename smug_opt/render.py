"""Pictures of explanations: PNG overlays for images, HTML and terminal colours for text."""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from smug_opt.explanation import display_scale

__all__ = ["overlay_png", "overlay_title", "text_html", "text_terminal"]

LEGEND = "left: input; right: kept cells in red (brighter = larger IG score), the rest dimmed"


def _gray(image: np.ndarray) -> np.ndarray:
    img = np.asarray(image, dtype=np.float64)
    if img.ndim == 3:
        img = img.mean(axis=2) if img.shape[2] != 1 else img[..., 0]
    if img.ndim != 2:
        raise ValueError(f"an image must be (H, W) or (H, W, C), got shape {img.shape}")
    lo, hi = float(img.min()), float(img.max())
    return (img - lo) / (hi - lo) if hi > lo else np.zeros_like(img)


def overlay_title(e: Any, model: str = "") -> str:
    """One line naming what an overlay shows: model, class (with its name where the model
    has class names), mask size and solver status."""
    from smug_opt.models.catalog import describe

    r = e.result
    status = "no solver (receptive fields)" if r is None else f"{r.status.name}, {r.verification}"
    label = describe(model).class_label(e.target) if model else str(e.target)
    return (f"{e.method}{' on ' + model if model else ''}: class {label}, "
            f"mask {e.mask_size}/{e.grid.num_cells} cells, {status}")


def overlay_png(image: np.ndarray, saliency: np.ndarray, path: str | Path, *, zoom: int = 0,
                title: str = "", legend: str = LEGEND) -> Path:
    """Write the input (grey) beside the input with the saliency in red over it, under a
    ``title`` line and above a legend saying what red means.

    ``zoom`` repeats pixels so small inputs are visible (0: chosen so the image is ≥ 224 px);
    ``legend`` says what red means.
    """
    from PIL import Image, ImageDraw

    gray = _gray(image)
    heat = display_scale(np.asarray(saliency).reshape(gray.shape))
    if zoom <= 0:
        zoom = max(1, -(-224 // max(gray.shape)))
    base = np.repeat(gray[..., None], 3, axis=2)
    red = base * 0.45
    red[..., 0] = np.where(heat > 0, 0.35 + 0.65 * heat, red[..., 0])
    picture = np.concatenate([base, np.ones((gray.shape[0], 2, 3)), red], axis=1)
    picture = np.repeat(np.repeat(picture, zoom, axis=0), zoom, axis=1)
    pixels = (picture * 255).round().astype(np.uint8)
    band = 16
    lines = [t for t in (title, legend) if t]
    width = max(pixels.shape[1], 6 * max(len(t) for t in lines) + 8)
    canvas = Image.new("RGB", (width, pixels.shape[0] + band * len(lines)), "white")
    canvas.paste(Image.fromarray(pixels), (0, band if title else 0))
    draw = ImageDraw.Draw(canvas)
    if title:
        draw.text((4, 2), title, fill="black")
    draw.text((4, canvas.height - band + 2), legend, fill=(90, 0, 0))
    out = Path(path)
    canvas.save(out, format="PNG")
    return out


def text_html(tokens: Sequence[str], saliency: np.ndarray, path: str | Path, *,
              rationale: np.ndarray | None = None, title: str = "") -> Path:
    """Write an HTML page with kept tokens highlighted (green by score); planted rationale
    tokens, if given, are underlined."""
    heat = display_scale(np.asarray(saliency, dtype=np.float64).reshape(-1))
    spans = []
    for i, token in enumerate(tokens):
        style = f"background: rgba(0, 160, 60, {heat[i]:.2f});" if heat[i] > 0 else ""
        if rationale is not None and rationale[i]:
            style += " text-decoration: underline;"
        spans.append(f'<span style="{style}">{html.escape(token)}</span>')
    body = " ".join(spans)
    page = (f"<!doctype html><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<h3>{html.escape(title)}</h3><p style='font-family: sans-serif; line-height: 1.8'>"
            f"{body}</p>\n")
    out = Path(path)
    out.write_text(page)
    return out


def text_terminal(tokens: Sequence[str], saliency: np.ndarray, *, colour: bool = True) -> str:
    """The tokens with kept ones on a green background (ANSI colours), or in [brackets]
    without ``colour`` (for pipes and files)."""
    scores = np.asarray(saliency, dtype=np.float64).reshape(-1)
    if not colour:
        return " ".join(f"[{t}]" if scores[i] > 0 else t for i, t in enumerate(tokens))
    return " ".join(f"\033[42;30m{t}\033[0m" if scores[i] > 0 else t for i, t in enumerate(tokens))
