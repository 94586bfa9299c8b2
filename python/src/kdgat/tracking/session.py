"""A training stage's tracking, from its first fit to its end.

:func:`stage_tracking` (around a stage, in :func:`kdgat.stages.dispatch.run_stage`) checks the
tracking settings before anything is loaded and makes the stage's :class:`StageTracking`; ``fit``
gets it with :func:`fit_tracking` and adds one :class:`TrackingCallback` per fit attempt. The
trackers are opened at the first fit's start (after Lightning restored the checkpoint), their
ids kept beside ``last.ckpt`` (:mod:`kdgat.tracking.identity`), and closed when the stage ends:
the run's files are logged then (``metrics.json``, the report where there is one).

A tune trial (:func:`in_trial`) leaves its runs open at the stage's end: the worker knows the
trial's final state only afterwards and ends them with it (:meth:`TrialRuns.finish`).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lightning as L
import psutil
import torch

from kdgat.config import PipelineConfig
from kdgat.contract import HISTORY_FILE, METRICS_FILE, TENSORBOARD_DIR
from kdgat.tracking import context, identity
from kdgat.tracking.backends import Backend, Scalars, config_json
from kdgat.tracking.redact import redact_text, redact_uri
from kdgat.tracking.settings import TrackingSettings, resolve

log = logging.getLogger("kdgat.tracking")

#: The run's files logged at the stage's end (where present).
END_FILES = (METRICS_FILE, HISTORY_FILE, "report/report.html")
#: Failed attempts in a row after which a tracker is dropped. A tracker that fails (to open, or to
#: take a call) is tried again at the next epoch's end with every call it missed, in order; the
#: second failure drops it. (MLflow's client already retries a refused connection and 5xx answers
#: for minutes inside one attempt, so each attempt can hold training that long.)
MAX_FAILURES = 2


@dataclass
class TrialRuns:
    """A tune trial: the study it belongs to, its Optuna number and values; collects the stage
    runs opened inside it so the worker can end them with the trial's state."""

    study: str
    study_dir: Path
    number: int
    params: dict[str, Any]
    runner_run_dir: Path | None = None
    sessions: list[StageTracking] = field(default_factory=list)

    def finish(self, state: str, *, value: float | None = None, pruned_at: int | None = None) -> None:
        """Ends the trial's runs with its final Optuna state (COMPLETE, PRUNED, FAIL, or
        INTERRUPTED for a trial handed back on the requeue signal)."""
        tags = {"optuna.trial.state": state, "optuna.trial.number": str(self.number)}
        if value is not None:
            tags["optuna.trial.value"] = repr(value)
        if pruned_at is not None:
            tags["optuna.trial.pruned_at_epoch"] = str(pruned_at)
        status = {"COMPLETE": "FINISHED", "PRUNED": "FINISHED", "INTERRUPTED": "KILLED"}.get(state, "FAILED")
        for s in self.sessions:
            s.set_tags(tags)
            s.close(status)
        self.sessions.clear()


_TRIAL: ContextVar[TrialRuns | None] = ContextVar("kdgat_tracking_trial", default=None)
_STAGE: ContextVar[StageTracking | None] = ContextVar("kdgat_tracking_stage", default=None)


@contextmanager
def in_trial(runs: TrialRuns) -> Iterator[TrialRuns]:
    """The stages run inside the block are child runs of the study's parent run."""
    token = _TRIAL.set(runs)
    try:
        yield runs
    finally:
        _TRIAL.reset(token)


def _is_rank_zero() -> bool:
    from lightning.pytorch.utilities.rank_zero import rank_zero_only

    return getattr(rank_zero_only, "rank", 0) == 0


