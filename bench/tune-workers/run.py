"""Study throughput: the same trials worked by one worker (the original proposal's single-process Optuna loop)
vs ``--workers`` parallel workers pulling from one journal-file study (what each task of the
``runner tune`` array runs). Every trial's values are enqueued up front and pruning is off, so both
runs do the same work; each worker gets one thread (one worker ~ one GPU). Prints wall time,
trials per minute, the ratio, and the idle gap inside each worker between one trial's end and the
next trial's start (read from the study's own journal).

Run: cd python && uv run python ../bench/tune-workers/run.py [--trials 8] [--workers 2] [--epochs 4]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def study_json(study: str, trials: int, workers: int, epochs: int) -> dict[str, object]:
    return {
        "study": study,
        "stage": "autoencoder",
        "model": "vgae",
        "scale": "small",
        "dataset": "bench",
        "overrides": {"data.num_workers": 0, "training.patience": 0, "training.max_epochs": epochs},
        "space": {"training.lr": {"type": "float", "low": 1e-4, "high": 1e-2, "log": True}},
        "objective": {"metric": "val_loss", "direction": "minimize"},
        "nTrials": trials,
        "nWorkers": workers,
        "pruner": {"type": "none"},
        "heartbeatSeconds": 5,
        "staleAfterSeconds": 60,
    }


def run_study(root: Path, label: str, trials: int, workers: int, epochs: int) -> tuple[float, list[float]]:
    from kdgat.tune.study import open_study, read_config

    study_dir = root / label
    study_dir.mkdir()
    (study_dir / "study.json").write_text(json.dumps(study_json(label, trials, workers, epochs)))
    cfg = read_config(study_dir)
    study = open_study(study_dir, cfg)
    for i in range(trials):  # the same values in both runs
        study.enqueue_trial({"training.lr": 10 ** (-4 + 2 * i / max(1, trials - 1))})
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    t0 = time.perf_counter()
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "kdgat",
                "tune",
                "--study-dir",
                str(study_dir),
                "--run-root",
                str(root / f"{label}-w{w}"),
            ],
            env={**env, "SLURM_ARRAY_JOB_ID": label, "SLURM_ARRAY_TASK_ID": str(w)},
            stdout=subprocess.DEVNULL,
            stderr=(root / f"{label}-w{w}.log").open("w"),
        )
        for w in range(workers)
    ]
    codes = [p.wait() for p in procs]
    wall = time.perf_counter() - t0
    if any(codes):
        raise SystemExit(f"{label}: a worker exited {codes}")
    states = [t.state.name for t in open_study(study_dir, cfg).get_trials(deepcopy=False)]
    if set(states) != {"COMPLETE"}:
        raise SystemExit(f"{label}: trials ended {states}; see {study_dir}")
    # Idle gaps inside each worker: next trial's start - previous trial's end.
    by_worker: dict[str, list[tuple[float, float]]] = {}
    for t in open_study(study_dir, cfg).get_trials(deepcopy=False):
        assert t.datetime_start and t.datetime_complete
        by_worker.setdefault(str(t.system_attrs.get("kdgat_worker")), []).append(
            (t.datetime_start.timestamp(), t.datetime_complete.timestamp())
        )
    gaps = [
        b[0] - a[1]
        for spans in by_worker.values()
        for a, b in zip(sorted(spans), sorted(spans)[1:], strict=False)
    ]
    return wall, gaps


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=8)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--messages", type=int, default=60_000)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="kdgat-bench-tune-"))
    os.environ.update(KD_GAT_DATA_ROOT=str(root / "raw"), KD_GAT_CACHE_ROOT=str(root / "cache"))
    from kdgat.data import GraphParams, preprocess_dataset, write_synthetic_dataset

    write_synthetic_dataset(root / "raw" / "bench", n_messages=args.messages, seed=0)
    preprocess_dataset("bench", GraphParams(), workers=1)
    print(f"{args.trials} trials x {args.epochs} epochs (VGAE small, synthetic data), cores {os.cpu_count()}")
    results = {}
    for label, workers in (("one-worker", 1), (f"{args.workers}-workers", args.workers)):
        wall, gaps = run_study(root, label, args.trials, workers, args.epochs)
        results[label] = wall
        gap = f"{statistics.mean(gaps):.2f} s mean, {max(gaps):.2f} s max" if gaps else "-"
        print(
            f"{label:12s} wall {wall:7.1f} s   {60 * args.trials / wall:6.2f} trials/min   "
            f"gap between trials: {gap}"
        )
    one, many = results.values()
    print(f"ratio {args.workers} workers / one worker: {one / many:.2f}x trials per minute")


if __name__ == "__main__":
    main()
