"""Trainer construction and the fit loop every stage shares: loaders, callbacks, checkpoints,
resume, the requeue handshake, batch sizing and OOM back-off."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.pytorch.callbacks import EarlyStopping, ModelCheckpoint
from lightning.pytorch.plugins.environments import LightningEnvironment, SLURMEnvironment
from torch.utils.data import Dataset
from torch_geometric.data import Batch, Data
from torch_geometric.loader import DataLoader

from kdgat.config import PipelineConfig, default_num_workers
from kdgat.training.batch_size import BatchSizeChoice, heuristic_batch_size, trial_batch_size
from kdgat.training.callbacks import (
    DataWaitCallback,
    MemoryMonitorCallback,
    ProfilerCallback,
    RequeueCallback,
)

log = logging.getLogger("kdgat.training")


_EXTRA_CALLBACKS: ContextVar[tuple[L.Callback, ...]] = ContextVar("kdgat_extra_callbacks", default=())


@contextmanager
def extra_callbacks(*callbacks: L.Callback) -> Iterator[None]:
    """Adds ``callbacks`` to every :func:`fit` inside the block (the tune worker's pruning callback
    reaches the stage's trainer this way, without a parameter through every stage)."""
    token = _EXTRA_CALLBACKS.set(_EXTRA_CALLBACKS.get() + callbacks)
    try:
        yield
    finally:
        _EXTRA_CALLBACKS.reset(token)


class RequeueRequested(Exception):
    """Training stopped on the pre-timeout signal after checkpointing (exit status 75)."""


def precision_for(cfg: PipelineConfig) -> str:
    if cfg.training.precision != "32" and not torch.cuda.is_available():
        log.info("precision %s needs a GPU: training in 32-bit on CPU", cfg.training.precision)
        return "32-true"
    return cfg.training.precision if cfg.training.precision != "32" else "32-true"


def make_loader(data: Dataset[Data], cfg: PipelineConfig, batch_size: int, *, shuffle: bool) -> DataLoader:
    d = cfg.data
    workers = default_num_workers() if d.num_workers is None else d.num_workers
    kwargs: dict[str, Any] = {}
    if workers > 0:
        kwargs["persistent_workers"] = d.persistent_workers
        kwargs["prefetch_factor"] = d.prefetch_factor
        # CUDA cannot be re-initialised in forked workers.
        if torch.cuda.is_available():
            kwargs["multiprocessing_context"] = "spawn"
    return DataLoader(
        data,  # type: ignore[arg-type]
        batch_size=batch_size,
        shuffle=shuffle,
        num_workers=workers,
        pin_memory=d.pin_memory and torch.cuda.is_available(),
        **kwargs,
    )


def _cluster_environment() -> L.fabric.plugins.environments.ClusterEnvironment:
    # The job script owns the requeue handshake: Lightning's own SLURM auto-requeue stays off.
    if int(os.environ.get("SLURM_NTASKS", "1")) > 1:
        return SLURMEnvironment(auto_requeue=False)
    return LightningEnvironment()


@dataclass
class FitResult:
    epochs: int
    batch: BatchSizeChoice
    graphs_per_sec: float
    data_wait_fraction: float
    peak_cpu_rss_mb: float
    peak_gpu_mem_mb: float | None
    seconds: float
    extra: dict[str, Any] = field(default_factory=dict)


def choose_batch_size(
    cfg: PipelineConfig,
    model: torch.nn.Module,
    samples: Sequence[Data],
    loss_fn: Callable[[torch.nn.Module, Batch], torch.Tensor],
) -> BatchSizeChoice:
    t = cfg.training
    if t.memory_estimation == "fixed":
        return BatchSizeChoice(t.batch_size, "fixed")
    if t.memory_estimation == "heuristic":
        return heuristic_batch_size(model, samples, budget_mb=t.memory_budget_mb, safety=t.safety_factor)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    choice = trial_batch_size(
        model, samples, loss_fn, device=device, budget_mb=t.memory_budget_mb, safety=t.safety_factor
    )
    model.cpu()
    return choice


def fit(
    module: L.LightningModule,
    *,
    cfg: PipelineConfig,
    run_dir: Path,
    train: Dataset[Data] | None,
    val: Dataset[Data] | None,
    batch: BatchSizeChoice,
) -> FitResult:
    """Trains ``module`` in ``run_dir``: resumes from ``checkpoints/last.ckpt`` when present, halves
    the batch size on CUDA OOM (bounded by ``training.max_oom_retries``), raises
    :class:`RequeueRequested` after the signal handshake. ``train=None``: the module makes its own
    training loader each epoch (curriculum) from its ``batch_size`` attribute."""
    import time

    t0 = time.perf_counter()
    ckpt_dir = run_dir / "checkpoints"
    batch_size = batch.batch_size
    for attempt in range(cfg.training.max_oom_retries + 1):
        memory, wait, requeue = (
            MemoryMonitorCallback(),
            DataWaitCallback(),
            RequeueCallback(run_dir),
        )
        callbacks: list[L.Callback] = [
            memory,
            wait,
            requeue,
            ModelCheckpoint(dirpath=ckpt_dir, save_last=True, save_top_k=0),
        ]
        if cfg.training.patience > 0 and val is not None:
            callbacks.append(EarlyStopping("val_loss", patience=cfg.training.patience))
        if cfg.training.profile:
            callbacks.append(ProfilerCallback(run_dir, cfg.training.profile_steps))
        callbacks.extend(_EXTRA_CALLBACKS.get())
        trainer = make_trainer(cfg, run_dir, callbacks)
        resume = ckpt_dir / "last.ckpt"
        val_loader = make_loader(val, cfg, batch_size, shuffle=False) if val is not None else None
        ckpt_path = resume if resume.exists() else None
        if ckpt_path:
            log.info("resuming from %s", ckpt_path)
        try:
            if train is None:
                module.batch_size = batch_size  # type: ignore[assignment]
                trainer.fit(module, val_dataloaders=val_loader, ckpt_path=ckpt_path)
            else:
                train_loader = make_loader(train, cfg, batch_size, shuffle=True)
                trainer.fit(module, train_loader, val_loader, ckpt_path=ckpt_path)
        except torch.OutOfMemoryError:
            if attempt == cfg.training.max_oom_retries or batch_size <= 1:
                raise
            batch_size = max(1, batch_size // 2)
            log.warning("CUDA out of memory: retrying with batch size %d", batch_size)
            torch.cuda.empty_cache()
            continue
        if requeue.acknowledged:
            raise RequeueRequested(str(resume))
        return FitResult(
            epochs=trainer.current_epoch,
            batch=BatchSizeChoice(batch_size, batch.mode, batch.max_fit, batch.trials),
            graphs_per_sec=wait.graphs_per_sec,
            data_wait_fraction=wait.fraction,
            peak_cpu_rss_mb=memory.peak_rss_mb,
            peak_gpu_mem_mb=memory.peak_gpu_mb,
            seconds=time.perf_counter() - t0,
        )
    raise AssertionError("unreachable")


def make_trainer(cfg: PipelineConfig, run_dir: Path, callbacks: list[L.Callback]) -> L.Trainer:
    gpus = torch.cuda.device_count()
    ntasks = int(os.environ.get("SLURM_NTASKS", "1"))
    ddp = gpus > 0 and ntasks > 1
    return L.Trainer(
        default_root_dir=run_dir,
        max_epochs=cfg.training.max_epochs,
        accelerator="gpu" if gpus else "cpu",
        devices=int(os.environ.get("SLURM_NTASKS_PER_NODE", "1")) if ddp else 1,
        num_nodes=int(os.environ.get("SLURM_NNODES", "1")) if ddp else 1,
        strategy="ddp" if ddp else "auto",
        precision=precision_for(cfg),  # type: ignore[arg-type]
        callbacks=callbacks,
        plugins=[_cluster_environment()],
        logger=False,
        enable_progress_bar=os.isatty(2),
        enable_model_summary=False,
        reload_dataloaders_every_n_epochs=1,
        num_sanity_val_steps=0,
        log_every_n_steps=10,
    )
