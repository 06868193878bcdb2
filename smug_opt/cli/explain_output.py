"""What a single ``smug-opt explain`` shows and writes besides the mask: the Integrated
Gradients progress bar, the rendered explanation (overlay for pictures, HTML and terminal
colours for text) and, asked for, a certificate of the solver's claim."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

from smug_opt.console import use_colour
from smug_opt.models.catalog import describe

__all__ = ["certificate_beside", "ig_progress", "render_explanation"]


def ig_progress() -> Any:
    """A stderr progress bar for Integrated Gradients when it runs in several batches."""
    from tqdm import tqdm

    bar = None

    def show(done: int, total: int) -> None:
        nonlocal bar
        if bar is None:
            if done == total:
                return  # one batch: nothing to watch
            bar = tqdm(total=total, desc="integrated gradients", unit="point", file=sys.stderr,
                       dynamic_ncols=True)
        bar.update(done - bar.n)
        if done == total:
            bar.close()

    return show


def render_explanation(e: Any, x: np.ndarray, name: str, info: dict[str, Any], out: Path) -> None:
    """Write an image explanation's ``overlay.png``, or a text one's ``explanation.html``
    and its coloured tokens on stdout (with the planted rationale's recall, if known)."""
    from smug_opt import render

    if len(e.grid.spatial_shape) >= 2:
        hw = e.grid.spatial_shape[:2]
        saliency = e.saliency.reshape((*hw, -1)).max(axis=-1)
        render.overlay_png(x.reshape((*hw, -1)), saliency, out / "overlay.png",
                           title=render.overlay_title(e, name))
        return
    if describe(name).vocabulary:
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
    print(render.text_terminal(shown, e.saliency.reshape(-1)[: len(shown)], colour=use_colour()))
    if rationale is not None:
        hits = int((kept & rationale).sum())
        print(f"planted rationale: {hits}/{int(rationale.sum())} recalled, "
              f"precision {hits / max(int(kept.sum()), 1):.2f}")


def certificate_beside(e: Any, path: Path, seconds: float) -> str:
    """Write the explanation's problem to ``path`` with the suffix ``.smug`` and the
    certificate of its solver's claim to ``path``; a line saying what was written."""
    if e.result is None:
        return f"none written: {e.method} solves no problem"
    from smug_opt.cli.solve import certificate_line
    from smug_opt.problem_file import save_problem

    problem_path = path.with_suffix(".smug")
    save_problem(e.problem, problem_path)
    _, line = certificate_line(e.problem, e.result, path, seconds, str(problem_path))
    return f"{line} (problem: {problem_path})"
