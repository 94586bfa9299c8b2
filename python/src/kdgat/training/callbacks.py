"""Lightning callbacks: memory, profiling (P2) and data-loader wait (the requeue handshake's callback is
in :mod:`kdgat.training.requeue`)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import lightning as L
import psutil
import torch
from lightning.pytorch.profilers import PassThroughProfiler

from kdgat.contract import PROFILER_DIR

log = logging.getLogger("kdgat.training")


class MemoryMonitorCallback(L.Callback):
    """Peak CPU RSS (sampled every batch) and GPU allocated/peak memory of the training process.

    The peak must come from this process: a fresh Python started after the job (the original
    epilog's approach) always reports 0."""

    def __init__(self) -> None:
        self.proc = psutil.Process()
        self.peak_rss_mb = 0.0
        self.peak_gpu_mb: float | None = None

    def _sample(self) -> None:
        self.peak_rss_mb = max(self.peak_rss_mb, self.proc.memory_info().rss / 2**20)
        if torch.cuda.is_available():
            self.peak_gpu_mb = torch.cuda.max_memory_allocated() / 2**20

    def on_train_batch_end(self, *args: Any, **kwargs: Any) -> None:
        self._sample()

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._sample()
        pl_module.log("peak_rss_mb", self.peak_rss_mb, prog_bar=False)


class LoaderWaitProfiler(PassThroughProfiler):
    """Lightning's profiler hook, used for one action only: the training loop fetching its next
    batch (``[_TrainingEpochLoop].train_dataloader_next``), which is where it blocks on the loader."""

    FETCH = "train_dataloader_next"

    def __init__(self) -> None:
        super().__init__()
        self.fetch = 0.0
        self.first_fetch_at: float | None = None
        self._since = 0.0

    def start(self, action_name: str) -> None:
        if action_name.endswith(self.FETCH):
            self._since = time.perf_counter()
            if self.first_fetch_at is None:
                self.first_fetch_at = self._since

    def stop(self, action_name: str) -> None:
        if action_name.endswith(self.FETCH):
            self.fetch += time.perf_counter() - self._since


class DataWaitCallback(L.Callback):
    """The share of the training loop spent waiting on the DataLoader, and the loop's graphs/s.

    Waiting: Lightning fetching the next batch (timed by :class:`LoaderWaitProfiler`, which
    :func:`kdgat.training.fit.make_trainer` installs), plus, in each epoch, the time from the epoch's
    start to its first fetch (where a new epoch starts the loader's workers). The loop: each epoch's
    start to the end of its last training batch, validation inside it excluded. Checked against the
    time blocked in the loader's iterator in bench/train-throughput (emulate mode). Without the
    profiler (a trainer made elsewhere) it falls back to the gap between training batches."""

    def __init__(self) -> None:
        self.wait = 0.0
        self.loop = 0.0
        self.steps = 0
        self.graphs = 0
        self._profiler: LoaderWaitProfiler | None = None
        self._epoch_start = 0.0
        self._last_end: float | None = None
        self._gaps = 0.0
        self._in_val_since: float | None = None
        self._val = 0.0

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        profiler = getattr(trainer, "profiler", None)
        self._profiler = profiler if isinstance(profiler, LoaderWaitProfiler) else None

    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._epoch_start = self._last_end = time.perf_counter()
        self._gaps = self._val = 0.0
        if self._profiler is not None:
            self._profiler.fetch = 0.0
            self._profiler.first_fetch_at = None

    def on_train_batch_start(
        self, trainer: L.Trainer, pl_module: L.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        if self._last_end is not None:
            self._gaps += time.perf_counter() - self._last_end
        self.graphs += int(getattr(batch, "num_graphs", 0))

    def on_train_batch_end(self, *args: Any, **kwargs: Any) -> None:
        self._last_end = time.perf_counter()
        self.steps += 1

    def on_validation_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._in_val_since = time.perf_counter()

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self._in_val_since is not None and self._last_end is not None:
            spent = time.perf_counter() - self._in_val_since
            self._val += spent
            self._last_end += spent  # a validation inside the epoch is not waiting on the loader
        self._in_val_since = None

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self._last_end is None:
            return
        end = self._last_end
        self.loop += max(0.0, end - self._epoch_start - self._val)
        p = self._profiler
        if p is not None and p.first_fetch_at is not None:
            self.wait += p.fetch + max(0.0, p.first_fetch_at - self._epoch_start)
        else:
            self.wait += self._gaps
        self._last_end = None

    @property
    def fraction(self) -> float:
        return min(1.0, self.wait / self.loop) if self.loop > 0 else 0.0

    @property
    def graphs_per_sec(self) -> float:
        return self.graphs / self.loop if self.loop > 0 else 0.0


class ProfilerCallback(L.Callback):
    """P2: torch.profiler over a few steps (CPU, and CUDA when present); writes a Chrome/Perfetto
    trace and a table of the top operators to ``<run_dir>/profiler_traces/``."""

    def __init__(self, run_dir: Path, steps: int) -> None:
        self.out = run_dir / PROFILER_DIR
        self.steps = steps
        self.prof: torch.profiler.profile | None = None
        self.done = False

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        activities = [torch.profiler.ProfilerActivity.CPU]
        if torch.cuda.is_available():
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        else:
            log.info("profiler: no CUDA device, profiling CPU activity only")

        def ready(prof: torch.profiler.profile) -> None:
            prof.export_chrome_trace(str(self.out / f"trace_step{prof.step_num}.json"))
            sort = "cuda_time_total" if torch.cuda.is_available() else "cpu_time_total"
            (self.out / "top_ops.txt").write_text(prof.key_averages().table(sort_by=sort, row_limit=25))
            self.done = True

        self.prof = torch.profiler.profile(
            activities=activities,
            schedule=torch.profiler.schedule(wait=1, warmup=1, active=self.steps, repeat=1),
            on_trace_ready=ready,
            record_shapes=True,
            profile_memory=True,
        )
        self.prof.__enter__()

    def on_train_batch_end(self, *args: Any, **kwargs: Any) -> None:
        if self.prof is not None and not self.done:
            self.prof.step()

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.prof is not None:
            self.prof.__exit__(None, None, None)
            self.prof = None


@contextmanager
def memory_snapshot(path: Path, *, max_entries: int = 100_000) -> Iterator[None]:
    """Record CUDA allocator history and dump it to ``path`` (open at pytorch.org/memory_viz).
    Without CUDA this is a logged no-op."""
    if not torch.cuda.is_available():
        log.warning(
            "training.memory_snapshot: no CUDA device, so no CUDA allocator history to record: "
            "%s is not written",
            path.name,
        )
        yield
        return
    torch.cuda.memory._record_memory_history(max_entries=max_entries)
    try:
        yield
    finally:
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.cuda.memory._dump_snapshot(str(path))
        torch.cuda.memory._record_memory_history(enabled=None)
        log.info("CUDA memory snapshot written to %s (open it at pytorch.org/memory_viz)", path)
