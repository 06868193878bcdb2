"""SMUG's parameters on EfficientNet-Lite0, measured: k, γ, what a masked pixel becomes and
the cell size, each varied alone from the model's defaults (k = 3000, γ = 0.9, blur, 4×4
cells), scored on the ImageNet suite's inputs by the metrics of ``smug-opt evaluate``.

    python benchmarks/imagenet/variants.py OUT_DIR [--photos chelsea,coffee,...]
    python benchmarks/imagenet/variants.py OUT_DIR --report      # table.md again

Per input the first-layer Integrated Gradients (64 steps) are computed once and shared by
every variant: IG does not depend on k, γ, the baseline or the cell (only the neurons
picked from it do). Every variant's map is then scored with the same definitions, whatever
its own cell: deletion/insertion AUC over 4×4 cells (25 points per curve, removed pixels
black, as in the 24-input table), ROAD at five levels, sparsity, plus whether the mask alone
keeps the label (the picture with every pixel outside the mask set to the variant's
baseline, classified again: top-1 kept, and the label's probability). ``OUT_DIR`` gets
``records.jsonl`` (one line per input and variant, as it finishes; a rerun skips the pairs
it holds) and ``table.md`` (means over the inputs every variant finished).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

DEFAULT = {"k": 3000, "gamma": 0.9, "baseline": "blur", "cell": 4}
VARIANTS: dict[str, dict] = {
    "default": {},
    "k=1000": {"k": 1000},
    "k=6000": {"k": 6000},
    "γ=0.25": {"gamma": 0.25},
    "γ=0.5": {"gamma": 0.5},
    "γ=0.75": {"gamma": 0.75},
    "zero": {"baseline": "zero"},
    "black": {"baseline": "black"},
    "mean": {"baseline": "mean"},
    "cell=2": {"cell": 2},
    "cell=8": {"cell": 8},
    "rest ranked": {},
}
"""Each variant changes one parameter of :data:`DEFAULT` (or, :data:`RANK_REST`, its map)."""
RANK_REST = frozenset({"rest ranked"})
"""Variants whose map ranks the cells outside the mask too, below every kept cell, by the same
IG score SMUG gives kept cells (SMUG's own map is 0 there: the curves then remove them in
raster order, ROAD in random order)."""

PHOTOS = "chelsea,coffee,rocket,china,flower,astronaut"
CURVE_CELL, CURVE_STEPS, ROAD_LEVELS = 4, 25, (0.1, 0.3, 0.5, 0.7, 0.9)
MIN_MASK = 0.01
"""The smallest mask (fraction of the pixels) a per-input choice of k and γ may pick."""
SUITE_RECORDS = Path(__file__).parent / "evaluation-suite" / "records.jsonl"
REFERENCE_METHODS = ("smug_base", "ig", "gradcam", "centerbox")
MID_GREY = 127.5
"""The raw pixel whose preprocessing ``(x/255 − 0.5)/0.5`` is 0: the ``zero`` baseline's picture."""


def _masked_picture(x: np.ndarray, mask: np.ndarray, baseline: str, pixel_mean) -> np.ndarray:
    """``x`` where the mask keeps it, the variant's baseline picture elsewhere."""
    from smug_opt.mask_baseline import baseline_input

    fill = baseline_input(baseline, x, pixel_mean=pixel_mean)
    fill = np.full_like(x, MID_GREY) if fill is None else fill
    return np.where(mask[..., None], x, fill)


def _score(predict, x: np.ndarray, label: int, saliency: np.ndarray) -> dict:
    from smug_opt.evaluate.faithfulness import deletion_curve, insertion_curve
    from smug_opt.evaluate.road import road

    out = {}
    for key, curve in (("deletion_auc", deletion_curve), ("insertion_auc", insertion_curve)):
        out[key] = curve(predict, x, label, saliency, cell=CURVE_CELL, baseline=0.0, steps=CURVE_STEPS).auc
    r = road(predict, x, label, saliency, levels=ROAD_LEVELS)
    out["road_morf"], out["road_lerf"] = r.morf, r.lerf
    return out


