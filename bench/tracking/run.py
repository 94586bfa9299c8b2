"""What tracking costs per epoch on the quickstart's autoencoder stage (VGAE small, synthetic CAN
traffic of 120,000 messages, one loader worker, 2 cores as the quickstart's job asks), and how many
bytes each tracker writes:

  none         ``-O tracking.tensorboard false`` (no tracker at all)
  tensorboard  the default: TensorBoard event files
  +mlflow      TensorBoard + MLflow, to an ``mlflow server`` on 127.0.0.1 started here (SQLite store
               and artifacts in a temporary directory)
  +wandb       TensorBoard + W&B offline (files in the run dir)

Each repetition runs ``python -m kdgat autoencoder`` once per variant, interleaved (A B C D A B C D …).
The per-epoch time is the stage's own: the time between the first and the last epoch's rows of
``history.csv`` divided by the epochs between them (process start and imports excluded). Bytes: the
``tensorboard/`` and ``wandb/`` folders of the run dir, and what the MLflow server's store grew by.

Run (nothing else running: check ``uptime``), from python/:
    flock /tmp/kdgat-heavy.lock uv run python ../bench/tracking/run.py [--reps 5] [--epochs 4]
"""

from __future__ import annotations

import argparse
import csv
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

VARIANTS: dict[str, list[str]] = {
    "none": ["-O", "tracking.tensorboard", "false"],
    "tensorboard": [],
    "+mlflow": ["-O", "tracking.mlflow.uri", "{mlflow}"],
    "+wandb": ["-O", "tracking.wandb.enabled", "true"],
}


def size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def kdgat(args: list[str], env: dict[str, str]) -> None:
    p = subprocess.run(
        [sys.executable, "-m", "kdgat", *args], env=env, capture_output=True, text=True, timeout=900
    )
    if p.returncode != 0:
        raise SystemExit(f"kdgat {args[0]} failed ({p.returncode}):\n{p.stderr[-3000:]}")


def start_mlflow(root: Path) -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", f"sqlite:///{root}/mlflow.db"]
    cmd += ["--artifacts-destination", str(root / "artifacts"), "--host", "127.0.0.1", "--port", str(port)]
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    log = (root / "server.log").open("wb")
    proc = subprocess.Popen([*cmd, "--workers", "1"], stdout=log, stderr=log, env=env, start_new_session=True)
    deadline = time.monotonic() + 120
    while True:
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"mlflow server did not start:\n{(root / 'server.log').read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2):
                return proc, url
        except OSError:
            time.sleep(0.5)


def store_size(root: Path) -> int:
    """The MLflow server's store: its SQLite database and artifacts (not its log)."""
    return sum(size(p) for p in root.glob("mlflow.db*")) + size(root / "artifacts")


def epoch_seconds(run_dir: Path) -> float:
    with (run_dir / "history.csv").open() as f:
        times = [float(r["time"]) for r in csv.DictReader(f)]
    return (times[-1] - times[0]) / (len(times) - 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--messages", type=int, default=120_000)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="kdgat-tracking-") as tmp:
        root = Path(tmp)
        base = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "MLFLOW_", "WANDB_"))}
        base |= {
            "KD_GAT_DATA_ROOT": str(root / "raw"),
            "KD_GAT_CACHE_ROOT": str(root / "cache"),
            "SLURM_CPUS_PER_TASK": "2",  # the quickstart's job: 2 cores
            "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
        }
        base.pop("OMP_NUM_THREADS", None)
        kdgat(["synth", "--out", str(root / "raw" / "bench"), "--messages", str(a.messages)], base)
        pre = ["preprocess", "--model", "gat", "--scale", "small", "--dataset", "bench"]
        kdgat([*pre, "--run-root", str(root / "pre")], base)
        (root / "mlflow").mkdir()
        server, url = start_mlflow(root / "mlflow")
        try:
            per_epoch: dict[str, list[float]] = {v: [] for v in VARIANTS}
            written: dict[str, list[int]] = {v: [] for v in VARIANTS}
            print(
                f"{os.cpu_count()} cores, SLURM_CPUS_PER_TASK=2 (compute threads 2); autoencoder vgae "
                f"small, {a.messages} messages, {a.epochs} epochs, {a.reps} reps, interleaved"
            )
            for rep in range(a.reps):
                for i, (name, extra) in enumerate(VARIANTS.items()):
                    run_root = root / "runs" / f"{rep}-{i}"
                    store0 = store_size(root / "mlflow")
                    kdgat(
                        [
                            *("autoencoder", "--model", "vgae", "--scale", "small", "--dataset", "bench"),
                            *("--run-root", str(run_root), "-O", "training.max_epochs", str(a.epochs)),
                            *("-O", "training.patience", "0", "-O", "data.num_workers", "1"),
                            *(x.format(mlflow=url) for x in extra),
                        ],
                        base,
                    )
                    run_dir = run_root / "bench" / "vgae_small_autoencoder"
                    t = epoch_seconds(run_dir)
                    # Each tracker's own bytes: the MLflow store grows on its own a little (the
                    # server's SQLite pages), so it is counted for the MLflow variant only.
                    mlflow_bytes = store_size(root / "mlflow") - store0 if name == "+mlflow" else 0
                    b = size(run_dir / "tensorboard") + size(run_dir / "wandb") + mlflow_bytes
                    per_epoch[name].append(t)
                    written[name].append(b)
                    print(f"  rep {rep + 1} {name:12s} {t:6.3f} s/epoch  {b / 1024:8.1f} KiB", flush=True)
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=30)
        base_med = statistics.median(per_epoch["none"])
        print(f"\n{'variant':12s} {'median':>9s} {'min':>9s} {'max':>9s} {'vs none':>8s} {'written':>10s}")
        for name, ts in per_epoch.items():
            med = statistics.median(ts)
            kib = statistics.median(written[name]) / 1024
            print(
                f"{name:12s} {med:8.3f}s {min(ts):8.3f}s {max(ts):8.3f}s "
                f"{100 * (med / base_med - 1):+7.1f}% {kib:8.1f} KiB"
            )


if __name__ == "__main__":
    main()
