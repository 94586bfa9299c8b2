"""The requeue handshake, Python's half (the job script's half and the walk-through: docs/CONTRACTS.md).

SLURM sends the job script the pre-timeout signal (``--signal=B:<SIG>@<lead>``); the script exports
its name as ``KD_GAT_REQUEUE_SIGNAL`` and forwards it to the pipeline. Here:

- :func:`signal_name` / :func:`arm`: which signal, and a handler for it that keeps any earlier one;
- :class:`RequeueCallback`: in training, finishes the step, saves the checkpoint, acknowledges and
  stops the trainer; :func:`kdgat.training.fit.fit` then raises :class:`RequeueRequested`;
- :func:`acknowledge`: writes ``<run dir>/requeue_ack.json`` (the script requeues only after it);
- :data:`EXIT_STATUS`: what the process exits with (75, EX_TEMPFAIL) so the script requeues;
- :func:`resume_checkpoint`: a later start in the same run dir resumes from ``checkpoints/last.ckpt``.

The tune worker uses the same pieces: :func:`arm` for the signal, :func:`acknowledge` with its own
fields, :data:`EXIT_STATUS`. The values (file names, fields, variable, status) are the run contract's
(:mod:`kdgat.contract`).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any, Literal

import lightning as L

from kdgat.contract import (
    ACK_FILE,
    CHECKPOINT_FILE,
    CONTRACT,
    DEFAULT_REQUEUE_SIGNAL,
    REQUEUE_EXIT_STATUS,
    REQUEUE_SIGNAL_ENV,
)

log = logging.getLogger("kdgat.training")

#: The exit status after a checkpoint and an acknowledgement: the job script requeues on it.
EXIT_STATUS = REQUEUE_EXIT_STATUS


class RequeueRequested(Exception):
    """Training stopped on the pre-timeout signal after checkpointing (exit with :data:`EXIT_STATUS`)."""


def signal_name() -> str:
    """The signal's name without ``SIG`` (``USR1``): ``$KD_GAT_REQUEUE_SIGNAL``, else the contract's
    default."""
    return os.environ.get(REQUEUE_SIGNAL_ENV, DEFAULT_REQUEUE_SIGNAL).upper().removeprefix("SIG")


def arm(on_signal: Callable[[], None]) -> tuple[int, Any]:
    """Calls ``on_signal`` when the requeue signal arrives; a Python handler installed before (the
    tune worker's, under a trial's trainer) is called too. Returns ``(signum, previous handler)``
    for :func:`disarm`."""
    signum: int = getattr(signal, f"SIG{signal_name()}")
    previous = signal.getsignal(signum)

    def handler(sig: int, frame: FrameType | None) -> None:
        on_signal()
        if callable(previous):
            previous(sig, frame)

    signal.signal(signum, handler)
    return signum, previous


def disarm(armed: tuple[int, Any]) -> None:
    signal.signal(*armed)


def acknowledge(run_dir: Path, kind: Literal["stage", "tune"], **fields: Any) -> Path:
    """Writes ``<run_dir>/requeue_ack.json``: ``time`` and the contract's fields for ``kind``."""
    doc = {"time": time.time(), **fields}
    expected = getattr(CONTRACT.requeue.ack_fields, kind)
    if tuple(doc) != expected:
        raise ValueError(f"requeue ack of a {kind}: fields {tuple(doc)}, the run contract says {expected}")
    path = run_dir / ACK_FILE
    path.write_text(json.dumps(doc))
    return path


def checkpoint_path(run_dir: Path) -> Path:
    """``<run_dir>/checkpoints/last.ckpt``: saved every epoch and on the signal."""
    return run_dir / CHECKPOINT_FILE


def resume_checkpoint(run_dir: Path) -> Path | None:
    """The checkpoint a start in ``run_dir`` resumes from (a requeued job's second life), or None."""
    path = checkpoint_path(run_dir)
    return path if path.exists() else None


class RequeueCallback(L.Callback):
    """The pre-timeout handshake in training: on the signal the current step finishes, a checkpoint
    is saved, ``requeue_ack.json`` is written and training stops; the stage then exits with
    :data:`EXIT_STATUS` so the script requeues."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.signame = signal_name()
        self.requested = False
        self.acknowledged = False
        self._armed: tuple[int, Any] | None = None

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        def requested() -> None:
            log.warning("received SIG%s: checkpointing at the end of this step for a requeue", self.signame)
            self.requested = True

        self._armed = arm(requested)
        log.info("requeue handshake armed on SIG%s", self.signame)

    def teardown(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if self._armed is not None:
            disarm(self._armed)
            self._armed = None

    def _check(self, trainer: L.Trainer) -> None:
        if not self.requested or self.acknowledged:
            return
        ckpt = checkpoint_path(self.run_dir)
        trainer.save_checkpoint(ckpt)
        acknowledge(
            self.run_dir,
            "stage",
            epoch=trainer.current_epoch,
            global_step=trainer.global_step,
            checkpoint=str(ckpt),
        )
        self.acknowledged = True
        trainer.should_stop = True
        log.warning("checkpoint %s saved and acknowledged; stopping for the requeue", ckpt)

    def on_train_batch_end(self, trainer: L.Trainer, *args: Any, **kwargs: Any) -> None:
        self._check(trainer)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._check(trainer)
