"""One identity per stage across requeues: the ids of its TensorBoard, MLflow and W&B runs are kept
in ``checkpoints/tracking.json`` beside ``last.ckpt``. A start that resumes from ``last.ckpt`` (a
requeued job, a resubmission, an OOM retry) reads them and continues the same runs; a start without
a checkpoint begins new ones. The file also says how far the runs were logged (epoch, step), so a
resumed start never logs an epoch or a step twice.

The parent of a sweep's or a study's runs is created once, by whichever task comes first: under an
exclusive lock on ``<key dir>/.tracking-parent.lock`` the first task creates it and writes its id to
``<key dir>/tracking-parent.json``; the others read it there.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import string
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kdgat.training.requeue import checkpoint_path

IDENTITY_FILE = "tracking.json"
PARENT_FILE = "tracking-parent.json"
PARENT_LOCK = ".tracking-parent.lock"


@dataclass
class Identity:
    #: TensorBoard: the log directory (one run = one directory, whatever the number of files in it).
    tensorboard_dir: str | None = None
    mlflow_uri: str | None = None
    mlflow_experiment_id: str | None = None
    mlflow_run_id: str | None = None
    mlflow_parent_run_id: str | None = None
    wandb_id: str | None = None
    wandb_project: str | None = None
    wandb_group: str | None = None
    #: The last epoch and step logged (-1: none yet).
    logged_epoch: int = -1
    logged_step: int = -1
    #: How many times the stage started with these ids (1: the first life).
    lives: int = 0
    #: An epoch cut short by the requeue signal: ``{epoch, step, metrics}``, logged by the next life
    #: if it goes on with the next epoch, dropped if it runs that epoch again.
    partial_epoch: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def identity_path(run_dir: Path) -> Path:
    return checkpoint_path(run_dir).parent / IDENTITY_FILE


def load(run_dir: Path) -> tuple[Identity, bool]:
    """``(identity, resumed)``: the kept ids when the stage resumes from ``last.ckpt`` and they
    were kept, else a fresh identity."""
    path = identity_path(run_dir)
    if checkpoint_path(run_dir).exists() and path.exists():
        try:
            doc = json.loads(path.read_text())
            known = {k: v for k, v in doc.items() if k in Identity.__dataclass_fields__}
            return Identity(**known), True
        except (OSError, ValueError, TypeError):
            pass
    return Identity(), False


def save(run_dir: Path, identity: Identity) -> None:
    path = identity_path(run_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.partial")
    tmp.write_text(json.dumps(asdict(identity), indent=2))
    tmp.replace(path)


def new_wandb_id() -> str:
    """A W&B run id (8 lowercase letters and digits, as W&B makes them)."""
    alphabet = string.ascii_lowercase + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(8))


@contextmanager
def _locked(key_dir: Path) -> Iterator[None]:
    key_dir.mkdir(parents=True, exist_ok=True)
    with (key_dir / PARENT_LOCK).open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # blocks until the task holding it has written the id
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def parent_id(key_dir: Path, backend: str, scope: str, create: Callable[[], str]) -> str:
    """The id of the parent run of ``key_dir`` in ``backend`` at ``scope`` (e.g. the MLflow
    tracking URI and experiment): read from ``tracking-parent.json``, or made by ``create`` and
    written there, under the directory's lock, so tasks starting together share one parent."""
    with _locked(key_dir):
        path = key_dir / PARENT_FILE
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            doc = {}
        entry = f"{backend} {scope}"
        if isinstance(doc.get(entry), str):
            return str(doc[entry])
        made = create()
        doc[entry] = made
        tmp = path.with_name(f".{path.name}.{os.getpid()}.partial")
        tmp.write_text(json.dumps(doc, indent=2))
        tmp.replace(path)
        return made
