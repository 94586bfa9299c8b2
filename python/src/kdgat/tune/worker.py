"""``python -m kdgat tune``: one worker of a study. Every task of the tune job array runs one; they
pull trials from the shared study until ``nTrials`` are finished.

A trial is one run of the tuned stage with the base overrides plus the trial's values, in
``<study>/trials/trial_<n>/``. Its validation metric is reported to Optuna after every epoch, so
the pruner stops poor trials early (never before the pruner's minimum resource).

No trial stays RUNNING forever:
- while a trial runs, its worker writes a heartbeat (a system attr) every ``heartbeatSeconds``;
- every worker, before each trial and while it waits, fails RUNNING trials whose heartbeat is older
  than ``staleAfterSeconds`` (a killed worker) or that belong to an earlier life of itself (a
  requeued worker), and enqueues a retry with the same values (``maxRetries`` per trial) in the
  same run root, so the retry resumes from the lost trial's last epoch checkpoint;
- on the requeue signal a worker fails its current trial as interrupted, enqueues its retry,
  acknowledges and exits 75 (the job script requeues it; :mod:`kdgat.training.requeue`).
The last workers wait for the trials still running elsewhere, so a worker dying late is covered.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lightning as L
import optuna
from optuna.exceptions import UpdateFinishedTrialError
from optuna.trial import TrialState

from kdgat import paths
from kdgat.catalogue import try_record_stage
from kdgat.config import build_config
from kdgat.contract import METRICS_FILE
from kdgat.stages import run_stage
from kdgat.tracking.session import TrialRuns, in_trial
from kdgat.training import requeue
from kdgat.training.fit import extra_callbacks
from kdgat.training.requeue import RequeueRequested
from kdgat.tune.study import StudyConfig, open_study, read_config, suggest

log = logging.getLogger("kdgat.tune")

# Trial system attrs (the report reads them).
WORKER = "kdgat_worker"
LIFE = "kdgat_life"
HEARTBEAT = "kdgat_heartbeat"
STALE = "kdgat_stale"
FAILURE = "kdgat_failure"
RETRY_OF = "kdgat_retry_of"
RETRIES = "kdgat_retries"
RUN_ROOT = "run_root"
TRIALS_DIR = "trials"


@dataclass(frozen=True)
class WorkerId:
    #: Stable across requeues: `<array job id>_<task id>` under SLURM.
    key: str
    #: One life of the worker: host, pid and SLURM restart count.
    life: str
    index: int

    @staticmethod
    def from_env() -> WorkerId:
        env = os.environ
        job = env.get("SLURM_ARRAY_JOB_ID") or env.get("SLURM_JOB_ID")
        task = env.get("SLURM_ARRAY_TASK_ID", "0")
        index = int(task) if task.isdigit() else 0
        key = f"{job}_{task}" if job else f"local-{socket.gethostname()}-{os.getpid()}"
        life = f"{socket.gethostname()}:{os.getpid()}:{env.get('SLURM_RESTART_COUNT', '0')}"
        return WorkerId(key=key, life=life, index=index)


class PruningCallback(L.Callback):
    """Reports the objective metric after every validation epoch (step = epochs done) and stops
    training when the pruner says so, or when the trial was lost to another worker."""

    def __init__(self, trial: optuna.Trial, metric: str, lost: threading.Event) -> None:
        self.trial = trial
        self.metric = metric
        self.lost = lost
        self.last_value: float | None = None
        self.pruned_at: int | None = None
        self.steps = 0

    def on_validation_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        value = trainer.callback_metrics.get(self.metric)
        if value is None:
            raise RuntimeError(
                f"the stage logged no {self.metric!r} (it logs {sorted(trainer.callback_metrics)}): "
                "choose one of those as tune.objective.metric"
            )
        step = trainer.current_epoch + 1
        self.last_value = float(value)
        self.steps = step
        try:
            self.trial.report(self.last_value, step)
            prune = self.trial.should_prune()
        except UpdateFinishedTrialError:
            self.lost.set()
            prune = False
        if self.lost.is_set():
            trainer.should_stop = True
        elif prune:
            self.pruned_at = step
            trainer.should_stop = True
            log.info("trial %d pruned after epoch %d (%s=%.4g)", self.trial.number, step, self.metric, value)


class Heartbeat:
    """Writes the trial's heartbeat every ``seconds`` from a thread; sets ``lost`` if the trial was
    finished by someone else meanwhile."""

    def __init__(self, study: optuna.Study, trial_id: int, seconds: float, lost: threading.Event) -> None:
        self.storage = study._storage
        self.trial_id = trial_id
        self.seconds = seconds
        self.lost = lost
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="kdgat-heartbeat", daemon=True)

    def __enter__(self) -> Heartbeat:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()

    def _run(self) -> None:
        while not self.stop.wait(self.seconds):
            try:
                self.storage.set_trial_system_attr(self.trial_id, HEARTBEAT, time.time())
            except UpdateFinishedTrialError:
                log.warning(
                    "trial %d was failed by another worker (stale heartbeat): stopping it", self.trial_id
                )
                self.lost.set()
                return


@dataclass
class WorkerSummary:
    worker: str
    trials: dict[str, int] = field(default_factory=dict)
    failed_lost: list[int] = field(default_factory=list)
    requeued: bool = False

    def count(self, what: str) -> None:
        self.trials[what] = self.trials.get(what, 0) + 1


def _counts(study: optuna.Study) -> tuple[int, int]:
    """(finished trials that count toward nTrials, trials running). WAITING trials (enqueued
    retries) are not counted as running: nobody runs them until a worker asks for a trial."""
    finished = running = 0
    for t in study.get_trials(deepcopy=False):
        if t.state in (TrialState.COMPLETE, TrialState.PRUNED):
            finished += 1
        elif t.state == TrialState.FAIL:
            # A trial lost to a dead worker is replaced by its retry; other failures count.
            finished += 0 if t.system_attrs.get(STALE) else 1
        elif t.state == TrialState.RUNNING:
            running += 1
    return finished, running


def fail_lost_trials(
    study: optuna.Study, cfg: StudyConfig, me: WorkerId, now: float | None = None
) -> list[int]:
    """Fails RUNNING trials whose worker is gone and enqueues their retries; returns their numbers."""
    now = time.time() if now is None else now
    failed: list[int] = []
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        owner = t.system_attrs.get(WORKER)
        beat = t.system_attrs.get(HEARTBEAT)
        if isinstance(beat, int | float):
            last = float(beat)
        else:
            last = t.datetime_start.timestamp() if t.datetime_start is not None else now
        if owner == me.key and t.system_attrs.get(LIFE) != me.life:
            reason = f"its worker {owner} restarted (requeued) before the trial finished"
        elif now - last > cfg.stale_after_seconds:
            reason = (
                f"no heartbeat from worker {owner} for {now - last:.0f} s "
                f"(stale after {cfg.stale_after_seconds} s): the worker was killed or its node failed"
            )
        else:
            continue
        if _fail_as_lost(study, t, reason, cfg):
            failed.append(t.number)
    return failed


def _fail_as_lost(study: optuna.Study, t: optuna.trial.FrozenTrial, reason: str, cfg: StudyConfig) -> bool:
    """FAIL ``t`` (stale) and enqueue its retry. False when another worker got there first."""
    storage = study._storage
    try:
        storage.set_trial_system_attr(t._trial_id, STALE, True)
        storage.set_trial_system_attr(t._trial_id, FAILURE, reason)
        storage.set_trial_state_values(t._trial_id, TrialState.FAIL)
    except UpdateFinishedTrialError:
        return False  # finished meanwhile, or failed by another worker: its retry is theirs to make
    # The count travels in the retry's user attrs from enqueue_trial; the system attr copy is
    # written only after ask(), so a worker dying in between must not reset the count to 0.
    retries = int(t.system_attrs.get(RETRIES, t.user_attrs.get(RETRIES, 0)))
    log.warning("trial %d failed: %s", t.number, reason)
    if retries < cfg.max_retries and t.params:
        # The retry runs in the lost trial's run root, so it resumes from its last epoch checkpoint.
        user_attrs = {RETRY_OF: t.number, RETRIES: retries + 1, RUN_ROOT: t.user_attrs.get(RUN_ROOT)}
        study.enqueue_trial(t.params, user_attrs=user_attrs, skip_if_exists=False)
        log.warning("trial %d enqueued again (retry %d of %d)", t.number, retries + 1, cfg.max_retries)
    return True


def _link_inputs(cfg: StudyConfig, trial_root: Path) -> None:
    """Earlier stages' outputs (the VGAE a curriculum trial reads) appear in the trial's run root."""
    if not cfg.inputs_root:
        return
    src = Path(cfg.inputs_root) / cfg.dataset
    if not src.is_dir():
        return
    own = paths.run_dir(trial_root, cfg.dataset, cfg.model, cfg.scale, cfg.stage).name
    dest = trial_root / cfg.dataset
    dest.mkdir(parents=True, exist_ok=True)
    for d in src.iterdir():
        if d.is_dir() and d.name != own and not (dest / d.name).exists():
            (dest / d.name).symlink_to(d.resolve(), target_is_directory=True)


class Worker:
    def __init__(self, study_dir: Path, run_root: Path | None, me: WorkerId | None = None) -> None:
        self.study_dir = study_dir
        self.cfg = read_config(study_dir)
        self.me = me or WorkerId.from_env()
        self.run_dir = paths.run_dir(
            run_root, self.cfg.dataset, self.cfg.model, self.cfg.scale, self.cfg.stage
        )
        self.signal_seen = threading.Event()
        self.summary = WorkerSummary(worker=self.me.key)
        self.study = open_study(study_dir, self.cfg, worker_index=self.me.index)

    def _arm_signal(self) -> None:
        name = requeue.signal_name()

        def seen() -> None:
            log.warning("received SIG%s: this worker stops after checkpointing its state", name)
            self.signal_seen.set()

        requeue.arm(seen)

    def run(self, *, poll_seconds: float | None = None, sleep: Callable[[float], None] = time.sleep) -> int:
        """Pulls trials until the study has ``nTrials`` finished; ``requeue.EXIT_STATUS`` after a requeue
        signal."""
        self._arm_signal()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        poll = poll_seconds if poll_seconds is not None else min(10.0, self.cfg.heartbeat_seconds)
        log.info(
            "worker %s on study %s (%s): %d trials wanted",
            self.me.key,
            self.cfg.study,
            self.study_dir,
            self.cfg.n_trials,
        )
        while True:
            self.summary.failed_lost += fail_lost_trials(self.study, self.cfg, self.me)
            if self.signal_seen.is_set():
                return self._requeue(None)
            finished, running = _counts(self.study)
            if finished >= self.cfg.n_trials:
                break
            if finished + running >= self.cfg.n_trials:
                # The remaining trials run elsewhere: wait, in case one of their workers dies.
                sleep(poll)
                continue
            status = self._one_trial()
            if status is not None:
                return status
        self._write_summary()
        log.info("worker %s done: study has %d finished trials", self.me.key, _counts(self.study)[0])
        return 0

    def _one_trial(self) -> int | None:
        trial = self.study.ask()
        storage = self.study._storage
        for key, value in ((WORKER, self.me.key), (LIFE, self.me.life), (HEARTBEAT, time.time())):
            storage.set_trial_system_attr(trial._trial_id, key, value)
        retry_of = trial.user_attrs.get(RETRY_OF)
        if retry_of is not None:
            storage.set_trial_system_attr(trial._trial_id, RETRY_OF, retry_of)
            storage.set_trial_system_attr(trial._trial_id, RETRIES, trial.user_attrs.get(RETRIES, 1))
        params = suggest(trial, self.cfg.space)
        inherited = trial.user_attrs.get(RUN_ROOT)
        trial_root = Path(inherited) if inherited else self.study_dir / TRIALS_DIR / f"trial_{trial.number}"
        trial.set_user_attr(RUN_ROOT, str(trial_root))
        log.info("trial %d: %s", trial.number, json.dumps(params, sort_keys=True))
        lost = threading.Event()
        pruning = PruningCallback(trial, self.cfg.objective.metric, lost)
        # The trial's tracked runs are children of the study's; ended below with the trial's state.
        runs = TrialRuns(
            study=self.cfg.study,
            study_dir=self.study_dir,
            number=trial.number,
            params=params,
            runner_run_dir=Path(self.cfg.run_dir) if self.cfg.run_dir else None,
        )
        t0 = time.perf_counter()
        try:
            cfg = build_config(self.cfg.scale, {**self.cfg.overrides, **params})
            _link_inputs(self.cfg, trial_root)
            with (
                Heartbeat(self.study, trial._trial_id, self.cfg.heartbeat_seconds, lost),
                extra_callbacks(pruning),
                in_trial(runs),
            ):
                run_stage(
                    self.cfg.stage,
                    cfg,
                    dataset=self.cfg.dataset,
                    model=self.cfg.model,
                    scale=self.cfg.scale,
                    run_root=str(trial_root),
                )
        except RequeueRequested:
            runs.finish("INTERRUPTED")
            return self._requeue(trial)
        except Exception as e:  # the trial failed; the study goes on
            runs.finish("LOST" if lost.is_set() else "FAIL")
            if lost.is_set():
                self.summary.count("lost")
                return None
            log.exception("trial %d failed", trial.number)
            self._finish(trial, TrialState.FAIL, failure=f"{type(e).__name__}: {e}")
            self.summary.count("fail")
            self._catalogue(trial, trial_root, params, "FAILED", time.perf_counter() - t0)
            return None
        seconds = time.perf_counter() - t0
        if lost.is_set():
            runs.finish("LOST")
            self.summary.count("lost")
        elif pruning.pruned_at is not None:
            runs.finish("PRUNED", value=pruning.last_value, pruned_at=pruning.pruned_at)
            self._finish(trial, TrialState.PRUNED)
            self.summary.count("pruned")
            self._catalogue(trial, trial_root, params, "PRUNED", seconds)
        elif pruning.last_value is None:
            runs.finish("FAIL")
            self._finish(trial, TrialState.FAIL, failure=f"no {self.cfg.objective.metric} was reported")
            self.summary.count("fail")
            self._catalogue(trial, trial_root, params, "FAILED", seconds)
        else:
            runs.finish("COMPLETE", value=pruning.last_value)
            self._finish(trial, TrialState.COMPLETE, value=pruning.last_value)
            self.summary.count("complete")
            self._catalogue(trial, trial_root, params, "COMPLETED", seconds)
            log.info(
                "trial %d complete in %.1f s: %s = %.5g",
                trial.number,
                seconds,
                self.cfg.objective.metric,
                pruning.last_value,
            )
        if self.signal_seen.is_set():
            return self._requeue(None)
        return None

    def _catalogue(
        self, trial: optuna.Trial, trial_root: Path, params: dict[str, Any], state: str, seconds: float
    ) -> None:
        """The trial's row in the catalogue (:mod:`kdgat.catalogue`): a lost or interrupted trial has
        none; its retry, in the same run root, writes it."""
        stage_dir = paths.run_dir(
            trial_root, self.cfg.dataset, self.cfg.model, self.cfg.scale, self.cfg.stage
        )
        try_record_stage(
            stage_dir, state, elapsed_s=seconds, trial=trial.number, point=params, recorded_by="study"
        )

    def _finish(
        self,
        trial: optuna.Trial,
        state: TrialState,
        *,
        value: float | None = None,
        failure: str | None = None,
    ) -> None:
        try:
            if failure is not None:
                trial.set_user_attr(FAILURE, failure)
            self.study.tell(trial, value if state == TrialState.COMPLETE else None, state=state)
        except UpdateFinishedTrialError:
            log.warning("trial %d had already been failed by another worker", trial.number)

    def _requeue(self, trial: optuna.Trial | None) -> int:
        """The time limit is near: give the current trial back (failed as interrupted, retried by
        whichever worker comes first), acknowledge, exit ``requeue.EXIT_STATUS`` for the job script's
        requeue."""
        if trial is not None:
            frozen = self.study._storage.get_trial(trial._trial_id)
            _fail_as_lost(
                self.study,
                frozen,
                f"interrupted by the requeue signal of worker {self.me.key}",
                self.cfg.model_copy(update={"max_retries": max(self.cfg.max_retries, 1)}),
            )
        self.summary.requeued = True
        self._write_summary()
        requeue.acknowledge(self.run_dir, "tune", worker=self.me.key)
        return requeue.EXIT_STATUS

    def _write_summary(self) -> None:
        """``worker.json`` and a ``metrics.json`` for the job epilog (peak GPU memory of this worker)."""
        import torch

        peak = torch.cuda.max_memory_allocated() / 2**20 if torch.cuda.is_available() else None
        doc = {
            "stage": "tune",
            "status": "requeued" if self.summary.requeued else "complete",
            "study": self.cfg.study,
            "study_dir": str(self.study_dir),
            **self.summary.__dict__,
            "peak_gpu_mem_mb": None if peak is None else round(peak, 1),
        }
        for name in ("worker.json", METRICS_FILE):
            path = self.run_dir / name
            tmp = path.with_suffix(".json.partial")
            tmp.write_text(json.dumps(doc, indent=2))
            tmp.replace(path)
