"""One training run: Lightning Trainer, CSV metrics, per-epoch checkpoints, resume, final metrics.json.

Outputs under the output dir:
    csv/metrics.csv            one row per epoch (train_loss, val_loss, val_acc)
    checkpoints/last.ckpt      the latest epoch (rewritten after each epoch)
    hpc_ckpt_<n>.ckpt          Lightning's own, written only on SLURM's requeue signal
    metrics.json               {"val_loss", "val_acc", "epochs"} once training completes
"""

from __future__ import annotations

import csv
import json
import os
import re
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from lightning.pytorch import Trainer
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.loggers import CSVLogger
from lightning.pytorch.loggers.csv_logs import ExperimentWriter
from lightning.pytorch.plugins.environments import SLURMEnvironment
from lightning.pytorch.trainer.states import TrainerStatus
from torch.utils.data import DataLoader

from tiny_lightning.model import N_FEATURES, MLPClassifier, evaluate, load_teacher, make_dataset

if TYPE_CHECKING:  # cli imports this module lazily; only the type is needed here
    from tiny_lightning.cli import Config

# The rows live in memory: worker processes would only add start-up time.
warnings.filterwarnings("ignore", message=".*does not have many workers.*")
# AppendingCSVLogger keeps the earlier rows that this warning says are deleted.
warnings.filterwarnings("ignore", message="Experiment logs directory .* exists and is not empty")


class AppendingCSVLogger(CSVLogger):
    """A CSVLogger that keeps the rows an earlier run left in ``metrics.csv``.

    Lightning 2.6's CSV writer deletes an existing ``metrics.csv`` when it starts, so a resumed run
    would lose the epochs before the resume. This reads them first and writes them back (with the
    writer's header set to their columns) before the writer appends the new rows.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._earlier_rows_kept = False

    @property
    def experiment(self) -> ExperimentWriter:
        """The CSV writer, created on first use with the earlier rows put back."""
        if self._earlier_rows_kept:
            return super().experiment
        path = Path(self.log_dir) / ExperimentWriter.NAME_METRICS_FILE
        rows: list[dict[str, str]] = []
        if path.is_file():
            with path.open(newline="") as file:
                rows = list(csv.DictReader(file))
        writer = super().experiment  # deletes metrics.csv
        if rows:
            writer.metrics_keys = sorted(set().union(*rows))
            with path.open("w", newline="") as file:
                out = csv.DictWriter(file, fieldnames=writer.metrics_keys)
                out.writeheader()
                out.writerows(rows)
        self._earlier_rows_kept = True
        return writer


def newest_hpc_checkpoint(output_dir: Path) -> Path | None:
    """The ``hpc_ckpt_<n>.ckpt`` with the largest n in ``output_dir``, as Lightning itself would pick it.

    Lightning saves these on SLURM's requeue signal (``_SignalConnector._slurm_sigusr_handler_fn``)
    into ``default_root_dir``, and ``_CheckpointConnector._hpc_resume_path`` finds the newest.
    """
    found: list[tuple[int, Path]] = []
    for path in output_dir.glob("hpc_ckpt_*.ckpt"):
        match = re.fullmatch(r"hpc_ckpt_(\d+)\.ckpt", path.name)
        if match:
            found.append((int(match.group(1)), path))
    return max(found)[1] if found else None


def resume_checkpoint(output_dir: Path) -> Path | None:
    """The ``ckpt_path`` for ``Trainer.fit``: None for a fresh start, or when Lightning resumes by itself.

    - An HPC checkpoint (newer than ``last.ckpt``) under a detected SLURM job: return None, since
      Lightning's ``_CheckpointConnector._parse_ckpt_path`` turns ``ckpt_path=None`` into "hpc"
      when ``SLURMEnvironment.detect()`` holds and restores the newest ``hpc_ckpt_<n>.ckpt``.
    - The same checkpoint when SLURM is not detected (a rerun outside SLURM, or a job without
      ``SLURM_NTASKS``): Lightning would ignore it, so pass it explicitly.
    - Otherwise ``checkpoints/last.ckpt`` if an earlier run left one.
    """
    hpc = newest_hpc_checkpoint(output_dir)
    last = output_dir / "checkpoints" / "last.ckpt"
    if hpc is not None and (not last.exists() or hpc.stat().st_mtime >= last.stat().st_mtime):
        if SLURMEnvironment.detect():
            print(f"resuming from {hpc} (Lightning restores its HPC checkpoint itself)", flush=True)
            return None
        print(f"resuming from {hpc}", flush=True)
        return hpc
    if last.exists():
        print(f"resuming from {last}", flush=True)
        return last
    return None


def write_json(path: Path, data: dict[str, float | int]) -> None:
    """Write ``data`` as JSON atomically (a reader never sees half a file)."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    os.replace(tmp, path)


