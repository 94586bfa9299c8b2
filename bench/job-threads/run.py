"""Two 1-core jobs side by side on one node, as the local SLURM (``TaskPlugin=task/none``), the
local scheduler or a shared node without core binding runs them: each job's pipeline with torch's
default intra-op threads (one per core of the machine) vs the pipeline matching its threads to the
allocation (``SLURM_CPUS_PER_TASK=1``, what every job script and the local scheduler set).

Each repetition starts two ``python -m kdgat autoencoder`` processes at once (VGAE small, synthetic
data) and takes the wall time until both have finished. Variants are interleaved (A B A B …).

Run (under the shared lock, nothing else running):
    cd python && uv run python ../bench/job-threads/run.py [--reps 5] [--epochs 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

VARIANTS = {
    # torch's default: as many threads as the machine has cores, in each of the two jobs
    "default threads": {},
    # the pipeline under an allocation of 1 core per task
    "matched (SLURM_CPUS_PER_TASK=1)": {"SLURM_CPUS_PER_TASK": "1"},
}


def kdgat(args: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "kdgat", *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )


def pair(root: Path, env: dict[str, str], epochs: int, tag: str) -> float:
    t0 = time.perf_counter()
    procs = [
        kdgat(
            [
                *("autoencoder", "--model", "vgae", "--scale", "small", "--dataset", "bench"),
                *("--run-root", str(root / f"{tag}-{k}")),
                *("-O", "training.max_epochs", str(epochs), "-O", "training.patience", "0"),
                *("-O", "data.num_workers", "0"),
            ],
            env,
        )
        for k in range(2)
    ]
    for p in procs:
        _, err = p.communicate()
        if p.returncode != 0:
            raise SystemExit(f"job failed ({p.returncode}):\n{err.decode()[-3000:]}")
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--messages", type=int, default=60_000)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="kdgat-threads-") as tmp:
        root = Path(tmp)
        base = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_") and k != "OMP_NUM_THREADS"}
        base |= {"KD_GAT_DATA_ROOT": str(root / "raw"), "KD_GAT_CACHE_ROOT": str(root / "cache")}
        for step in (
            ["synth", "--out", str(root / "raw" / "bench"), "--messages", str(a.messages)],
            ["preprocess", "--model", "vgae", "--scale", "small", "--dataset", "bench"],
        ):
            p = kdgat([*step, *(["--run-root", str(root / "pre")] if step[0] == "preprocess" else [])], base)
            _, err = p.communicate()
            if p.returncode != 0:
                raise SystemExit(err.decode()[-3000:])
        times: dict[str, list[float]] = {name: [] for name in VARIANTS}
        cores = os.cpu_count()
        print(f"{cores} cores; two 1-core jobs at once, VGAE small, {a.epochs} epochs, {a.reps} reps")
        for rep in range(a.reps):
            for i, (name, extra) in enumerate(VARIANTS.items()):
                t = pair(root / "runs", base | extra, a.epochs, f"{rep}-{i}")
                times[name].append(t)
                print(f"  rep {rep + 1} {name}: {t:.1f} s", flush=True)
        baseline = statistics.median(times["default threads"])
        print(f"\n{'variant':34s} {'median':>8s} {'min':>8s} {'max':>8s} {'speed-up':>9s}")
        for name, ts in times.items():
            med = statistics.median(ts)
            print(f"{name:34s} {med:7.1f}s {min(ts):7.1f}s {max(ts):7.1f}s {baseline / med:8.2f}x")


if __name__ == "__main__":
    main()