def run(out: Path, photos: list[str], variants: list[str], reference: Path | None) -> None:
    from smug_opt.batch import ModelRef
    from smug_opt.evaluate.evaluation import _load_subject, _softmax
    from smug_opt.explanation import explain
    from smug_opt.models.catalog import describe
    from smug_opt.models.imagenet import EFFICIENTNET_LITE0, evaluation_photos
    from smug_opt.parameters import SmugParameters

    suite = evaluation_photos()
    unknown = [p for p in photos if p not in suite]
    if unknown:
        raise SystemExit(f"unknown suite inputs {unknown}; available: {', '.join(suite)}")
    out.mkdir(parents=True, exist_ok=True)
    path = out / "records.jsonl"
    done = {(r["name"], r["variant"]) for r in _records(path)}
    subject = _load_subject(ModelRef(EFFICIENTNET_LITE0))
    adapter, predict = subject.model, _softmax(subject.predict_fn)
    pixel_mean = describe(adapter).pixel_mean
    with path.open("a") as log:
        for name in photos:
            todo = [v for v in variants if (name, v) not in done]
            if not todo:
                continue
            x = np.clip(np.round(suite[name]), 0, 255)  # the PNG photos.py writes
            label = int(np.argmax(predict(x[None])[0]))
            attributions, ig_seconds = None, None
            for variant in todo:
                params = SmugParameters(**{**DEFAULT, **VARIANTS[variant]})
                start = time.perf_counter()
                e = explain(adapter, x, params=params, backend="highs", time_limit=60.0, target=label,
                            attributions=attributions)
                seconds = time.perf_counter() - start
                if attributions is None:
                    attributions, ig_seconds = e.attributions, e.times["ig"]
                record = {"name": name, "label": label, "variant": variant, **DEFAULT, **VARIANTS[variant],
                          "status": None if e.result is None else e.result.status.name,
                          "empty_mask_rows": e.params["empty_mask_rows"],
                          "seconds": seconds - e.times["ig"], "ig_seconds": ig_seconds,
                          "load": os.getloadavg()[0]}
                if e.mask is not None:
                    mask = np.asarray(e.mask, dtype=bool)
                    kept = predict(_masked_picture(x, mask, params.baseline.value, pixel_mean)[None])[0]
                    saliency = np.asarray(e.saliency, dtype=np.float64)
                    if variant in RANK_REST:
                        scores = np.asarray(e.grid.expand(e.cell_scores), dtype=np.float64)
                        saliency = np.where(mask, scores + scores.max() - scores.min() + 1.0, scores)
                    record |= {"cells": e.mask_size, "sparsity": float(mask.mean()),
                               "keeps_label": bool(np.argmax(kept) == label), "p_label": float(kept[label]),
                               **_score(predict, x, label, saliency)}
                log.write(json.dumps(record) + "\n")
                log.flush()
                print(json.dumps(record), flush=True)
    report(out, variants, reference)


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _mean(rows: list[dict], key: str) -> float:
    return float(np.mean([r[key] for r in rows]))


def _reference_rows(path: Path, names: list[str]) -> list[str]:
    """Rows for the other methods of the 24-input table (``evaluate``'s records.jsonl), means
    over the same inputs: their curves and ROAD have the same definitions as here."""
    records = [r for r in _records(path) if r["name"] in names and r["method"] in REFERENCE_METHODS]
    lines = []
    for m in REFERENCE_METHODS:
        rows = [r for r in records if r["method"] == m]
        if len(rows) != len(names):
            continue
        sparsity = "–" if rows[0]["sparsity"] is None else f"{100 * _mean(rows, 'sparsity'):.1f}"
        lines.append(f"| *{m}* | | | | | | | {sparsity} | | | {_mean(rows, 'deletion_auc'):.3f} | "
                     f"{_mean(rows, 'insertion_auc'):.3f} | {_mean(rows, 'road_morf'):.3f} | "
                     f"{_mean(rows, 'road_lerf'):.3f} | |")
    return lines