def train(dataset: str, output_dir: Path, config: Config, teacher_path: Path | None = None) -> None:
    """Train (or resume) to ``config.max_epochs`` epochs, then write ``output_dir/metrics.json``.

    With ``teacher_path`` (a checkpoint of an earlier run), the model is a student distilled from it.
    """
    if config.fail:
        raise RuntimeError("fail=true: failing on purpose at the start of training")
    output_dir.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(config.seed)  # the model's initialisation and the loader's shuffling

    splits = make_dataset(dataset, config.seed)
    train_loader = DataLoader(splits.train, batch_size=config.batch_size, shuffle=True)
    val_loader = DataLoader(splits.val, batch_size=config.batch_size)
    model = MLPClassifier(N_FEATURES, config.hidden, config.lr, config.epoch_sleep)
    if teacher_path is not None:
        teacher = load_teacher(str(teacher_path))
        model.distil_from(teacher)
        width = teacher.hparams["hidden"]
        print(f"distilling from {teacher_path} (teacher hidden={width}, student {config.hidden})", flush=True)

    trainer = Trainer(
        default_root_dir=output_dir,  # where Lightning saves and looks for hpc_ckpt_<n>.ckpt
        accelerator="cpu",
        devices=1,
        max_epochs=config.max_epochs,
        enable_progress_bar=False,
        log_every_n_steps=1,  # metrics are logged per epoch; this only silences the short-epoch warning
        # -> output_dir/csv/metrics.csv, written at every log call so a killed job keeps its rows
        logger=AppendingCSVLogger(output_dir, name="csv", version="", flush_logs_every_n_steps=1),
        # Saved when validation ends, i.e. before the epoch-end hooks (and epoch_sleep): a run killed
        # during the sleep resumes after that epoch. Lightning's default would save after the sleep.
        callbacks=[
            ModelCheckpoint(dirpath=output_dir / "checkpoints", save_last=True, save_on_train_epoch_end=False)
        ],
        # No `plugins`: under SLURM Lightning picks SLURMEnvironment(auto_requeue=True) by itself
        # (SLURMEnvironment.detect()), which saves hpc_ckpt_<n>.ckpt and requeues on SIGUSR1.
    )
    # weights_only=True: last.ckpt and hpc_ckpt_<n>.ckpt are read as tensors and plain values, never
    # as pickled code (Lightning passes it to torch.load, also for the HPC checkpoint it finds itself).
    trainer.fit(model, train_loader, val_loader, ckpt_path=resume_checkpoint(output_dir), weights_only=True)
    if trainer.state.status != TrainerStatus.FINISHED:
        return  # interrupted: no final metrics

    # Scores of the final weights on the whole validation split (equal to the last epoch's
    # val_loss/val_acc, and also available when a resumed run had no epoch left to train).
    val_loss, val_acc = evaluate(model, splits.val)
    write_json(
        output_dir / "metrics.json",
        {"val_loss": val_loss, "val_acc": val_acc, "epochs": trainer.current_epoch},
    )
    print(f"done: epochs={trainer.current_epoch} val_loss={val_loss:.4f} val_acc={val_acc:.4f}", flush=True)
