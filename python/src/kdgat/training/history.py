"""Per-epoch history of a training run: ``<run dir>/history.csv``, one row per epoch, appended
(a resumed run continues the file). The run report draws its curves from it and the job epilog
reads the peak memory of the process tree from it."""

from __future__ import annotations

import csv
import time
from pathlib import Path
from typing import Any

import lightning as L
import psutil
import torch

from kdgat.contract import HISTORY_FILE
from kdgat.training.callbacks import DataWaitCallback

COLUMNS = (
    "epoch",
    "time",
    "train_loss",
    "val_loss",
    "val_acc",
    "graphs_per_sec",
    "data_wait_fraction",
    "rss_tree_mb",
    "gpu_mem_mb",
)
# Sampling the whole process tree costs a few ms: at most once a second.
_SAMPLE_EVERY_S = 1.0


def tree_rss_mb(proc: psutil.Process) -> float:
    """RSS of a process and all its children (DataLoader workers), in MiB."""
    total = 0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            total += p.memory_info().rss
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return total / 2**20


class EpochHistoryCallback(L.Callback):
    """Appends one row per training epoch: losses and validation metric as logged, the epoch's
    throughput and data-wait (from the :class:`DataWaitCallback` of the same trainer), and the peak
    RSS of the process tree and the peak GPU memory so far."""

    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / HISTORY_FILE
        self.proc = psutil.Process()
        self.peak_tree_mb = 0.0
        self._last_sample = 0.0
        self._wait_seen = (0.0, 0.0, 0)  # wait, loop time, graphs at the previous epoch end
        #: The last row written (the tracking callback logs its throughput and data wait).
        self.last_row: dict[str, Any] = {}

    def _sample(self) -> None:
        now = time.monotonic()
        if now - self._last_sample >= _SAMPLE_EVERY_S:
            self._last_sample = now
            self.peak_tree_mb = max(self.peak_tree_mb, tree_rss_mb(self.proc))

    def on_train_batch_end(self, *args: Any, **kwargs: Any) -> None:
        self._sample()

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        # Validation runs before this hook, and the DataWaitCallback (earlier in the list) has
        # closed the epoch's timing: this row has the epoch's loss, val metric and throughput.
        self._write(trainer)

    def _write(self, trainer: L.Trainer) -> None:
        self._last_sample = 0.0
        self._sample()
        metrics = {
            k: float(v)
            for k, v in trainer.callback_metrics.items()
            if isinstance(v, torch.Tensor) and v.numel() == 1
        }
        wait = next((c for c in trainer.callbacks if isinstance(c, DataWaitCallback)), None)  # type: ignore[attr-defined]
        graphs_per_sec = data_wait = None
        if wait is not None:
            w0, t0, g0 = self._wait_seen
            dt = wait.loop - t0
            if dt > 0:
                graphs_per_sec = (wait.graphs - g0) / dt
                data_wait = (wait.wait - w0) / dt
            self._wait_seen = (wait.wait, wait.loop, wait.graphs)
        gpu = torch.cuda.max_memory_allocated() / 2**20 if torch.cuda.is_available() else None
        row = {
            "epoch": trainer.current_epoch,
            "time": round(time.time(), 3),
            "train_loss": metrics.get("train_loss"),
            "val_loss": metrics.get("val_loss"),
            "val_acc": metrics.get("val_acc"),
            "graphs_per_sec": None if graphs_per_sec is None else round(graphs_per_sec, 2),
            "data_wait_fraction": None if data_wait is None else round(data_wait, 4),
            "rss_tree_mb": round(self.peak_tree_mb, 1),
            "gpu_mem_mb": None if gpu is None else round(gpu, 1),
        }
        self.last_row = row
        new = not self.path.exists()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", newline="") as f:
            w = csv.DictWriter(f, fieldnames=COLUMNS)
            if new:
                w.writeheader()
            w.writerow({k: ("" if v is None else v) for k, v in row.items()})
