"""Trainer construction and the fit loop every stage shares: loaders, callbacks, checkpoints,
batch sizing; resume and the requeue handshake come from :mod:`kdgat.training.requeue`, the OOM
back-off from :mod:`kdgat.training.oom`."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import socket
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import lightning as L
import torch
from lightning.pytorch.callbacks import EarlyStopping, ModelCheckpoint
from lightning.pytorch.plugins.environments import LightningEnvironment, SLURMEnvironment
from lightning.pytorch.strategies import DDPStrategy
from torch.utils.data import Dataset
from torch_geometric.data import Batch, Data

from kdgat.config import PipelineConfig
from kdgat.models import forward_check
from kdgat.tracking.session import fit_tracking
from kdgat.training.batch_size import BatchSizeChoice, heuristic_batch_size, trial_batch_size
from kdgat.training.callbacks import (
    DataWaitCallback,
    LoaderWaitProfiler,
    MemoryMonitorCallback,
    ProfilerCallback,
    memory_snapshot,
)
from kdgat.training.history import EpochHistoryCallback
from kdgat.training.loader import make_loader
from kdgat.training.oom import OomBackoff, start_batch_size
from kdgat.training.requeue import RequeueCallback, RequeueRequested, checkpoint_path, resume_checkpoint

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


@dataclass(frozen=True)
class PrecisionChoice:
    """The precision asked for (``training.precision``) and the Lightning precision that runs."""

    requested: str
    used: str
    reason: str | None = None


def precision_for(cfg: PipelineConfig) -> PrecisionChoice:
    """``training.precision`` as Lightning runs it here. Never silently different: a substitute is
    logged, and recorded in metrics.json (``precision``)."""
    t = cfg.training
    if t.precision == "32":
        return PrecisionChoice("32", "32-true")
    if t.precision == "16-mixed" and not torch.cuda.is_available():
        used = "32-true" if t.precision_fallback == "32" else "bf16-mixed"
        reason = "16-mixed (fp16 autocast) needs a CUDA device and there is none"
        # The first words are what logs are searched for (the examples' e2e): keep them stable.
        log.warning(
            "precision 16-mixed needs a GPU: training in %s on CPU (training.precision_fallback=%s)",
            "32-bit" if used == "32-true" else "bf16-mixed",
            t.precision_fallback,
        )
        return PrecisionChoice(t.precision, used, reason)
    if (
        t.precision == "bf16-mixed"
        and torch.cuda.is_available()
        and not torch.cuda.is_bf16_supported(including_emulation=False)
    ):
        reason = f"{torch.cuda.get_device_name()} has no bfloat16 support (Volta and older)"
        log.warning("precision: bf16-mixed: %s: training in 16-mixed instead", reason)
        return PrecisionChoice(t.precision, "16-mixed", reason)
    return PrecisionChoice(t.precision, t.precision)


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
    precision: PrecisionChoice = PrecisionChoice("32", "32-true")
    #: Every fit attempt: ``{batch_size, epoch, global_step, outcome, reason?, resumed_from?}``.
    attempts: list[dict[str, Any]] = field(default_factory=list)
    memory_snapshot: str | None = None
    world_size: int = 1
    #: The last validation loss (averaged over the ranks under DDP), None without validation.
    val_loss: float | None = None
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
    # A simulated OOM (tests) drives the GPU branch of the search on any device.
    simulated_oom = forward_check.installed()
    probe: Literal["oom", "budget"] = "oom" if device.type == "cuda" or simulated_oom else "budget"
    choice = trial_batch_size(
        model,
        samples,
        loss_fn,
        device=device,
        budget_mb=t.memory_budget_mb,
        safety=t.safety_factor,
        probe=probe,
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
    the batch size on CUDA OOM and resumes from the last checkpoint (bounded by
    ``training.max_oom_retries``; every attempt is in ``FitResult.attempts``), raises
    :class:`RequeueRequested` after the signal handshake. ``train=None``: the module makes its own
    training loader each epoch (curriculum) from its ``batch_size`` attribute."""
    t0 = time.perf_counter()
    resume = checkpoint_path(run_dir)
    ckpt_dir = resume.parent
    precision = precision_for(cfg)
    snapshot = run_dir / "memory_snapshot.pickle" if cfg.training.memory_snapshot else None
    backoff = OomBackoff(start_batch_size(batch.batch_size), cfg.training.max_oom_retries)
    attempts: list[dict[str, Any]] = []
    with (
        memory_snapshot(snapshot) if snapshot else nullcontext(),
        fit_tracking(cfg, run_dir) as tracking,
    ):
        for attempt in backoff.attempts():
            batch_size = backoff.batch_size
            memory, wait, requeue = MemoryMonitorCallback(), DataWaitCallback(), RequeueCallback(run_dir)
            callbacks: list[L.Callback] = [
                memory,
                wait,
                requeue,
                # checkpoints/last.ckpt after every epoch. (save_last=True with save_top_k=0 never
                # writes it in Lightning 2.6: "last" is only a copy of a top-k save.)
                ModelCheckpoint(
                    dirpath=ckpt_dir, filename="last", save_top_k=1, enable_version_counter=False
                ),
                EpochHistoryCallback(run_dir),
            ]
            if cfg.training.patience > 0 and val is not None:
                callbacks.append(EarlyStopping("val_loss", patience=cfg.training.patience))
            if cfg.training.profile:
                callbacks.append(ProfilerCallback(run_dir, cfg.training.profile_steps))
            callbacks.extend(_EXTRA_CALLBACKS.get())
            if tracking is not None:
                # Last: it reads what the history row and the validation metrics of the epoch say.
                callbacks.append(tracking.callback(batch_size))
            trainer = make_trainer(cfg, run_dir, callbacks, precision=precision)
            val_loader = make_loader(val, cfg, batch_size, shuffle=False) if val is not None else None
            ckpt_path = resume_checkpoint(run_dir)
            if ckpt_path:
                log.info("resuming from %s", ckpt_path)
            record: dict[str, Any] = {"attempt": attempt + 1, "batch_size": batch_size}
            if ckpt_path:
                record["resumed_from"] = str(ckpt_path)
            attempts.append(record)
            try:
                if train is None:
                    module.batch_size = batch_size  # type: ignore[assignment]
                    trainer.fit(module, val_dataloaders=val_loader, ckpt_path=ckpt_path, weights_only=True)
                else:
                    train_loader = make_loader(train, cfg, batch_size, shuffle=True)
                    # weights_only=True: the checkpoint (in a scratch dir) is read as tensors and plain
                    # values only, never as pickled code (tests/test_weights_only.py checks every load).
                    trainer.fit(module, train_loader, val_loader, ckpt_path=ckpt_path, weights_only=True)
            except torch.OutOfMemoryError as e:
                retry = backoff.after_oom(
                    e,
                    attempt=attempt,
                    record=record,
                    epoch=trainer.current_epoch,
                    global_step=trainer.global_step,
                    resume=resume,
                )
                if not retry:
                    raise
                del trainer
                backoff.free_memory()
                continue
            record.update(
                epoch=trainer.current_epoch,
                global_step=trainer.global_step,
                outcome="requeue" if requeue.acknowledged else "complete",
            )
            if requeue.acknowledged:
                raise RequeueRequested(str(resume))
            if trainer.world_size > 1:
                _write_rank_record(run_dir, trainer, module)
            result = FitResult(
                epochs=trainer.current_epoch,
                batch=BatchSizeChoice(batch_size, batch.mode, batch.max_fit, batch.trials),
                graphs_per_sec=wait.graphs_per_sec,
                data_wait_fraction=wait.fraction,
                peak_cpu_rss_mb=memory.peak_rss_mb,
                peak_gpu_mem_mb=memory.peak_gpu_mb,
                seconds=time.perf_counter() - t0,
                precision=precision,
                attempts=attempts,
                world_size=trainer.world_size,
                val_loss=float(v) if (v := trainer.callback_metrics.get("val_loss")) is not None else None,
            )
            break
        else:
            raise AssertionError("unreachable: OomBackoff.attempts() ends by raising")
    # The snapshot is dumped when memory_snapshot() exits, so it is named only after the block.
    if snapshot is not None and snapshot.exists():
        result.memory_snapshot = str(snapshot)
    return result