@contextmanager
def stage_tracking(
    cfg: PipelineConfig, run_dir: Path, stage_identity: dict[str, str]
) -> Iterator[StageTracking | None]:
    """Around one stage: its tracking (None on DDP ranks but 0), ended with FINISHED, FAILED or
    KILLED (the requeue signal: the same runs go on in the next life). Raises
    :class:`kdgat.config.ConfigError` for an unsafe tracking store before the stage starts."""
    from kdgat.training.requeue import RequeueRequested

    settings = resolve(cfg)
    if not _is_rank_zero():
        yield None
        return
    runs = _TRIAL.get()
    session = StageTracking(cfg, run_dir, stage_identity, settings, trial=runs)
    token = _STAGE.set(session)
    status = "FAILED"
    try:
        yield session
        status = "FINISHED"
    except RequeueRequested:
        status = "KILLED"
        raise
    finally:
        _STAGE.reset(token)
        if runs is not None and session.opened:
            session.log_end_files()
            session.save_identity()
            runs.sessions.append(session)  # the worker ends it with the trial's state
        else:
            session.close(status)


@contextmanager
def fit_tracking(cfg: PipelineConfig, run_dir: Path) -> Iterator[StageTracking | None]:
    """The tracking a fit in ``run_dir`` logs to: the stage's (from :func:`stage_tracking`), or,
    for a fit outside a stage, one of its own ended with the fit."""
    session = _STAGE.get()
    if session is not None and session.run_dir == run_dir:
        yield session
        return
    parts = run_dir.name.split("_")
    ident = {"stage": parts[-1], "model": parts[0], "scale": parts[1] if len(parts) > 2 else ""}
    with stage_tracking(cfg, run_dir, {**ident, "dataset": run_dir.parent.name}) as own:
        yield own


def memory_limit_bytes() -> int:
    """What the job may use: SLURM's ``--mem`` (``SLURM_MEM_PER_NODE``, MiB), else the cgroup's
    limit, else the machine's memory."""
    mem = os.environ.get("SLURM_MEM_PER_NODE", "")
    if mem.isdigit() and int(mem) > 0:
        return int(mem) * 2**20
    try:
        rel = Path("/proc/self/cgroup").read_text().strip().split("::", 1)[-1]
        text = (Path("/sys/fs/cgroup") / rel.lstrip("/") / "memory.max").read_text().strip()
        if text.isdigit():
            return int(text)
    except (OSError, IndexError):
        pass
    return int(psutil.virtual_memory().total)


