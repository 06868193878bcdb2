"""The model-randomisation sanity check (Adebayo et al., NeurIPS 2018) on EfficientNet-Lite0:
each method's map of a photo on the trained network against its map on copies whose top
weighted layers are re-initialised (the cascade of :mod:`smug_opt.evaluate.randomisation`,
the same code ``smug-opt evaluate --sanity-stages N`` runs), without the other metrics
(LSC, curves, ROAD) that ``evaluate`` would compute for every map too.

    python benchmarks/imagenet/randomisation.py OUT_DIR --photos chelsea,coffee,rocket --stages 2

Each photo is the suite's input (:func:`smug_opt.models.imagenet.evaluation_photos`, rounded
to 8-bit as ``photos.py`` writes it), explained for the trained model's top-1 class on every
model. ``OUT_DIR`` gets ``records.jsonl`` (one line per photo and method as it finishes:
Spearman and SSIM per stage), ``maps.npz`` (the maps) and ``table.md`` (means over the photos).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np


def _table(records: list[dict], methods: list[str], stages: list[int]) -> str:
    """Mean Spearman / SSIM per method and stage over the photos (None where a map was constant)."""

    def mean(values: list[float | None]) -> str:
        kept = [v for v in values if v is not None]
        if not kept:
            return "–"
        text = f"{np.mean(kept):.2f}"
        return text if len(kept) == len(values) else f"{text} (of {len(kept)})"

    head = ["method"] + [f"top {s} layers: Spearman / SSIM" for s in stages]
    lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for m in methods:
        rows = [r for r in records if r["method"] == m]
        cells = [f"{mean([r['stages'][i]['spearman'] for r in rows])} / "
                 f"{mean([r['stages'][i]['ssim'] for r in rows])}" for i in range(len(stages))]
        lines.append("| " + " | ".join([m, *cells]) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    from smug_opt.batch import ModelRef
    from smug_opt.evaluate.evaluation import _load_subject, _randomised
    from smug_opt.evaluate.methods import METHODS, Settings
    from smug_opt.evaluate.randomisation import map_similarity
    from smug_opt.models.catalog import smug_parameters
    from smug_opt.models.imagenet import EFFICIENTNET_LITE0, evaluation_photos

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--photos", default="chelsea,coffee,rocket", help="suite inputs, comma-separated")
    ap.add_argument("--methods", default="smug,smug_base,ig,gradcam")
    ap.add_argument("--stages", type=int, default=2, help="stages of the top-down cascade")
    args = ap.parse_args()
    suite = evaluation_photos()
    names = args.photos.split(",")
    unknown = [n for n in names if n not in suite]
    if unknown:
        raise SystemExit(f"unknown suite inputs {unknown}; available: {', '.join(suite)}")
    methods = args.methods.split(",")
    subject = _load_subject(ModelRef(EFFICIENTNET_LITE0))
    settings = Settings(smug_parameters(EFFICIENTNET_LITE0, None), "highs", 60.0, 0.5, 0, 64,
                        softmax=True, sanity_stages=args.stages)
    randomised = _randomised(subject, settings)
    stages = [layers for layers, _ in randomised]
    print(f"cascade stages (top weighted layers randomised): {stages}", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    records: list[dict] = []
    maps: dict[str, np.ndarray] = {}
    with (args.out / "records.jsonl").open("w") as log:
        for name in names:
            x = np.clip(np.round(suite[name]), 0, 255)
            label = int(np.argmax(np.asarray(subject.model.predict(x[None]))[0]))
            for m in methods:
                start = time.perf_counter()
                trained = METHODS[m].compute(subject, settings, x, label, None).saliency
                maps[f"{name}.{m}.trained"] = trained
                per_stage = []
                for layers, other_subject in randomised:
                    try:
                        other = METHODS[m].compute(other_subject, settings, x, label, None).saliency
                    except ValueError as error:  # e.g. no mask on the randomised model
                        per_stage.append({"layers": layers, "spearman": None, "ssim": None,
                                          "error": str(error)})
                        continue
                    maps[f"{name}.{m}.top{layers}"] = other
                    rho, ssim = map_similarity(trained, other)
                    per_stage.append({"layers": layers, "spearman": rho, "ssim": ssim})
                record = {"name": name, "label": label, "method": m, "stages": per_stage,
                          "seconds": time.perf_counter() - start}
                records.append(record)
                log.write(json.dumps(record) + "\n")
                log.flush()
                print(json.dumps(record), flush=True)
            np.savez_compressed(args.out / "maps.npz", **maps)
    table = _table(records, methods, stages)
    (args.out / "table.md").write_text(table)
    print(table)


if __name__ == "__main__":
    main()
