"""The table, records and figure of the inputs an interrupted ``smug-opt evaluate`` run on
the ImageNet suite finished (``evaluate`` writes them only at the end of a whole run).

    python benchmarks/imagenet/finished_table.py RUN_DIR OUT_DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np


def main() -> None:
    from smug_opt.evaluate.evaluation import _record, _restore
    from smug_opt.evaluate.report import plot_examples, table_json, table_markdown
    from smug_opt.evaluate.scoring import summarize
    from smug_opt.models.imagenet import evaluation_photos
    from smug_opt.runstore import RunFolder

    run, out = Path(sys.argv[1]), Path(sys.argv[2])
    folder = RunFolder.read(run)
    config = json.loads((run / "run.json").read_text())["config"]
    done = _restore(folder)
    order = sorted(done)
    names = {r["index"]: r["name"] for r in folder.records()}
    methods = tuple(config["methods"])
    outcomes = [done[i] for i in order]
    summaries = summarize(outcomes, methods)
    out.mkdir(parents=True, exist_ok=True)
    (out / "table.md").write_text(table_markdown(summaries))
    payload = {"modality": "image", "n": len(order), **table_json(summaries)}
    (out / "table.json").write_text(json.dumps(payload, indent=2) + "\n")
    (out / "records.jsonl").write_text("".join(json.dumps(_record(i, names[i], m, o)) + "\n"
                                               for i in order for m, o in done[i].items()))
    photos = evaluation_photos()
    inputs = np.stack([photos[names[i]] for i in order])
    plot_examples(inputs, outcomes, methods, out / "examples.png", names=[names[i] for i in order],
                  max_examples=6)
    print(table_markdown(summaries))


if __name__ == "__main__":
    main()
