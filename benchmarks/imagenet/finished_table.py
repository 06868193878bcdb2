"""The table, records and figure of the inputs that ``smug-opt evaluate`` runs on the ImageNet
suite finished, over several run folders (``evaluate`` writes them only at the end of a whole
run, and a run stopped part-way keeps its finished inputs in its folder), plus the records
of earlier inputs whose run folder is gone (``--records``: a ``records.jsonl`` this script
wrote; they count in the table, not in the figure, which needs the maps). The figure shows
six of the inputs with maps, one of each photo first.

    python benchmarks/imagenet/finished_table.py OUT_DIR RUN_DIR... [--records FILE]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np


def _from_records(path: Path) -> dict[str, dict]:
    """Outcomes by input name from a records.jsonl (no maps: an empty saliency marks a
    method that did not fail)."""
    from smug_opt.evaluate.boxes import Box
    from smug_opt.evaluate.lsc import LSCResult
    from smug_opt.evaluate.results import MethodOutcome

    out: dict[str, dict] = {}
    for line in path.read_text().splitlines():
        r = json.loads(line)
        score = np.nan if r["lsc"] is None else r["lsc"]
        lsc = None if r["box"] is None else LSCResult(score, r["a"], r["c"], Box(*r["box"]), r["threshold"])
        out.setdefault(r["name"], {})[r["method"]] = MethodOutcome(
            saliency=None if (r["error"] or "").startswith("map:") else np.zeros(0), mask=None, lsc=lsc,
            sparsity=r["sparsity"], deletion_auc=r["deletion_auc"], insertion_auc=r["insertion_auc"],
            precision=r["precision"], recall=r["recall"], seconds=r["seconds"], error=r["error"],
            road_morf=r["road_morf"], road_lerf=r["road_lerf"], status=r["status"], proof=r["proof"])
    return out


def main() -> None:
    from smug_opt.evaluate.evaluation import _record, _restore
    from smug_opt.evaluate.report import plot_examples, table_json, table_markdown
    from smug_opt.evaluate.scoring import summarize
    from smug_opt.models.imagenet import evaluation_photos
    from smug_opt.runstore import RunFolder

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("runs", type=Path, nargs="+")
    ap.add_argument("--records", type=Path, help="records.jsonl of earlier inputs")
    args = ap.parse_args()
    photos = evaluation_photos()
    mapped: dict[str, dict] = {}
    methods: tuple[str, ...] = ()
    for run in args.runs:
        folder = RunFolder.read(run)
        config = json.loads((run / "run.json").read_text())["config"]
        if methods and tuple(config["methods"]) != methods:
            raise SystemExit(f"{run} ran methods {config['methods']}, the others {list(methods)}")
        methods = tuple(config["methods"])
        names = {r["index"]: r["name"] for r in folder.records()}
        mapped |= {names[i]: o for i, o in _restore(folder).items()}
    earlier = _from_records(args.records) if args.records else {}
    done = {**earlier, **mapped}
    order = [name for name in photos if name in done]  # the suite's order
    outcomes = [done[name] for name in order]
    summaries = summarize(outcomes, methods)
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    (out / "table.md").write_text(table_markdown(summaries))
    payload = {"modality": "image", "n": len(order), "inputs": order, **table_json(summaries)}
    (out / "table.json").write_text(json.dumps(payload, indent=2) + "\n")
    lines = [json.dumps(_record(i, name, m, o))
             for i, name in enumerate(order) for m, o in done[name].items()]
    (out / "records.jsonl").write_text("".join(line + "\n" for line in lines))
    with_maps = [name for name in order if name in mapped]
    firsts = [name for i, name in enumerate(with_maps)  # one input of each photo first
              if all(not name.startswith(other.split("_")[0]) for other in with_maps[:i])]
    shown = (firsts + [name for name in with_maps if name not in firsts])[:6]
    plot_examples(np.stack([photos[name] for name in shown]), [mapped[name] for name in shown], methods,
                  out / "examples.png", names=shown, max_examples=6)
    print(table_markdown(summaries))
    print(f"n = {len(order)} inputs: {', '.join(order)}")


if __name__ == "__main__":
    main()