def _row(first: str, rows: list[dict]) -> str:
    """A table row: ``first`` (the variant and its parameters), then the means of ``rows``."""
    if any("sparsity" not in r for r in rows):
        return f"| {first} | {sum('sparsity' in r for r in rows)}/{len(rows)} masks | | | | | | | | | |"
    sparsity = [100 * r["sparsity"] for r in rows]
    return (f"| {first} | {sum(r['status'] == 'OPTIMAL' for r in rows)}/{len(rows)} | "
            f"{sum(r['cells'] == 0 for r in rows)} | "
            f"{np.mean(sparsity):.1f} ({min(sparsity):.1f}–{max(sparsity):.1f}) | "
            f"{sum(r['keeps_label'] for r in rows)}/{len(rows)} | {_mean(rows, 'p_label'):.3f} | "
            f"{_mean(rows, 'deletion_auc'):.3f} | {_mean(rows, 'insertion_auc'):.3f} | "
            f"{_mean(rows, 'road_morf'):.3f} | {_mean(rows, 'road_lerf'):.3f} | "
            f"{np.median([r['seconds'] for r in rows]):.2f} |")


def report(out: Path, variants: list[str], reference: Path | None = None) -> str:
    """table.md: each variant's means over the inputs that every variant finished (and the
    ``reference`` methods' rows over the same inputs)."""
    records = _records(out / "records.jsonl")
    by_variant = {v: {r["name"]: r for r in records if r["variant"] == v} for v in variants}
    names = sorted(set.intersection(*(set(rows) for rows in by_variant.values())))
    head = ("| variant | k | γ | baseline | cell | optimal | empty | mask % (min–max) | keeps label | "
            "p(label) | deletion ↓ | insertion ↑ | ROAD MoRF ↓ | ROAD LeRF ↑ | solve s (median) |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for v in variants:
        rows = [by_variant[v][n] for n in names]
        p = {**DEFAULT, **VARIANTS[v]}
        if rows:
            lines.append(_row(f"{v} | {p['k']} | {p['gamma']} | {p['baseline']} | {p['cell']}", rows))
    tuned = [v for v in variants if set(VARIANTS[v]) <= {"k", "gamma"} and v not in RANK_REST]
    for metric, best in (("deletion_auc", min), ("insertion_auc", max)):
        rows = []
        for n in names:
            kept = [by_variant[v][n] for v in tuned if by_variant[v][n].get("sparsity", 0) >= MIN_MASK]
            if kept:
                rows.append(best(kept, key=lambda r: r[metric]))
        if rows and len(rows) == len(names):
            lines.append(_row(f"best k, γ per input by {metric.split('_')[0]} (mask ≥ 1 %) | | | blur | 4",
                              rows))
    if reference is not None:
        lines += _reference_rows(reference, names)
    text = "\n".join(lines) + (f"\n\nn = {len(names)} inputs: {', '.join(names)}. Means over them; an empty "
                                "mask's map is all zeros: its curves remove cells in raster order, ROAD "
                                "pixels in random order.\n")
    (out / "table.md").write_text(text)
    print(text)
    return text


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--photos", default=PHOTOS, help="suite inputs, comma-separated")
    ap.add_argument("--variants", default=",".join(VARIANTS), help=f"some of {', '.join(VARIANTS)}")
    ap.add_argument("--report", action="store_true", help="only (re)write table.md from OUT_DIR's records")
    ap.add_argument("--reference", type=Path, default=SUITE_RECORDS,
                    help="the 24-input table's records: its other methods' rows, same inputs")
    args = ap.parse_args()
    variants = args.variants.split(",")
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        raise SystemExit(f"unknown variants {unknown}; available: {', '.join(VARIANTS)}")
    if args.report:
        report(args.out, variants, args.reference)
    else:
        run(args.out, args.photos.split(","), variants, args.reference)


if __name__ == "__main__":
    main()
