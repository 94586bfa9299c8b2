"""The tune worker's promises, on real Optuna journal storage and the real pipeline (nothing of
ours is mocked): no trial stays RUNNING once its worker is gone (stale heartbeat, requeued worker),
a lost trial is retried with its own values at most ``maxRetries`` times and by one worker only,
``nTrials`` counts what really finished, a worker fills a study from the stage's per-epoch metric,
and the requeue signal hands the running trial back to the restarted worker."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import optuna
import pytest
import torch
from optuna.trial import FrozenTrial, TrialState

from kdgat.catalogue import read_rows
from kdgat.config import PipelineConfig
from kdgat.contract import ACK_FILE, CATALOGUE_DIR, CONTRACT, MODEL_FILE
from kdgat.tune.study import StudyConfig, open_study, read_config, suggest
from kdgat.tune.worker import (
    FAILURE,
    HEARTBEAT,
    LIFE,
    RETRIES,
    RETRY_OF,
    STALE,
    WORKER,
    Worker,
    WorkerId,
    _counts,
    _fail_as_lost,
    fail_lost_trials,
)

optuna.logging.set_verbosity(optuna.logging.WARNING)

STALE_AFTER = 30
#: Where a worker (or a trial) of the study below writes inside its run root.
STAGE_DIR = Path("synth") / "vgae_small_autoencoder"
REQUEUE_EPOCHS = 30
ME = WorkerId(key="900_0", life="node1:100:0", index=0)
OTHER = WorkerId(key="900_1", life="node2:200:0", index=1)


def write_study(study_dir: Path, **over: Any) -> StudyConfig:
    """A study of the VGAE autoencoder on the tiny synthetic data set (camelCase, as the runner
    writes it); ``over`` replaces top-level keys."""
    study_dir.mkdir(parents=True, exist_ok=True)
    doc: dict[str, Any] = {
        "study": "worker-test",
        "stage": "autoencoder",
        "model": "vgae",
        "scale": "small",
        "dataset": "synth",
        "overrides": {"data.num_workers": 0, "training.patience": 0, "training.max_epochs": 3},
        "space": {"training.lr": {"type": "float", "low": 1e-4, "high": 1e-2, "log": True}},
        "objective": {"metric": "val_loss", "direction": "minimize"},
        "nTrials": 3,
        "pruner": {"type": "none"},
        "sampler": {"type": "random", "seed": 0},
        "heartbeatSeconds": 1,
        "staleAfterSeconds": STALE_AFTER,
        "maxRetries": 1,
        **over,
    }
    (study_dir / "study.json").write_text(json.dumps(doc))
    return read_config(study_dir)


def running_trial(study: optuna.Study, cfg: StudyConfig, owner: WorkerId, beat: float | None) -> FrozenTrial:
    """A RUNNING trial as a worker leaves it after ``ask``: values suggested, owner and life
    recorded, and a heartbeat at ``beat`` (None: the worker died before its first one)."""
    trial = study.ask()
    suggest(trial, cfg.space)
    attrs: dict[str, Any] = {WORKER: owner.key, LIFE: owner.life}
    if beat is not None:
        attrs[HEARTBEAT] = beat
    for key, value in attrs.items():
        study._storage.set_trial_system_attr(trial._trial_id, key, value)
    return study._storage.get_trial(trial._trial_id)


def trial(study: optuna.Study, number: int) -> FrozenTrial:
    return study.get_trials(deepcopy=False)[number]


def waiting(study: optuna.Study) -> list[FrozenTrial]:
    return study.get_trials(states=(TrialState.WAITING,))


@pytest.fixture
def study_dir(tmp_path: Path) -> Path:
    return tmp_path / "study"


# --- fail_lost_trials: fast, no training -------------------------------------------------------


def test_a_trial_whose_heartbeat_stopped_is_failed_and_retried_once_with_its_values(
    study_dir: Path,
) -> None:
    cfg = write_study(study_dir)
    study = open_study(study_dir, cfg)
    now = time.time()
    lost = running_trial(study, cfg, OTHER, now - STALE_AFTER - 1)
    alive = running_trial(study, cfg, OTHER, now - 5)

    assert fail_lost_trials(study, cfg, ME, now=now) == [lost.number]

    failed = trial(study, lost.number)
    assert failed.state == TrialState.FAIL
    assert failed.system_attrs[STALE] is True
    assert "no heartbeat from worker 900_1" in failed.system_attrs[FAILURE]
    untouched = trial(study, alive.number)
    assert untouched.state == TrialState.RUNNING
    assert untouched.system_attrs == alive.system_attrs
    (retry,) = waiting(study)
    assert retry.system_attrs["fixed_params"] == lost.params
    assert (retry.user_attrs[RETRY_OF], retry.user_attrs[RETRIES]) == (lost.number, 1)
    # The worker that picks the retry up draws exactly the lost trial's values.
    picked = study.ask()
    assert picked.number == retry.number
    assert suggest(picked, cfg.space) == lost.params
    # Failing it again later is not a new discovery: nothing more to do.
    assert fail_lost_trials(study, cfg, ME, now=now) == []


def test_a_trial_that_never_beat_is_judged_by_its_start_time(study_dir: Path) -> None:
    cfg = write_study(study_dir)
    study = open_study(study_dir, cfg)
    silent = running_trial(study, cfg, OTHER, beat=None)
    started = trial(study, silent.number).datetime_start
    assert started is not None
    assert fail_lost_trials(study, cfg, ME, now=started.timestamp() + 5) == []
    assert fail_lost_trials(study, cfg, ME, now=started.timestamp() + STALE_AFTER + 1) == [silent.number]
    assert len(waiting(study)) == 1


def test_a_requeued_worker_fails_the_trial_of_its_earlier_life_at_once(study_dir: Path) -> None:
    cfg = write_study(study_dir)
    study = open_study(study_dir, cfg)
    now = time.time()
    earlier_life = WorkerId(key=ME.key, life="node7:55:0", index=ME.index)
    mine_before = running_trial(study, cfg, earlier_life, now)  # fresh heartbeat
    mine_now = running_trial(study, cfg, ME, now)  # same life: the trial this worker runs

    assert fail_lost_trials(study, cfg, ME, now=now) == [mine_before.number]

    failed = trial(study, mine_before.number)
    assert failed.state == TrialState.FAIL
    assert failed.system_attrs[STALE] is True
    assert "restarted (requeued)" in failed.system_attrs[FAILURE]
    assert trial(study, mine_now.number).state == TrialState.RUNNING
    (retry,) = waiting(study)
    assert retry.system_attrs["fixed_params"] == mine_before.params


def test_two_workers_failing_the_same_trial_enqueue_one_retry(study_dir: Path) -> None:
    cfg = write_study(study_dir)
    # Two JournalStorage objects on one journal: two worker processes.
    a = open_study(study_dir, cfg, worker_index=0)
    b = open_study(study_dir, cfg, worker_index=1)
    now = time.time()
    one = running_trial(a, cfg, OTHER, now - 100)
    two = running_trial(a, cfg, OTHER, now - 100)
    # b read the trials while they were RUNNING, before a failed them (the race).
    (two_seen_by_b,) = (t for t in b.get_trials(states=(TrialState.RUNNING,)) if t.number == two.number)

    assert fail_lost_trials(a, cfg, ME, now=now) == [one.number, two.number]
    # Coming second, b finds nothing left to fail...
    assert fail_lost_trials(b, cfg, WorkerId(key="900_2", life="node3:300:0", index=2), now=now) == []
    # ...and acting on what it read before, its writes hit a finished trial (the journal keeps
    # the first FAIL): it backs off and enqueues nothing.
    assert _fail_as_lost(b, two_seen_by_b, "b's view", cfg) is False
    assert trial(b, two.number).system_attrs[FAILURE] != "b's view"
    assert sorted(t.user_attrs[RETRY_OF] for t in waiting(b)) == [one.number, two.number]


@pytest.mark.parametrize("max_retries", [0, 1, 2])
def test_retries_stop_at_max_retries(study_dir: Path, max_retries: int) -> None:
    cfg = write_study(study_dir, maxRetries=max_retries)
    study = open_study(study_dir, cfg)
    now = time.time()
    lost = running_trial(study, cfg, OTHER, now - 100)
    for _ in range(max_retries + 2):  # bounded: a runaway chain of retries fails, not hangs
        assert fail_lost_trials(study, cfg, ME, now=now) == [lost.number]
        if not waiting(study):
            break
        # A worker picks the retry up and dies before its first heartbeat is due.
        lost = running_trial(study, cfg, OTHER, now - 100)
        assert lost.params == trial(study, 0).params
    tries = study.get_trials()
    assert len(tries) == 1 + max_retries
    assert all(t.state == TrialState.FAIL and t.system_attrs[STALE] for t in tries)
    assert [t.user_attrs.get(RETRIES, 0) for t in tries] == list(range(max_retries + 1))
    assert [t.user_attrs.get(RETRY_OF) for t in tries[1:]] == list(range(max_retries))


def test_only_stale_failures_are_left_out_of_the_trial_count(study_dir: Path) -> None:
    cfg = write_study(study_dir)
    study = open_study(study_dir, cfg)
    now = time.time()
    for state in (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL):
        t = study.ask()
        suggest(t, cfg.space)
        study.tell(t, 1.0 if state == TrialState.COMPLETE else None, state=state)
    running_trial(study, cfg, OTHER, now - 100)  # lost: failed as stale, retry WAITING
    running_trial(study, cfg, OTHER, now)  # still running elsewhere
    assert _counts(study) == (3, 2)
    fail_lost_trials(study, cfg, ME, now=now)
    assert len(waiting(study)) == 1
    # The stale FAIL is replaced by its retry, so it does not count; the WAITING retry neither.
    assert _counts(study) == (3, 1)


# --- a real worker on the tiny synthetic data set ----------------------------------------------


@pytest.fixture
def in_process_worker() -> Iterator[None]:
    """One torch thread (busy-waiting thread pools on a shared small machine make epochs ten times
    slower at random); afterwards the SIGUSR1 handler the worker installed is put back."""
    threads, handler = torch.get_num_threads(), signal.getsignal(signal.SIGUSR1)
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
    signal.signal(signal.SIGUSR1, handler)


def test_a_worker_fills_the_study_with_each_trials_last_epoch_metric(
    tmp_path: Path, pipeline_env: dict[str, str], in_process_worker: None
) -> None:
    study_dir = tmp_path / "study"
    cfg = write_study(study_dir)
    me = WorkerId(key="901_0", life="node9:900:0", index=0)

    assert Worker(study_dir, tmp_path / "worker", me).run() == 0

    study = open_study(study_dir, cfg)
    trials = study.get_trials()
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 3
    assert len({t.params["training.lr"] for t in trials}) == 3
    for t in trials:
        assert sorted(t.intermediate_values) == [1, 2, 3]  # one report per epoch
        assert t.value == t.intermediate_values[3]
        assert (t.system_attrs[WORKER], t.system_attrs[LIFE]) == (me.key, me.life)
        trial_dir = study_dir / "trials" / f"trial_{t.number}"
        assert t.user_attrs["run_root"] == str(trial_dir)
        metrics = json.loads((trial_dir / STAGE_DIR / "metrics.json").read_text())
        assert metrics["status"] == "complete"
        assert metrics["epochs"] == 3
        # The trial's values reached the stage as config overrides.
        blob = torch.load(trial_dir / STAGE_DIR / MODEL_FILE, weights_only=True, map_location="cpu")
        trained = PipelineConfig.model_validate_json(blob["config"])
        assert trained.training.lr == pytest.approx(t.params["training.lr"])
        assert trained.training.max_epochs == 3
    summary = json.loads((tmp_path / "worker" / STAGE_DIR / "worker.json").read_text())
    assert summary["worker"] == me.key
    assert summary["status"] == "complete"
    assert summary["trials"] == {"complete": 3}
    assert summary["failed_lost"] == []
    # Each trial is a row of the catalogue (no runner manifest here: beside the study's trials).
    rows = read_rows(study_dir / CATALOGUE_DIR)
    assert sorted((r["trial"], r["state"], r["recorded_by"]) for r in rows) == [
        (t.number, "COMPLETED", "study") for t in trials
    ]
    for r in rows:
        assert json.loads(r["point"]) == trials[r["trial"]].params
        assert r["anomaly_auroc"] is not None and r["epochs"] == 3


# --- the requeue handshake, across two lives of one array task ---------------------------------


def _log_tail(path: Path) -> str:
    return path.read_text(errors="replace")[-4000:] if path.exists() else "(no log)"


def test_the_requeue_signal_hands_the_trial_to_the_restarted_worker(
    tmp_path: Path, pipeline_env: dict[str, str]
) -> None:
    study_dir = tmp_path / "study"
    # Enough epochs (about 0.25 s each here) that the signal lands well inside the trial.
    cfg = write_study(
        study_dir,
        nTrials=1,
        overrides={
            "data.num_workers": 0,
            "training.patience": 0,
            "training.max_epochs": REQUEUE_EPOCHS,
            "training.batch_size": 8,
        },
    )
    run_root = tmp_path / "worker"
    cmd = [sys.executable, "-m", "kdgat", "tune", "--study-dir", str(study_dir), "--run-root", str(run_root)]
    env = {
        **os.environ,
        **pipeline_env,
        "SLURM_ARRAY_JOB_ID": "77",
        "SLURM_ARRAY_TASK_ID": "0",
        "KD_GAT_REQUEUE_SIGNAL": "USR1",
        # One thread: busy-waiting thread pools on a shared small machine make epochs erratic.
        "OMP_NUM_THREADS": "1",
    }
    env.pop("SLURM_JOB_ID", None)
    first_log = tmp_path / "life0.log"
    with first_log.open("wb") as out:
        proc = subprocess.Popen(
            cmd, env={**env, "SLURM_RESTART_COUNT": "0"}, stdout=out, stderr=subprocess.STDOUT
        )
    try:
        study: optuna.Study | None = None
        deadline = time.monotonic() + 180
        mid_trial: FrozenTrial | None = None
        while mid_trial is None:
            assert proc.poll() is None, f"the worker exited early:\n{_log_tail(first_log)}"
            assert time.monotonic() < deadline, f"no epoch reported in time:\n{_log_tail(first_log)}"
            if study is None and (study_dir / "journal.log").exists():
                study = open_study(study_dir, cfg)
            if study is not None:
                reported = [
                    t for t in study.get_trials(states=(TrialState.RUNNING,)) if t.intermediate_values
                ]
                mid_trial = reported[0] if reported else None
            if mid_trial is None:
                time.sleep(0.1)
        proc.send_signal(signal.SIGUSR1)
        assert proc.wait(timeout=120) == CONTRACT.requeue.exit_status == 75, _log_tail(first_log)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert study is not None

    ack = json.loads((run_root / STAGE_DIR / ACK_FILE).read_text())
    assert ack["worker"] == "77_0"
    assert tuple(ack) == CONTRACT.requeue.ack_fields.tune
    interrupted = trial(study, mid_trial.number)
    assert interrupted.state == TrialState.FAIL, "the signal came after the trial ended: raise max_epochs"
    assert interrupted.system_attrs[STALE] is True
    assert "requeue signal of worker 77_0" in interrupted.system_attrs[FAILURE]
    assert max(interrupted.intermediate_values) < REQUEUE_EPOCHS
    (retry,) = waiting(study)
    assert retry.user_attrs[RETRY_OF] == interrupted.number
    summary = json.loads((run_root / STAGE_DIR / "worker.json").read_text())
    assert (summary["status"], summary["requeued"]) == ("requeued", True)

    # The requeued job: the same array task in its next life.
    second_log = tmp_path / "life1.log"
    with second_log.open("wb") as out:
        again = subprocess.run(
            cmd, env={**env, "SLURM_RESTART_COUNT": "1"}, stdout=out, stderr=subprocess.STDOUT, timeout=300
        )
    assert again.returncode == 0, _log_tail(second_log)
    assert _counts(study) == (1, 0)
    (done,) = study.get_trials(states=(TrialState.COMPLETE,))
    assert done.number == retry.number
    assert done.params == interrupted.params
    assert done.system_attrs[RETRY_OF] == interrupted.number
    assert done.system_attrs[WORKER] == "77_0"
    assert done.system_attrs[LIFE].endswith(":1")
    assert max(done.intermediate_values) == REQUEUE_EPOCHS  # trained to the end
    # ... resuming from the interrupted trial's checkpoint in its run root, not from epoch 1.
    assert done.user_attrs["run_root"] == interrupted.user_attrs["run_root"]
    assert 1 < min(done.intermediate_values) <= max(interrupted.intermediate_values) + 1
    assert done.value == done.intermediate_values[REQUEUE_EPOCHS]
    summary = json.loads((run_root / STAGE_DIR / "worker.json").read_text())
    assert (summary["status"], summary["trials"]) == ("complete", {"complete": 1})
