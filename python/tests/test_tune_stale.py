"""The tune worker's promises: no trial stays RUNNING after its worker is gone (stale heartbeat,
requeued worker), a lost trial is retried once with its own values, nTrials counts what finished,
and a real worker fills a study from the pipeline's own per-epoch metric. Real Optuna journal
storage, real pipeline; nothing of ours is mocked."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import optuna
import pytest
from optuna.trial import TrialState

from kdgat.tune.study import open_study, read_config, suggest
from kdgat.tune.worker import (
    HEARTBEAT,
    LIFE,
    RETRY_OF,
    STALE,
    WORKER,
    Worker,
    WorkerId,
    _counts,
    fail_lost_trials,
)

optuna.logging.set_verbosity(optuna.logging.WARNING)


def write_study(study_dir: Path, **over: Any) -> Path:
    study_dir.mkdir(parents=True, exist_ok=True)
    cfg: dict[str, Any] = {
        "study": "s",
        "stage": "autoencoder",
        "model": "vgae",
        "scale": "small",
        "dataset": "synth",
        "overrides": {"data.num_workers": 0, "training.patience": 0, "training.max_epochs": 2},
        "space": SPACE,
        "objective": {"metric": "val_loss", "direction": "minimize"},
        "nTrials": 3,
        "pruner": {"type": "none"},
        "heartbeatSeconds": 1,
        "staleAfterSeconds": 30,
        "maxRetries": 1,
        **over,
    }
    (study_dir / "study.json").write_text(json.dumps(cfg))
    return study_dir


SPACE = {"training.lr": {"type": "float", "low": 1e-4, "high": 1e-2, "log": True}}


def running_trial(study: optuna.Study, worker: str, life: str, beat: float) -> optuna.trial.FrozenTrial:
    trial = study.ask()
    trial.suggest_float("training.lr", 1e-4, 1e-2, log=True)
    for key, value in ((WORKER, worker), (LIFE, life), (HEARTBEAT, beat)):
        study._storage.set_trial_system_attr(trial._trial_id, key, value)
    return study._storage.get_trial(trial._trial_id)


@pytest.fixture
def study_dir(tmp_path: Path) -> Path:
    return write_study(tmp_path / "study")


def opened(study_dir: Path) -> optuna.Study:
    return open_study(study_dir, read_config(study_dir))


ME = WorkerId(key="900_0", life="host:1:0", index=0)


def test_a_trial_without_heartbeat_is_failed_and_retried_once_with_its_values(study_dir: Path) -> None:
    study = opened(study_dir)
    now = time.time()
    stale = running_trial(study, "900_1", "host:2:0", now - 31)
    fresh = running_trial(study, "900_1", "host:2:0", now - 5)
    assert fail_lost_trials(study, read_config(study_dir), ME, now=now) == [stale.number]
    trials = study.get_trials()
    assert trials[stale.number].state == TrialState.FAIL
    assert trials[stale.number].system_attrs[STALE] is True
    assert trials[fresh.number].state == TrialState.RUNNING
    waiting = study.get_trials(states=(TrialState.WAITING,))
    assert len(waiting) == 1
    assert waiting[0].user_attrs[RETRY_OF] == stale.number
    assert waiting[0].system_attrs["fixed_params"] == stale.params


def test_a_requeued_worker_fails_its_own_earlier_trial_at_once(study_dir: Path) -> None:
    study = opened(study_dir)
    now = time.time()
    mine = running_trial(study, ME.key, "host:1:PREVIOUS", now)  # fresh heartbeat, earlier life
    assert fail_lost_trials(study, read_config(study_dir), ME, now=now) == [mine.number]
    assert study.get_trials()[mine.number].state == TrialState.FAIL


def test_two_workers_failing_the_same_trial_make_one_retry(study_dir: Path) -> None:
    a, b = opened(study_dir), opened(study_dir)  # two storages on one journal: two processes
    now = time.time()
    stale = running_trial(a, "900_1", "host:2:0", now - 100)
    cfg = read_config(study_dir)
    failed_a = fail_lost_trials(a, cfg, ME, now=now)
    failed_b = fail_lost_trials(b, cfg, WorkerId(key="900_2", life="host:3:0", index=2), now=now)
    assert failed_a == [stale.number] and failed_b == []
    assert len(b.get_trials(states=(TrialState.WAITING,))) == 1


def test_retries_stop_at_max_retries_and_only_stale_failures_leave_the_count(study_dir: Path) -> None:
    study = opened(study_dir)
    cfg = read_config(study_dir)
    now = time.time()
    first = running_trial(study, "900_1", "host:2:0", now - 100)
    fail_lost_trials(study, cfg, ME, now=now)
    retry = study.ask()  # picks the enqueued retry: same values, marked as retry 1
    assert suggest(retry, cfg.space) == first.params
    assert retry.user_attrs["kdgat_retries"] == 1
    study._storage.set_trial_system_attr(retry._trial_id, "kdgat_retries", 1)
    study._storage.set_trial_system_attr(retry._trial_id, HEARTBEAT, now - 100)
    fail_lost_trials(study, cfg, ME, now=now)
    assert study.get_trials(states=(TrialState.WAITING,)) == []  # maxRetries 1: no third try
    broken = study.ask()
    suggest(broken, cfg.space)
    study.tell(broken, state=TrialState.FAIL)  # a trial that failed by itself counts
    done = study.ask()
    suggest(done, cfg.space)
    study.tell(done, 1.0)
    assert _counts(study) == (2, 0)


def test_a_worker_fills_the_study_with_the_last_epoch_metric(
    tmp_path: Path, pipeline_env: dict[str, str]
) -> None:
    study_dir = write_study(tmp_path / "study")
    me = WorkerId(key="901_0", life="host:9:0", index=0)
    assert Worker(study_dir, tmp_path / "w0", me).run() == 0
    study = opened(study_dir)
    trials = study.get_trials()
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 3
    for t in trials:
        assert t.value == t.intermediate_values[max(t.intermediate_values)]
        assert sorted(t.intermediate_values) == [1, 2]  # one report per epoch
        assert t.system_attrs[WORKER] == me.key
        metrics = (
            study_dir / "trials" / f"trial_{t.number}" / "synth" / "vgae_small_autoencoder" / "metrics.json"
        )
        assert json.loads(metrics.read_text())["status"] == "complete"
    summary = json.loads((tmp_path / "w0" / "synth" / "vgae_small_autoencoder" / "worker.json").read_text())
    assert summary["trials"] == {"complete": 3}


def test_the_requeue_signal_gives_the_trial_back_and_the_restarted_worker_finishes(
    tmp_path: Path, pipeline_env: dict[str, str]
) -> None:
    study_dir = write_study(
        tmp_path / "study",
        nTrials=1,
        overrides={
            "data.num_workers": 0,
            "training.patience": 0,
            "training.max_epochs": 6,
            "training.batch_size": 8,
        },
    )
    env = {**os.environ, **pipeline_env, "SLURM_ARRAY_JOB_ID": "77", "SLURM_ARRAY_TASK_ID": "0"}
    cmd = [
        sys.executable,
        "-m",
        "kdgat",
        "tune",
        "--study-dir",
        str(study_dir),
        "--run-root",
        str(tmp_path / "w"),
    ]
    proc = subprocess.Popen(cmd, env={**env, "SLURM_RESTART_COUNT": "0"}, stderr=subprocess.DEVNULL)
    study = opened(study_dir) if (study_dir / "journal.log").exists() else None
    deadline = time.time() + 120
    while time.time() < deadline:  # mid-trial: at least one epoch reported
        if (study_dir / "journal.log").exists():
            study = study or opened(study_dir)
            if any(t.intermediate_values for t in study.get_trials(states=(TrialState.RUNNING,))):
                break
        time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail("the worker never reported an epoch")
    proc.send_signal(signal.SIGUSR1)
    assert proc.wait(timeout=120) == 75
    assert (tmp_path / "w" / "synth" / "vgae_small_autoencoder" / "requeue_ack.json").exists()
    assert study is not None
    (interrupted,) = study.get_trials(states=(TrialState.FAIL,))
    assert interrupted.system_attrs[STALE] is True
    assert "requeue signal" in interrupted.system_attrs["kdgat_failure"]
    assert len(study.get_trials(states=(TrialState.WAITING,))) == 1
    # The requeued job: same array task, next restart count.
    again = subprocess.run(
        cmd, env={**env, "SLURM_RESTART_COUNT": "1"}, stderr=subprocess.DEVNULL, timeout=300
    )
    assert again.returncode == 0
    (done,) = study.get_trials(states=(TrialState.COMPLETE,))
    assert done.params == interrupted.params
    assert done.system_attrs[RETRY_OF] == interrupted.number
    # It resumed from the interrupted trial's checkpoint in its run root, not from epoch 1.
    assert done.user_attrs["run_root"] == interrupted.user_attrs["run_root"]
    assert 1 < min(done.intermediate_values) <= max(interrupted.intermediate_values) + 1
    assert max(done.intermediate_values) == 6