class StageTracking:
    """The trackers of one stage run dir (see the module docstring). Logging never stops
    training: a tracker that fails to open or to take a call keeps the calls it missed and gets
    them, in order, when it is tried again at the next epoch's end (:data:`MAX_FAILURES`); one
    that keeps failing is dropped, and the log says what it missed."""

    def __init__(
        self,
        cfg: PipelineConfig,
        run_dir: Path,
        stage_identity: dict[str, str],
        settings: TrackingSettings,
        *,
        trial: TrialRuns | None = None,
    ) -> None:
        self.cfg = cfg
        self.run_dir = run_dir
        self.stage_identity = stage_identity
        self.settings = settings
        self.trial = trial
        self.backends: list[Backend] = []
        #: Trackers whose opening failed, and how to try again (at the next epoch's end).
        self.opening: dict[str, Callable[[], None]] = {}
        #: Per tracker, the calls it has not taken yet: ``(method, args)``, sent in order.
        self.held: dict[str, list[tuple[str, tuple[Any, ...]]]] = {}
        #: Per tracker, failed attempts in a row; a tracker that failed waits for the next epoch.
        self.failures: dict[str, int] = {}
        self.waiting: set[str] = set()
        self.opened = False
        self.closed = False
        self.identity = identity.Identity()
        self.pending: list[tuple[int, Scalars]] = []
        self._started_at_step: int | None = None

    # -- opening ------------------------------------------------------------------------------

    def start_attempt(self, global_step: int) -> None:
        """A fit attempt starts at ``global_step`` (restored from the checkpoint): the first opens
        the trackers; a later one (an OOM retry) rewinds TensorBoard to its checkpoint."""
        if not self.opened:
            self._open(global_step)
            return
        # The steps after the checkpoint run again: TensorBoard purges what it has of them, the
        # ones held for MLflow and W&B are dropped (those already sent are skipped when redone).
        for b in list(self.backends):
            if getattr(b, "reopen", None) is not None:
                self._call(b, "reopen", global_step + 1)
        self.pending = [(step, m) for step, m in self.pending if step <= global_step]

    def _open(self, global_step: int) -> None:
        self.opened = True
        s = self.settings
        kept, resumed = identity.load(self.run_dir)
        self.identity = kept if resumed else identity.Identity()
        self.identity.lives += 1
        manifest_more = [self.trial.runner_run_dir] if self.trial else []
        manifest = context.find_manifest(self.run_dir, *manifest_more)
        tags = context.run_tags(self.run_dir, self.stage_identity, manifest)
        params = context.flat_config(self.cfg)
        group = self._group(manifest)
        if group is not None:
            tags.update(group.tags)
        self.tags = tags
        run_name = self._run_name(group)
        if s.tensorboard:
            purge_step = global_step + 1 if resumed else 0
            self._open_tracker(
                "tensorboard", lambda: self._open_tensorboard(purge_step, params, tags), first=True
            )
        if s.mlflow_uri:
            uri = s.mlflow_uri
            self._open_tracker(
                "mlflow", lambda: self._open_mlflow(uri, manifest, group, run_name, tags), first=True
            )
        if s.wandb:
            first_step = self.identity.logged_step + 1
            self._open_tracker(
                "wandb",
                lambda: self._open_wandb(manifest, group, run_name, tags, params, first_step),
                first=True,
            )
        self.save_identity()
        where = [b.name for b in self.backends] + [f"{n} (not open yet)" for n in self.opening]
        log.info(
            "tracking: %s (%s life %d; TensorBoard logs in %s)",
            ", ".join(where) or "nothing",
            "resumed," if resumed else "new run,",
            self.identity.lives,
            self.identity.tensorboard_dir or "-",
        )

    def _open_tensorboard(self, purge_step: int, params: dict[str, Any], tags: dict[str, str]) -> None:
        from kdgat.tracking.backends import TensorBoardBackend

        log_dir = Path(self.identity.tensorboard_dir or self.run_dir / TENSORBOARD_DIR)
        self.identity.tensorboard_dir = str(log_dir)
        self.backends.append(
            TensorBoardBackend(
                log_dir,
                purge_step=purge_step,
                hparams={**params, **{f"tag.{k}": v for k, v in tags.items()}},
                config_text=config_json(params),
            )
        )

    def _group(self, manifest: dict[str, Any] | None) -> context.Group | None:
        if self.trial is not None:
            t = self.trial
            return context.Group(
                "study",
                t.study,
                t.study_dir,
                {"optuna.study": t.study, "optuna.trial.number": str(t.number), "kdgat.kind": "trial"},
            )
        point = context.sweep_point(self.run_dir)
        if point is None:
            return None
        i, points_dir = point
        name = context.experiment_name(manifest, points_dir.parent.name or points_dir.name)
        return context.Group("sweep", name, points_dir, {"kdgat.sweep_point": str(i), "kdgat.kind": "sweep"})

    def _run_name(self, group: context.Group | None) -> str:
        stage = self.stage_identity.get("stage", "stage")
        if group is None:
            return stage
        if group.kind == "study":
            return f"{stage} trial {self.trial.number if self.trial else '?'}"
        return f"{stage} point {group.tags.get('kdgat.sweep_point')}"

    def _experiment(self, manifest: dict[str, Any] | None) -> str:
        if self.settings.mlflow_experiment:
            return self.settings.mlflow_experiment
        return context.experiment_name(manifest, "kdgat")

    def _open_mlflow(
        self,
        uri: str,
        manifest: dict[str, Any] | None,
        group: context.Group | None,
        run_name: str,
        tags: dict[str, str],
    ) -> None:
        from kdgat.tracking.backends import MlflowBackend

        ident = self.identity
        # The kept URI is the redacted one (kdgat.tracking.redact); `uri`, with its credentials,
        # comes from the config or $MLFLOW_TRACKING_URI, as it did in the first life.
        shown = redact_uri(uri)
        if ident.mlflow_run_id and redact_uri(ident.mlflow_uri or "") == shown:
            backend = MlflowBackend(uri, ident.mlflow_run_id)
            if backend.exists():
                ident.mlflow_uri = shown  # one kept before redaction: rewritten without credentials
                backend.resume()
                backend.set_tags(tags)
                backend.log_params(context.flat_config(self.cfg))
                self.backends.append(backend)
                return
            log.warning(
                "tracking: MLflow run %s is not on %s any more: starting a new run",
                ident.mlflow_run_id,
                shown,
            )
        elif ident.mlflow_run_id:
            log.warning(
                "tracking: the MLflow URI changed (%s -> %s): starting a new run",
                redact_uri(ident.mlflow_uri or ""),
                shown,
            )
        experiment_id = MlflowBackend.experiment_id(uri, self._experiment(manifest))
        run_tags = dict(tags)
        parent = None
        if group is not None:
            parent_tags = {"kdgat.parent_key": str(group.key.resolve()), "kdgat.kind": group.kind}
            parent = identity.parent_id(
                group.key,
                "mlflow",
                f"{shown} {experiment_id}",
                lambda: MlflowBackend.create_run(uri, experiment_id, group.name, parent_tags, finished=True),
            )
            run_tags["mlflow.parentRunId"] = parent
        run_id = MlflowBackend.create_run(uri, experiment_id, run_name, run_tags)
        ident.mlflow_uri, ident.mlflow_experiment_id = shown, experiment_id
        ident.mlflow_run_id, ident.mlflow_parent_run_id = run_id, parent
        backend = MlflowBackend(uri, run_id)
        backend.log_params(context.flat_config(self.cfg))
        self.backends.append(backend)

    def _open_wandb(
        self,
        manifest: dict[str, Any] | None,
        group: context.Group | None,
        run_name: str,
        tags: dict[str, str],
        params: dict[str, Any],
        first_step: int,
    ) -> None:
        from kdgat.tracking.backends import WandbBackend

        ident = self.identity
        s = self.settings
        if not ident.wandb_id or ident.wandb_project != s.wandb_project:
            ident.wandb_id, ident.wandb_project = identity.new_wandb_id(), s.wandb_project
        ident.wandb_group = group.name if group else context.experiment_name(manifest, "") or None
        self.backends.append(
            WandbBackend(
                run_dir=self.run_dir,
                run_id=ident.wandb_id,
                project=s.wandb_project,
                mode=s.wandb_mode,
                group=ident.wandb_group,
                job_type=self.stage_identity.get("stage", "stage"),
                name=run_name,
                config=params,
                tags=tags,
                first_step=first_step,
            )
        )

    # -- failures: held calls, tried again at the next epoch's end --------------------------------

    def _open_tracker(self, name: str, opener: Callable[[], None], *, first: bool = False) -> None:
        """Opens a tracker (``opener`` appends it to :attr:`backends`); one that fails is tried
        again at the next epoch's end, the calls it misses meanwhile held for it."""
        try:
            opener()
        except Exception as e:
            if self._failed(name, e, "to open"):
                self.opening.pop(name, None)
            else:
                self.opening[name] = opener
                self.held.setdefault(name, [])
            return
        self.opening.pop(name, None)
        self.failures[name] = 0
        if not first:
            missed = len(self.held.get(name, []))
            log.info("tracking: %s open on a second try (%d call(s) held for it)", name, missed)

    def _failed(self, name: str, e: Exception, what: str) -> bool:
        """Counts a failure of tracker ``name``; True when it is dropped."""
        n = self.failures.get(name, 0) + 1
        self.failures[name] = n
        self.waiting.add(name)
        why = redact_text(f"{type(e).__name__}: {e}")  # a client's message may quote the URI
        if n < MAX_FAILURES:
            log.warning("tracking: %s failed %s (%s); tried again at the next epoch's end", name, what, why)
            return False
        missed = len(self.held.pop(name, []))
        log.error(
            "tracking: %s failed %s %d times in a row (%s); training goes on without it "
            "(%d call(s) not sent)",
            name,
            what,
            n,
            why,
            missed,
        )
        return True

    def _call(self, b: Backend, method: str, *args: Any) -> None:
        """``b.method(*args)``, after the calls ``b`` still has to take; held while ``b`` waits
        for the next epoch's end after a failure."""
        self.held.setdefault(b.name, []).append((method, args))
        if b.name not in self.waiting:
            self._drain(b)

    def _drain(self, b: Backend) -> None:
        """Sends ``b`` its held calls in order, up to the first that fails."""
        queue = self.held.get(b.name, [])
        while queue:
            method, args = queue[0]
            try:
                getattr(b, method)(*args)
            except Exception as e:
                if self._failed(b.name, e, f"on {method}") and b in self.backends:
                    self.backends.remove(b)
                return
            queue.pop(0)
            self.failures[b.name] = 0

    def _to_trackers(self, method: str, *args: Any, only: Callable[[str], bool] = lambda _: True) -> None:
        """One call to every tracker ``only`` picks; held for those not open yet."""
        for b in list(self.backends):
            if only(b.name):
                self._call(b, method, *args)
        for name in self.opening:
            if only(name):
                self.held[name].append((method, args))

    def _try_again(self) -> None:
        """The epoch's end: trackers that failed get their held calls (and an opening) once more."""
        self.waiting.clear()
        for name, opener in list(self.opening.items()):
            self._open_tracker(name, opener)
        for b in list(self.backends):
            self._drain(b)

    # -- logging ------------------------------------------------------------------------------

    def log_step(self, step: int, metrics: Scalars) -> None:
        if step <= self.identity.logged_step:
            return  # logged by an earlier life or attempt (a resumed OOM retry)
        self._to_trackers("log_steps", [(step, metrics)], only=lambda n: n == "tensorboard")
        self.pending.append((step, metrics))

    def hold_partial_epoch(self, epoch: int, step: int, metrics: Scalars) -> None:
        """An epoch stopped inside (the requeue signal): kept until the next life shows whether
        Lightning runs the rest of it (then its own end logs it) or goes on with the next epoch
        (the checkpoint saved at the cut marks it done: then these are its figures)."""
        self.flush()
        if epoch > self.identity.logged_epoch:
            self.identity.partial_epoch = {"epoch": epoch, "step": step, "metrics": metrics}
            self.save_identity()

    def epoch_starts(self, epoch: int) -> None:
        held = self.identity.partial_epoch
        if held is None:
            return
        self.identity.partial_epoch = None
        if epoch > held["epoch"]:
            self.log_epoch(held["epoch"], held["step"], {**held["metrics"], "partial": 1.0})
        else:
            self.save_identity()

    def log_epoch(self, epoch: int, step: int, metrics: Scalars) -> None:
        self._try_again()
        self.flush()
        if epoch <= self.identity.logged_epoch:
            return
        self._to_trackers("log_epoch", epoch, step, metrics)
        self.identity.logged_epoch = epoch
        self.save_identity()

    def flush(self) -> None:
        """Sends the per-step scalars held since the last epoch (MLflow, W&B)."""
        if not self.pending:
            return
        rows, self.pending = self.pending, []
        self._to_trackers("log_steps", rows, only=lambda n: n != "tensorboard")
        self.identity.logged_step = max(self.identity.logged_step, rows[-1][0])

    def set_tags(self, tags: dict[str, str]) -> None:
        self._to_trackers("set_tags", tags)

    def save_identity(self) -> None:
        if self.opened:
            try:
                identity.save(self.run_dir, self.identity)
            except OSError as e:
                log.warning(
                    "tracking: could not keep the run ids in %s: %s", identity.identity_path(self.run_dir), e
                )

    def log_end_files(self) -> None:
        self.flush()
        files = [self.run_dir / f for f in END_FILES if (self.run_dir / f).is_file()]
        self._to_trackers("log_files", files, self.run_dir)

    def close(self, status: str) -> None:
        """Ends the runs: FINISHED, FAILED, or KILLED (requeued: the next life resumes them)."""
        if self.closed or not self.opened:
            self.closed = True
            return
        self.closed = True
        self._try_again()  # a tracker that failed during the last epoch
        if status != "KILLED":
            self.log_end_files()
        self.flush()
        self.save_identity()
        self._to_trackers("finish", status)
        if self.waiting:
            self._try_again()  # one that failed just now: its second try is its last
        for name, queue in self.held.items():
            if queue:
                log.error("tracking: %s: %d call(s) not sent by the stage's end", name, len(queue))
        self.backends.clear()

    def callback(self, batch_size: int) -> TrackingCallback:
        return TrackingCallback(self, batch_size)


