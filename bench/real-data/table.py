"""Markdown tables from a bench/real-data JSON (``run.py --json``).

  uv run python ../bench/real-data/table.py /tmp/real.json

1. F1 of every variant x scoring mode per scenario (the winner per scenario in bold);
2. F1 / accuracy / precision / recall per scenario for every variant with each scoring mode
   (``--full``) or for the pairs named by ``--pairs variant:mode,...``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("json", type=Path)
    ap.add_argument("--pairs", default="paper:gat,vi:gat,vi:fusion_max,vi+calib:gat,vi+calib:fusion_max")
    ap.add_argument("--full", action="store_true")
    a = ap.parse_args()
    doc = json.loads(a.json.read_text())
    res = doc["results"]
    scen = list(res)
    variants = list(res[scen[0]])
    modes = [k for k in res[scen[0]][variants[0]] if isinstance(res[scen[0]][variants[0]][k], dict)]
    cols = [(v, m) for v in variants for m in modes]
    print("| scenario | " + " | ".join(f"{v} {m}" for v, m in cols) + " |")
    print("|---|" + "---:|" * len(cols))
    for s in scen:
        f1 = [res[s][v][m]["f1"] for v, m in cols]
        best = max(f1)
        cells = [f"**{x:.3f}**" if x == best else f"{x:.3f}" for x in f1]
        print(f"| {s} | " + " | ".join(cells) + " |")
    print()
    pairs = cols if a.full else [tuple(p.split(":")) for p in a.pairs.split(",")]
    print("| scenario | variant | scoring | F1 | accuracy | precision | recall |")
    print("|---|---|---|---:|---:|---:|---:|")
    for s in scen:
        for v, m in pairs:
            if v not in res[s]:
                continue
            r = res[s][v][m]
            print(
                f"| {s} | {v} | {m} | {r['f1']:.4f} | {r['accuracy']:.4f} | {r['precision']:.4f} "
                f"| {r['recall']:.4f} |"
            )


if __name__ == "__main__":
    main()
