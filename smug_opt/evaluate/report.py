"""Reports: the paper's Table 1 layout (markdown, JSON) and a PNG grid of qualitative examples."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from smug_opt.evaluate.results import MethodOutcome, MethodSummary

_Cell = Callable[[MethodSummary], str | None]


def _interval(estimate: Any, scale: float = 1.0, digits: int = 1) -> str | None:
    if estimate is None:
        return None
    v, lo, hi = (scale * x for x in (estimate.value, estimate.low, estimate.high))
    return f"{v:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def _lsc(s: MethodSummary) -> str | None:
    q = s.lsc
    return None if q is None else f"{q.median:.2f} [{q.q25:.2f}, {q.q75:.2f}]"


ROWS: tuple[tuple[str, _Cell], ...] = (
    ("LSC ↓ median [25th, 75th]", _lsc),
    ("Win% ↑ [95% Wilson]", lambda s: _interval(s.win, 100)),
    ("Sparsity% ↓ [95% normal]", lambda s: _interval(s.sparsity, 100)),
    ("Deletion AUC ↓ [95% normal]", lambda s: _interval(s.deletion, 1, 3)),
    ("Insertion AUC ↑ [95% normal]", lambda s: _interval(s.insertion, 1, 3)),
    ("ROAD MoRF ↓ [95% normal]", lambda s: _interval(s.road_morf, 1, 3)),
    ("ROAD LeRF ↑ [95% normal]", lambda s: _interval(s.road_lerf, 1, 3)),
    ("Randomised-model Spearman ↓", lambda s: _interval(s.sanity_spearman, 1, 2)),
    ("Randomised-model SSIM ↓", lambda s: _interval(s.sanity_ssim, 1, 2)),
    ("Rationale precision% ↑", lambda s: _interval(s.precision, 100)),
    ("Rationale recall% ↑", lambda s: _interval(s.recall, 100)),
    ("Failed maps", lambda s: f"{s.failures}/{s.n}"),
    ("Seconds per map (median)", lambda s: f"{s.median_seconds:.3g}"),
)
"""The table's rows, in order: a label and how to print one method's cell."""


def table_markdown(summaries: Sequence[MethodSummary]) -> str:
    """Table 1 as markdown: one row per metric, one column per method; '–' = not applicable.

    Rows where no method has a value are left out.
    """
    if not summaries:
        raise ValueError("table_markdown needs at least one method summary; got none")
    lines = [
        "| Metric | " + " | ".join(s.method for s in summaries) + " |",
        "|---|" + "---|" * len(summaries),
    ]
    for label, cell in ROWS:
        cells = [cell(s) for s in summaries]
        if any(c is not None for c in cells):
            lines.append(f"| {label} | " + " | ".join(c or "–" for c in cells) + " |")
    n = summaries[0].n
    return "\n".join(lines) + f"\n\nn = {n} inputs.\n"


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def table_json(summaries: Sequence[MethodSummary]) -> dict[str, Any]:
    """Table 1 as a JSON-ready dict: ``{"methods": [...], "metrics": {method: {...}}}``.

    Intervals keep their kind (``"wilson"``/``"normal"``); non-finite numbers become null.
    """
    return {
        "methods": [s.method for s in summaries],
        "metrics": {s.method: _plain(s) for s in summaries},
    }


def _show_input(ax: Any, image: np.ndarray) -> None:
    img = np.asarray(image, dtype=np.float64)
    span = float(img.max() - img.min()) or 1.0
    img = (img - img.min()) / span
    if img.shape[-1] == 1:
        ax.imshow(img[..., 0], cmap="gray", vmin=0, vmax=1)
    else:
        ax.imshow(img[..., :3])


def plot_examples(
    inputs: np.ndarray,
    outcomes: Sequence[Mapping[str, MethodOutcome]],
    methods: Sequence[str],
    path: str | Path,
    *,
    max_examples: int = 6,
    names: Sequence[str] | None = None,
) -> Path:
    """A PNG grid: one row per input (up to ``max_examples``), the input then each method's map.
    ``names`` label the inputs (default ``input 0``, ``input 1``...).

    Each map carries its best LSC box (green) and ``LSC, a, c`` in its title. Drawn on a
    bare matplotlib ``Figure`` (Agg canvas): no display and no global pyplot state.
    """
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    inputs = np.asarray(inputs)
    if inputs.ndim != 4:
        raise ValueError(f"plot_examples needs images (N, H, W, C); got shape {inputs.shape}")
    rows = min(max_examples, len(inputs), len(outcomes))
    if rows < 1:
        raise ValueError("plot_examples needs at least one input and its outcomes")
    cols = 1 + len(methods)
    fig = Figure(figsize=(2.2 * cols, 2.4 * rows))
    axes = fig.subplots(rows, cols, squeeze=False)
    for r in range(rows):
        _show_input(axes[r, 0], inputs[r])
        axes[r, 0].set_title(f"input {r}" if names is None else str(names[r]), fontsize=8)
        for c, method in enumerate(methods, start=1):
            ax, outcome = axes[r, c], outcomes[r][method]
            if outcome.saliency is None:
                ax.set_title(f"{method}\nfailed", fontsize=7)
            else:
                ax.imshow(outcome.saliency, cmap="jet")
                title = method
                if outcome.lsc is not None:
                    b = outcome.lsc.box
                    corner = (b.left - 0.5, b.top - 0.5)
                    ax.add_patch(
                        Rectangle(corner, b.width, b.height, fill=False, edgecolor="lime", linewidth=1.5)
                    )
                    lsc = outcome.lsc
                    title += f"\nLSC {lsc.lsc:.2f} a {lsc.a:.2f} c {lsc.c:.2f}"
                ax.set_title(title, fontsize=7)
        for ax in axes[r]:
            ax.set_xticks([])
            ax.set_yticks([])
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=100)
    return path
