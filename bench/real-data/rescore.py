"""bench/real-data/rescore.py: the scoring modes of the current ``kdgat.scoring`` applied again to the
per-window model outputs that ``run.py --scores DIR`` saved, without training again: a scoring rule
is compared on the same trained models. Writes a results file of run.py's shape (``table.py`` reads
it); the training figures (training windows, fit seconds) come from the run's own results file.

    cd python && uv run python ../bench/real-data/rescore.py DIR --results RUN.json --json OUT.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from run import score_modes  # the bench's own module, beside this file


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("scores", type=Path, help="the folder run.py --scores wrote")
    ap.add_argument("--results", type=Path, required=True, help="that run's results file (--json)")
    ap.add_argument(
        "--warmup",
        type=int,
        default=0,
        help="each test recording's first N windows get no verdict (every mode but gat)",
    )
    ap.add_argument("--json", type=Path, required=True)
    args = ap.parse_args()
    run = json.loads(args.results.read_text())
    files = sorted(args.scores.glob("*__*.npz"))
    if not files:
        print(f"no saved outputs (<scenario>__<variant>.npz) in {args.scores}", file=sys.stderr)
        return 2
    results: dict[str, dict[str, dict[str, Any]]] = {}
    for f in files:
        scenario, variant = f.stem.split("__")
        with np.load(f) as z:
            outputs = {k: z[k] for k in z.files}
        trained = run["results"][scenario][variant]
        results.setdefault(scenario, {})[variant] = {
            **{k: trained[k] for k in ("train_windows", "val_windows", "fit_seconds")},
            **score_modes(
                outputs,
                vgae_pool=run["args"]["vgae_pool"],
                merge_gap_s=run["args"]["merge_gap_s"],
                warmup=args.warmup,
            ),
        }
        modes = results[scenario][variant]
        shown = "novelty_timing" if "novelty_timing" in modes else "gat"
        print(f"{scenario} / {variant}: {shown} F1 {modes[shown]['f1']:.4f}", file=sys.stderr)
    doc = {**run, "rescored": {"from": str(args.scores), "warmup": args.warmup}, "results": results}
    args.json.write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
