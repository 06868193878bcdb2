"""SMUG's faithfulness on EfficientNet-Lite0 under other settings than the model's defaults,
measured with the evaluation suite's metrics on a few of its inputs: γ, k, the masked-pixel
baseline, and the map's order beyond the mask.

    python benchmarks/imagenet/variants.py OUT_DIR --photos chelsea,coffee,rocket

Every variant of an input shares one first-layer Integrated Gradients (it depends on the
input, the class and the steps only) and is scored as ``smug-opt evaluate`` scores a map
(:func:`smug_opt.evaluate.scoring.score_map`: LSC, sparsity, deletion/insertion AUC at 25
points, ROAD at 0.1, 0.3, ..., 0.9, the suite's table settings). ``ranked`` is the default
mask with the cells outside it ordered by their IG score instead of tied at 0 (the mask,
hence sparsity, is unchanged; only the map's order beyond it). ``OUT_DIR`` gets
``records.jsonl`` (one line per input and variant as it finishes) and ``table.md`` (means).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

VARIANTS: dict[str, dict] = {
    "default (blur, γ 0.9, k 3000)": {},
    "γ 0.8": {"gamma": 0.8},
    "γ 0.95": {"gamma": 0.95},
    "k 1000": {"k": 1000},
    "baseline black": {"baseline": "black"},
    "baseline zero (paper)": {"baseline": "zero"},
    "baseline mean": {"baseline": "mean"},
    "ranked (default mask, rest by IG)": {"ranked": True},
}
METRICS = ("sparsity", "deletion_auc", "insertion_auc", "road_morf", "road_lerf", "lsc")


def _table(records: list[dict]) -> str:
    head = ["variant", "cells kept %", "deletion ↓", "insertion ↑", "ROAD MoRF ↓", "ROAD LeRF ↑",
            "LSC ↓ (median)"]
    lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for variant in VARIANTS:
        rows = [r for r in records if r["variant"] == variant]
        if not rows:
            continue
        cells = []
        for metric in METRICS:
            values = [r[metric] for r in rows if r[metric] is not None]
            if not values:
                cells.append("–")
            elif metric == "sparsity":
                cells.append(f"{100 * np.mean(values):.1f}")
            elif metric == "lsc":
                cells.append(f"{np.median(values):.2f}")
            else:
                cells.append(f"{np.mean(values):.3f}")
        lines.append("| " + " | ".join([variant, *cells]) + " |")
    return "\n".join(lines) + f"\n\nn = {len({r['name'] for r in records})} inputs.\n"


def main() -> None:
    from smug_opt.batch import ModelRef
    from smug_opt.evaluate.evaluation import _load_subject, _softmax
    from smug_opt.evaluate.methods import MethodMap, Settings, Subject
    from smug_opt.evaluate.scoring import score_map
    from smug_opt.explanation import explain
    from smug_opt.models.catalog import smug_parameters
    from smug_opt.models.imagenet import EFFICIENTNET_LITE0, evaluation_photos
    from smug_opt.parameters import Baseline

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--photos", default="chelsea,coffee,rocket", help="suite inputs, comma-separated")
    args = ap.parse_args()
    suite = evaluation_photos()
    names = args.photos.split(",")
    unknown = [n for n in names if n not in suite]
    if unknown:
        raise SystemExit(f"unknown suite inputs {unknown}; available: {', '.join(suite)}")
    loaded = _load_subject(ModelRef(EFFICIENTNET_LITE0))
    subject = Subject(loaded.model, _softmax(loaded.predict_fn), loaded.keras_model)
    defaults = smug_parameters(EFFICIENTNET_LITE0, None)
    args.out.mkdir(parents=True, exist_ok=True)
    records: list[dict] = []
    with (args.out / "records.jsonl").open("w") as log:
        for name in names:
            x = np.clip(np.round(suite[name]), 0, 255)  # as photos.py writes it
            label = int(np.argmax(np.asarray(subject.model.predict(x[None]))[0]))
            attributions = None
            for variant, change in VARIANTS.items():
                ranked = change.get("ranked", False)
                params = defaults.updated(**{key: (Baseline.parse(v) if key == "baseline" else v)
                                             for key, v in change.items() if key != "ranked"})
                start = time.perf_counter()
                e = explain(subject.model, x, params=params, backend="highs", time_limit=60.0, target=label,
                            attributions=attributions)
                attributions = e.attributions
                cells = np.round(e.cell_mask)
                scores = e.cell_scores * cells
                if ranked:
                    scores = e.cell_scores + cells * (float(np.ptp(e.cell_scores)) + 1.0)
                mm = MethodMap(np.asarray(e.grid.expand(scores), dtype=np.float64),
                               np.asarray(e.mask, dtype=bool))
                settings = Settings(params, "highs", 60.0, 0.5, 0, params.steps, softmax=True,
                                    road_levels=(0.1, 0.3, 0.5, 0.7, 0.9), curve_steps=25)
                s = score_map(subject, settings, x, label, None, mm)
                lsc = s["lsc"]
                record = {"name": name, "label": label, "variant": variant,
                          "status": e.result.status.name, "cells": int(cells.sum()),
                          "empty_mask_rows": e.params["empty_mask_rows"],
                          "lsc": None if lsc is None or not np.isfinite(lsc.lsc) else float(lsc.lsc),
                          **{m: s[m] for m in METRICS if m != "lsc"},
                          "seconds": time.perf_counter() - start}
                records.append(record)
                log.write(json.dumps(record) + "\n")
                log.flush()
                print(json.dumps(record), flush=True)
    table = _table(records)
    (args.out / "table.md").write_text(table)
    print(table)


if __name__ == "__main__":
    main()
