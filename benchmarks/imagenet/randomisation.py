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


def _cell(stage: dict) -> str:
    def fmt(v: float | None) -> str:
        return "–" if v is None else f"{v:.2f}"

    return f"{fmt(stage['spearman'])} / {fmt(stage['ssim'])}"


def _table(records: list[dict], methods: list[str]) -> str:
    """Spearman / SSIM of each method's map per photo and cascade stage ('–': a constant map;
    a photo's column is left out for the methods it has no record of)."""
    photos = list(dict.fromkeys(r["name"] for r in records))
    by = {(r["name"], r["method"]): r for r in records}
    stages = [s["layers"] for s in records[0]["stages"]]
    head = ["method"] + [f"{p}: top {n}" for p in photos for n in stages]
    lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for m in methods:
        cells = [_cell(by[(p, m)]["stages"][i]) if (p, m) in by else "not run"
                 for p in photos for i in range(len(stages))]
        lines.append("| " + " | ".join([m, *cells]) + " |")
    return "\n".join(lines) + ("\n\nCells: Spearman rank correlation / SSIM between the map on the trained "
                               "model and on the randomised one.\n")


def _figure(maps: dict[str, np.ndarray], photo: str, methods: list[str], stages: list[int],
            path: Path) -> None:
    """One photo's maps: a row per method, the trained model's map then each stage's."""
    from matplotlib.figure import Figure

    columns = ["trained", *[f"top{n}" for n in stages]]
    fig = Figure(figsize=(2.2 * len(columns), 2.2 * len(methods)))
    axes = fig.subplots(len(methods), len(columns), squeeze=False)
    for row, m in enumerate(methods):
        for col, c in enumerate(columns):
            ax = axes[row][col]
            ax.set_xticks([])
            ax.set_yticks([])
            key = f"{photo}.{m}.{c}"
            if key in maps:
                ax.imshow(maps[key], cmap="jet")
            if row == 0:
                ax.set_title("trained" if c == "trained" else f"top {c[3:]} layers random", fontsize=8)
            if col == 0:
                ax.set_ylabel(m, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=80)


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
    ap.add_argument("--report", action="store_true",
                    help="only (re)write table.md and maps.png from OUT_DIR's records and maps")
    args = ap.parse_args()
    methods = args.methods.split(",")
    if args.report:
        _report(args.out, methods)
        return
    suite = evaluation_photos()
    names = args.photos.split(",")
    unknown = [n for n in names if n not in suite]
    if unknown:
        raise SystemExit(f"unknown suite inputs {unknown}; available: {', '.join(suite)}")
    subject = _load_subject(ModelRef(EFFICIENTNET_LITE0))
    settings = Settings(smug_parameters(EFFICIENTNET_LITE0, None), "highs", 60.0, 0.5, 0, 64,
                        softmax=True, sanity_stages=args.stages)
    randomised = _randomised(subject, settings)
    stages = [layers for layers, _ in randomised]
    print(f"cascade stages (top weighted layers randomised): {stages}", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
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
                log.write(json.dumps(record) + "\n")
                log.flush()
                print(json.dumps(record), flush=True)
            np.savez_compressed(args.out / "maps.npz", **maps)
    _report(args.out, methods)


def _report(out: Path, methods: list[str]) -> None:
    """table.md from the records, maps.png of the first photo whose maps were all saved."""
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    table = _table(records, methods)
    (out / "table.md").write_text(table)
    print(table)
    with np.load(out / "maps.npz") as data:
        maps = {k: data[k] for k in data.files}
    stages = [s["layers"] for s in records[0]["stages"]]
    photo = next(iter(dict.fromkeys(key.split(".")[0] for key in maps)))
    _figure(maps, photo, methods, stages, out / "maps.png")


if __name__ == "__main__":
    main()
