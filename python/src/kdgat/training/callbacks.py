"""Lightning callbacks: memory, profiling (P2), data-loader wait, and the requeue handshake."""

from __future__ import annotations

import json
import logging
import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import lightning as L
import psutil
import torch

log = logging.getLogger("kdgat.training")

REQUEUE_EXIT = 75  # EX_TEMPFAIL: checkpointed, please requeue
ACK_FILE = "requeue_ack.json"


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


class DataWaitCallback(L.Callback):
    """Where the training loop's time goes: waiting on the DataLoader (end of one training step to
    the start of the next; the first batch of an epoch counts from the epoch's start) or in the
    step (start to end of a training batch). Validation and checkpointing between epochs are
    neither. ``fraction`` = wait / (wait + step time); ``graphs_per_sec`` = graphs / the same total.
    Checked against a known step time in bench/train-throughput (emulate mode)."""

    def __init__(self) -> None:
        self.wait = 0.0
        self.step = 0.0
        self.steps = 0
        self.graphs = 0
        self._last_end: float | None = None
        self._start = 0.0
        self._in_val_since = 0.0

    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._last_end = time.perf_counter()

    def on_train_batch_start(
        self, trainer: L.Trainer, pl_module: L.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        self._start = time.perf_counter()
        if self._last_end is not None:
            self.wait += self._start - self._last_end
        self.graphs += int(getattr(batch, "num_graphs", 0))

    def on_train_batch_end(self, *args: Any, **kwargs: Any) -> None:
        self._last_end = time.perf_counter()
        self.step += self._last_end - self._start
        self.steps += 1

    def on_validation_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._in_val_since = time.perf_counter()

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        # A validation inside the epoch (val_check_interval < 1) is not time spent waiting.
        if self._last_end is not None:
            self._last_end += time.perf_counter() - self._in_val_since

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._last_end = None

    @property
    def total(self) -> float:
        return self.wait + self.step

    @property
    def fraction(self) -> float:
        return self.wait / self.total if self.total > 0 else 0.0

    @property
    def graphs_per_sec(self) -> float:
        return self.graphs / self.total if self.total > 0 else 0.0


class ProfilerCallback(L.Callback):
    """P2: torch.profiler over a few steps (CPU, and CUDA when present); writes a Chrome/Perfetto
    trace and a table of the top operators to ``<run_dir>/profiler_traces/``."""

    def __init__(self, run_dir: Path, steps: int) -> None:
        self.out = run_dir / "profiler_traces"
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


class RequeueCallback(L.Callback):
    """The pre-timeout handshake with the job script: on the signal (``KD_GAT_REQUEUE_SIGNAL``,
    default USR1) the current step finishes, a checkpoint is saved, ``requeue_ack.json`` is
    written and training stops; the stage then exits with status 75 so the script requeues."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.signame = os.environ.get("KD_GAT_REQUEUE_SIGNAL", "USR1").upper().removeprefix("SIG")
        self.requested = False
        self.acknowledged = False

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        signum = getattr(signal, f"SIG{self.signame}")
        previous = signal.getsignal(signum)
        self._restore = (signum, previous)

        def handler(sig: int, frame: Any) -> None:
            log.warning("received SIG%s: checkpointing at the end of this step for a requeue", self.signame)
            self.requested = True
            if callable(previous):  # an outer handler (the tune worker's) hears it too
                previous(sig, frame)

        signal.signal(signum, handler)
        log.info("requeue handshake armed on SIG%s", self.signame)

    def teardown(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        restore = getattr(self, "_restore", None)
        if restore is not None:
            signal.signal(*restore)

    def _check(self, trainer: L.Trainer) -> None:
        if not self.requested or self.acknowledged:
            return
        ckpt = self.run_dir / "checkpoints" / "last.ckpt"
        trainer.save_checkpoint(ckpt)
        (self.run_dir / ACK_FILE).write_text(
            json.dumps(
                {
                    "time": time.time(),
                    "epoch": trainer.current_epoch,
                    "global_step": trainer.global_step,
                    "checkpoint": str(ckpt),
                }
            )
        )
        self.acknowledged = True
        trainer.should_stop = True
        log.warning("checkpoint %s saved and acknowledged; stopping for the requeue", ckpt)

    def on_train_batch_end(self, trainer: L.Trainer, *args: Any, **kwargs: Any) -> None:
        self._check(trainer)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._check(trainer)


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