def _write_rank_record(run_dir: Path, trainer: L.Trainer, module: L.LightningModule) -> None:
    """Under DDP every rank writes ``ddp/rank_<k>.json``: that it ran, where, how far, and a hash
    of its parameters (identical on every rank when the gradients were synchronised)."""
    digest = hashlib.sha256()
    for p in module.parameters():
        digest.update(p.detach().cpu().contiguous().numpy().tobytes())
    out = run_dir / "ddp" / f"rank_{trainer.global_rank}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "rank": trainer.global_rank,
                "world_size": trainer.world_size,
                "node": socket.gethostname(),
                "pid": os.getpid(),
                "epochs": trainer.current_epoch,
                "global_step": trainer.global_step,
                "params_sha256": digest.hexdigest(),
            }
        )
    )


def distributed_layout() -> tuple[int, int] | None:
    """``(tasks per node, nodes)`` when this process is one of several SLURM tasks (srun), else None."""
    ntasks = int(os.environ.get("SLURM_NTASKS", "1"))
    if ntasks <= 1:
        return None
    nodes = int(os.environ.get("SLURM_NNODES", os.environ.get("SLURM_JOB_NUM_NODES", "1")))
    per_node = os.environ.get("SLURM_NTASKS_PER_NODE", "")
    return (int(per_node) if per_node.isdigit() else ntasks // max(1, nodes)), nodes


def make_trainer(
    cfg: PipelineConfig,
    run_dir: Path,
    callbacks: list[L.Callback],
    *,
    precision: PrecisionChoice | None = None,
) -> L.Trainer:
    """One trainer per fit attempt. Several SLURM tasks (``srun``): DDP with one process per task,
    NCCL on GPUs, gloo on CPUs, the layout from Lightning's SLURM environment."""
    gpus = torch.cuda.device_count()
    layout = distributed_layout()
    strategy: str | DDPStrategy = "auto"
    devices, nodes = 1, 1
    if layout is not None:
        devices, nodes = layout
        strategy = DDPStrategy(process_group_backend="nccl" if gpus else "gloo")
    return L.Trainer(
        default_root_dir=run_dir,
        max_epochs=cfg.training.max_epochs,
        limit_train_batches=cfg.training.limit_train_batches or 1.0,
        accelerator="gpu" if gpus else "cpu",
        devices=devices,
        num_nodes=nodes,
        strategy=strategy,
        precision=(precision or precision_for(cfg)).used,  # type: ignore[arg-type]
        callbacks=callbacks,
        plugins=[_cluster_environment()],
        logger=False,
        enable_progress_bar=os.isatty(2),
        enable_model_summary=False,
        reload_dataloaders_every_n_epochs=1,
        num_sanity_val_steps=0,
        log_every_n_steps=10,
        profiler=LoaderWaitProfiler(),  # times the loader fetches for DataWaitCallback
    )
