"""Writes catalogue rows as finished stages do (:func:`kdgat.catalogue.store.write_row`, one process,
one row at a time), for bench/catalogue/run.ts; prints ``{"rows": N, "seconds": S, "files": F}``.

    python bench/catalogue/rows.py DIR --rows N [--start I] [--no-compact]

The rows look like a lab's history: 40 experiments, runs of 25 sweep points x 4 stages, scores for
the completed ones, a tenth failed; ``--start`` continues a catalogue (row keys from I on).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from kdgat.catalogue.row import row_key
from kdgat.catalogue.store import write_row

STAGES = (
    ("ae", "autoencoder", "vgae"),
    ("cur", "curriculum", "gat"),
    ("kd", "distillation", "gat"),
    ("ev", "evaluation", "gat"),
)
DATASETS = ("hcrl_sa", "hcrl_ch", "set_01", "set_02")
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def row(i: int) -> dict[str, Any]:
    rnd = random.Random(i)
    stage_id, stage, model = STAGES[i % 4]
    point = (i // 4) % 25
    run = i // 100
    experiment = f"sweep-{run % 40:02d}"
    utc = (T0 + timedelta(hours=run)).strftime("%Y%m%dT%H%M%SZ")
    run_id = f"{utc}-{hashlib.sha1(str(run).encode()).hexdigest()[:8]}"
    run_dir = f"/fs/scratch/PAS1266/kd-gat/runs/{experiment}/{run_id}"
    stage_dir = f"{run_dir}/outputs/point_{point}/{DATASETS[run % 4]}/{model}_small_{stage}"
    failed = rnd.random() < 0.1
    score = None if failed else round(0.6 + 0.4 * rnd.random(), 4)
    return {
        "experiment": experiment,
        "run_id": run_id,
        "stage_id": stage_id,
        "stage": stage,
        "model": model,
        "scale": "small",
        "dataset": DATASETS[run % 4],
        "point_index": point,
        "trial": None,
        "point": json.dumps({"training.lr": 10 ** -(1 + point % 5), "training.seed": point}),
        "state": "FAILED" if failed else "COMPLETED",
        "f1": score,
        "accuracy": score,
        "auroc": score,
        "elapsed_s": round(60 + 3000 * rnd.random(), 3),
        "epochs": None if failed else 50,
        "cost_expected": 1.5,
        "cost_worst": 4.0,
        "cost_unit": "GPU-hours",
        "git_commit": hashlib.sha1(str(run // 10).encode()).hexdigest(),
        "git_dirty": False,
        "spec_hash": hashlib.sha256(experiment.encode()).hexdigest(),
        "environment": "gnn-rapids",
        "environment_lock_hash": "a" * 64,
        "slurm_job_id": f"{4000000 + run}_{point}",
        "slurm_array_index": point,
        "run_dir": run_dir,
        "stage_dir": stage_dir,
        "finished_at": T0 + timedelta(hours=run, seconds=i),
        "recorded_by": "pipeline",
        "row_key": row_key(stage_dir),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dir", type=Path)
    ap.add_argument("--rows", type=int, required=True)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--no-compact", action="store_true")
    a = ap.parse_args()
    # The default: compaction as rows accumulate; --no-compact: one file per row, as before it.
    options: dict[str, Any] = {"compact_at": None} if a.no_compact else {}
    t0 = time.perf_counter()
    for i in range(a.start, a.start + a.rows):
        write_row(a.dir, row(i), **options)
    seconds = time.perf_counter() - t0
    files = sum(1 for n in os.listdir(a.dir) if n.endswith(".parquet") and not n.startswith("."))
    print(json.dumps({"rows": a.rows, "seconds": seconds, "files": files}))


if __name__ == "__main__":
    main()
