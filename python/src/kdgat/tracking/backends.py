"""The three trackers behind one small interface (:class:`Backend`): TensorBoard event files,
an MLflow run, a W&B run. Each imports its package only when it is opened, so ``import kdgat``
and the stages that do not train stay as fast as before.

Axes: per-step scalars are ``step/<name>`` at the optimizer step (``trainer.global_step``),
per-epoch scalars ``epoch/<name>`` at the epoch index (TensorBoard, MLflow) or with an ``epoch``
field W&B's charts use as their x axis (W&B's own step is the optimizer step).
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Protocol

log = logging.getLogger("kdgat.tracking")

Scalars = dict[str, float]
Params = dict[str, str | int | float | bool]

#: MLflow metric names allow only letters, digits and ``_-. /:`` (``cpu_mem_%`` -> ``cpu_mem_pct``).
_MLFLOW_BAD = re.compile(r"[^/\w.\- :]")


def mlflow_key(name: str) -> str:
    return _MLFLOW_BAD.sub("_", name.replace("%", "pct"))


class Backend(Protocol):
    name: str

    def log_steps(self, rows: list[tuple[int, Scalars]]) -> None: ...

    def log_epoch(self, epoch: int, step: int, metrics: Scalars) -> None: ...

    def log_files(self, files: Iterable[Path], base: Path) -> None: ...

    def set_tags(self, tags: dict[str, str]) -> None: ...

    def finish(self, status: str) -> None: ...


class TensorBoardBackend:
    """Event files in one directory: a requeued or resumed stage appends a new file there, and
    ``purge_step`` tells TensorBoard to drop what an earlier life logged past the checkpoint it
    resumed from (the steps it will log again)."""

    name = "tensorboard"

    def __init__(self, log_dir: Path, *, purge_step: int | None, hparams: Params, config_text: str) -> None:
        from torch.utils.tensorboard import SummaryWriter
        from torch.utils.tensorboard.summary import hparams as hparams_summary

        self.log_dir = log_dir
        log_dir.mkdir(parents=True, exist_ok=True)
        self.writer = SummaryWriter(log_dir=str(log_dir), purge_step=purge_step, flush_secs=30)
        # The HParams dashboard: the resolved config, and the per-epoch metrics it compares runs by.
        metrics = {f"epoch/{m}": 0.0 for m in ("val_loss", "val_acc", "train_loss")}
        for summary in hparams_summary(hparams, metrics):
            self.writer.file_writer.add_summary(summary)  # type: ignore[union-attr]
        self.writer.add_text("config", f"```json\n{config_text}\n```", global_step=purge_step or 0)

    def reopen(self, purge_step: int) -> None:
        """An OOM retry in the same process rewinds to a checkpoint: a new file with ``purge_step``."""
        from torch.utils.tensorboard import SummaryWriter

        self.writer.close()
        self.writer = SummaryWriter(log_dir=str(self.log_dir), purge_step=purge_step, flush_secs=30)

    def log_steps(self, rows: list[tuple[int, Scalars]]) -> None:
        for step, metrics in rows:
            for k, v in metrics.items():
                self.writer.add_scalar(f"step/{k}", v, step)

    def log_epoch(self, epoch: int, step: int, metrics: Scalars) -> None:
        for k, v in metrics.items():
            self.writer.add_scalar(f"epoch/{k}", v, epoch)
        self.writer.flush()

    def log_files(self, files: Iterable[Path], base: Path) -> None:
        pass  # TensorBoard keeps no files; the run dir has them

    def set_tags(self, tags: dict[str, str]) -> None:
        pass

    def finish(self, status: str) -> None:
        self.writer.close()


class MlflowBackend:
    """One MLflow run through :class:`mlflow.MlflowClient` (no global "active run"). Metrics are
    sent in one ``log_batch`` per epoch (and at the end), not one request per step."""

    name = "mlflow"

    def __init__(self, uri: str, run_id: str) -> None:
        from mlflow import MlflowClient

        self.client = MlflowClient(tracking_uri=uri)
        self.uri = uri
        self.run_id = run_id
        #: The timestamp of each call not sent whole yet (by ``id`` of the call's argument).
        self._stamps: dict[int, int] = {}

    @staticmethod
    def experiment_id(uri: str, name: str) -> str:
        """The experiment's id, made when missing (two tasks making it at once: one wins, the
        other reads it)."""
        from mlflow import MlflowClient
        from mlflow.exceptions import MlflowException

        client = MlflowClient(tracking_uri=uri)
        found = client.get_experiment_by_name(name)
        if found is not None:
            return str(found.experiment_id)
        try:
            return str(client.create_experiment(name))
        except MlflowException:
            again = client.get_experiment_by_name(name)
            if again is None:
                raise
            return str(again.experiment_id)

    @staticmethod
    def create_run(
        uri: str, experiment_id: str, name: str, tags: dict[str, str], *, finished: bool = False
    ) -> str:
        from mlflow import MlflowClient

        client = MlflowClient(tracking_uri=uri)
        run = client.create_run(experiment_id, run_name=name, tags=tags)
        if finished:  # a parent is only a container of its children
            client.set_terminated(run.info.run_id, status="FINISHED")
        return str(run.info.run_id)

    def exists(self) -> bool:
        from mlflow.exceptions import MlflowException

        try:
            return self.client.get_run(self.run_id).info.lifecycle_stage == "active"
        except MlflowException:
            return False

    def resume(self) -> None:
        self.client.update_run(self.run_id, status="RUNNING")

    def log_params(self, params: Params) -> None:
        """The config as params. MLflow's params never change: a resumed run with other values
        (say a longer ``training.max_epochs``) keeps the first and says which changed in a tag."""
        from mlflow.entities import Param

        have = self.client.get_run(self.run_id).data.params
        new = [Param(k, str(v)[:6000]) for k, v in params.items() if k not in have]
        changed = sorted(k for k, v in params.items() if k in have and have[k] != str(v)[:6000])
        for i in range(0, len(new), 100):
            self.client.log_batch(self.run_id, params=new[i : i + 100])
        if changed:
            self.client.set_tag(self.run_id, "kdgat.config_changed_on_resume", ",".join(changed)[:5000])

    def _send(self, points: list[tuple[str, float, int]], call: object) -> None:
        """``call``: the caller's argument the points come from. A call sent again after a failure
        (:class:`kdgat.tracking.session.StageTracking` holds it) keeps the timestamp it first had,
        so the batches MLflow already took are exact duplicates, which its store skips."""
        from mlflow.entities import Metric

        now = self._stamps.setdefault(id(call), int(time.time() * 1000))
        metrics = [Metric(mlflow_key(k), v, now, step) for k, v, step in points]
        for i in range(0, len(metrics), 1000):
            self.client.log_batch(self.run_id, metrics=metrics[i : i + 1000])
        del self._stamps[id(call)]

    def log_steps(self, rows: list[tuple[int, Scalars]]) -> None:
        self._send([(f"step/{k}", v, step) for step, m in rows for k, v in m.items()], rows)

    def log_epoch(self, epoch: int, step: int, metrics: Scalars) -> None:
        self._send([(f"epoch/{k}", v, epoch) for k, v in metrics.items()], metrics)

    def log_files(self, files: Iterable[Path], base: Path) -> None:
        for f in files:
            rel = f.parent.relative_to(base).as_posix()
            self.client.log_artifact(self.run_id, str(f), artifact_path=None if rel == "." else rel)

    def set_tags(self, tags: dict[str, str]) -> None:
        from mlflow.entities import RunTag

        self.client.log_batch(self.run_id, tags=[RunTag(k, v[:5000]) for k, v in tags.items()])

    def finish(self, status: str) -> None:
        self.client.set_terminated(self.run_id, status=status)


class WandbBackend:
    """One W&B run, offline on compute nodes: ``<run dir>/wandb/offline-run-<time>-<id>/`` per
    life of the stage, all with the same id (``resume="allow"``), which ``wandb sync`` uploads as
    one run, its files in the order they were started."""

    name = "wandb"

    def __init__(
        self,
        *,
        run_dir: Path,
        run_id: str,
        project: str,
        mode: str,
        group: str | None,
        job_type: str,
        name: str,
        config: Params,
        tags: dict[str, str],
        first_step: int = 0,
    ) -> None:
        import wandb

        # W&B's steps only rise: a resumed life starts after the last step an earlier one sent.
        self.min_step = first_step

        # W&B tags are for filtering and at most 64 characters: the short ones; all of them are in
        # the config under "kdgat_tags".
        short = [f"{k}={v}" for k, v in tags.items() if len(k) + len(v) < 64]
        self.run = wandb.init(
            project=project,
            id=run_id,
            resume="allow",
            mode=mode,  # type: ignore[arg-type]
            dir=str(run_dir),
            group=group,
            job_type=job_type,
            name=name,
            config={**config, "kdgat_tags": tags},
            tags=short,
            # No console capture: the job's log stays the job's (and the signal handling ours).
            settings=wandb.Settings(console="off", quiet=True),
        )
        self.run.define_metric("epoch")
        self.run.define_metric("epoch/*", step_metric="epoch")

    def _log(self, row: dict[str, Any], step: int) -> None:
        self.min_step = max(step, self.min_step)
        self.run.log(row, step=self.min_step)

    def log_steps(self, rows: list[tuple[int, Scalars]]) -> None:
        for step, metrics in rows:
            self._log({f"step/{k}": v for k, v in metrics.items()}, step)

    def log_epoch(self, epoch: int, step: int, metrics: Scalars) -> None:
        self._log({"epoch": epoch, **{f"epoch/{k}": v for k, v in metrics.items()}}, step)

    def log_files(self, files: Iterable[Path], base: Path) -> None:
        for f in files:
            self.run.save(str(f), base_path=str(base), policy="now")

    def set_tags(self, tags: dict[str, str]) -> None:
        self.run.summary.update(dict(tags))
        extra = [f"{k}={v}" for k, v in tags.items() if len(k) + len(v) < 64]
        self.run.tags = tuple(dict.fromkeys([*(self.run.tags or ()), *extra]))

    def finish(self, status: str) -> None:
        # KILLED is a requeue: the pipeline's exit status 75 (the next life resumes the run).
        self.run.finish(exit_code={"FINISHED": 0, "KILLED": 75}.get(status, 1))


def config_json(params: dict[str, Any]) -> str:
    return json.dumps(params, indent=2, sort_keys=True)