class TrackingCallback(L.Callback):
    """One fit attempt's scalars: the training loss and learning rate every
    ``tracking.log_every_n_steps`` steps; per epoch the mean training loss, the validation
    metrics, learning rate, throughput (graphs/s), data-wait share, CPU memory (% of what the
    job may use, and MiB), GPU memory (GiB, peak; CUDA only), the batch size this attempt runs
    with (after any OOM back-off) and the epoch's seconds. An epoch cut short by the requeue
    signal is held back (:meth:`StageTracking.hold_partial_epoch`): logged once, by whichever life
    ends it."""

    def __init__(self, session: StageTracking, batch_size: int) -> None:
        self.session = session
        self.batch_size = batch_size
        self.every = session.settings.log_every_n_steps
        self._loss_sum: torch.Tensor | None = None
        self._loss_n = 0
        self._epoch_t0 = time.perf_counter()
        self._proc = psutil.Process()

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.session.start_attempt(trainer.global_step)

    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._loss_sum, self._loss_n = None, 0
        self._epoch_t0 = time.perf_counter()
        self.session.epoch_starts(trainer.current_epoch)

    @staticmethod
    def _lr(trainer: L.Trainer) -> float | None:
        try:
            return float(trainer.optimizers[0].param_groups[0]["lr"])
        except (IndexError, KeyError, AttributeError):
            return None

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
        if not isinstance(loss, torch.Tensor):
            return
        loss = loss.detach().float()
        self._loss_sum = loss if self._loss_sum is None else self._loss_sum + loss
        self._loss_n += 1
        step = trainer.global_step
        if step % self.every == 0:
            metrics = {"train_loss": float(loss)}
            lr = self._lr(trainer)
            if lr is not None:
                metrics["lr"] = lr
            self.session.log_step(step, metrics)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        loop = trainer.fit_loop.epoch_loop
        reached = getattr(loop, "_num_ready_batches_reached", lambda: True)()
        metrics = self._epoch_metrics(trainer)
        if reached:
            self.session.log_epoch(trainer.current_epoch, trainer.global_step, metrics)
        else:  # stopped inside the epoch (the requeue signal): the next life decides
            self.session.hold_partial_epoch(trainer.current_epoch, trainer.global_step, metrics)

    def _epoch_metrics(self, trainer: L.Trainer) -> Scalars:
        from kdgat.training.history import EpochHistoryCallback, tree_rss_mb

        m: Scalars = {}
        if self._loss_sum is not None and self._loss_n:
            m["train_loss"] = float(self._loss_sum) / self._loss_n
        for k, v in trainer.callback_metrics.items():
            if k.startswith("val_") and isinstance(v, torch.Tensor) and v.numel() == 1:
                m[k] = float(v)
        lr = self._lr(trainer)
        if lr is not None:
            m["lr"] = lr
        history = next((c for c in trainer.callbacks if isinstance(c, EpochHistoryCallback)), None)  # type: ignore[attr-defined]
        row = history.last_row if history is not None else {}
        for k in ("graphs_per_sec", "data_wait_fraction"):
            if row.get(k) is not None:
                m[k] = float(row[k])
        rss = tree_rss_mb(self._proc)
        m["cpu_mem_mb"] = rss
        m["cpu_mem_%"] = 100.0 * rss * 2**20 / memory_limit_bytes()
        if torch.cuda.is_available():
            m["gpu_mem_gb"] = torch.cuda.max_memory_allocated() / 2**30
            m["gpu_mem_reserved_gb"] = torch.cuda.memory_reserved() / 2**30
        m["batch_size"] = float(self.batch_size)
        m["epoch_seconds"] = time.perf_counter() - self._epoch_t0
        return m

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.session.flush()
        self.session.save_identity()
