"""The study report against numbers worked out by hand, and against the journal's own records."""

from __future__ import annotations

import json
import multiprocessing
import re
import warnings
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import optuna
import pytest
from optuna.distributions import FloatDistribution, IntDistribution
from optuna.pruners import HyperbandPruner, PatientPruner
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import FrozenTrial, TrialState

from kdgat.tune.report import format_report, load_study, study_report, write_plots

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
T0 = datetime(2025, 1, 15, 12, 0, 0)
DISTRIBUTIONS = {"lr": FloatDistribution(1e-4, 1e-1, log=True), "hidden": IntDistribution(32, 256)}

MIN_RESOURCE, MAX_RESOURCE = 3, 12
TRIALS_PER_PROCESS = 15

optuna.logging.set_verbosity(optuna.logging.ERROR)


def make_study_dir(study_dir: Path, name: str) -> optuna.Study:
    study_dir.mkdir(parents=True, exist_ok=True)
    (study_dir / "study.json").write_text(
        json.dumps(
            {
                "study": name,
                "objective": {"metric": "val_loss", "direction": "minimize"},
                "pruner": {"kind": "hyperband", "min_resource": MIN_RESOURCE, "max_resource": MAX_RESOURCE},
            }
        )
    )
    storage = JournalStorage(JournalFileBackend(str(study_dir / "journal.log")))
    return optuna.create_study(study_name=name, storage=storage, direction="minimize")


def finished(
    state: TrialState,
    *,
    start_s: float,
    duration_s: float,
    value: float | None = None,
    params: dict[str, Any] | None = None,
    steps: dict[int, float] | None = None,
    attrs: dict[str, Any] | None = None,
) -> FrozenTrial:
    params = params or {"lr": 0.01, "hidden": 64}
    trial = optuna.trial.create_trial(
        state=state,
        value=value,
        params=params,
        distributions={k: DISTRIBUTIONS[k] for k in params},
        system_attrs=attrs or {},
        intermediate_values=steps or {},
    )
    trial.datetime_start = T0 + timedelta(seconds=start_s)
    trial.datetime_complete = trial.datetime_start + timedelta(seconds=duration_s)
    return trial


@pytest.fixture
def hand_study_dir(tmp_path: Path) -> Path:
    """Ten trials whose every figure is known; see the expected values in the tests below."""
    study_dir = tmp_path / "hand"
    study = make_study_dir(study_dir, "hand")
    C, P, F = TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL
    trials = [
        # COMPLETE: 10 s, 20 s, 60 s -> mean 30, p50 20; the best is #1 (0.3).
        finished(C, start_s=0, duration_s=10, value=0.5, steps={1: 0.9, 2: 0.7, 3: 0.5},
                 attrs={"kdgat_worker": "1234_10"}),
        finished(C, start_s=5, duration_s=20, value=0.3, params={"lr": 0.003, "hidden": 128},
                 steps={1: 0.8, 2: 0.3}, attrs={"kdgat_worker": "1234_2"}),
        finished(C, start_s=9, duration_s=60, value=0.4, attrs={"kdgat_worker": "1234_10"}),
        # PRUNED: 5 s, 7 s, 9 s -> mean 7, p50 7; last steps 3, 2, 9 -> min 2, max 9, mean 14/3.
        finished(P, start_s=20, duration_s=5, steps={1: 1.0, 2: 1.1, 3: 1.2},
                 attrs={"kdgat_worker": "1234_2"}),
        finished(P, start_s=21, duration_s=7, steps={1: 1.0, 2: 1.3}),
        finished(P, start_s=22, duration_s=9, steps={s: 1.0 / s for s in range(1, 10)}),
        # FAIL: 100 s (stale), 4 s -> mean 52, p50 52.
        finished(F, start_s=30, duration_s=100, attrs={"kdgat_worker": "1234_3", "kdgat_stale": True,
                                                         "kdgat_failure": "worker stopped heart-beating"}),
        finished(F, start_s=31, duration_s=4, attrs={"kdgat_failure": "CUDA out of memory"}),
    ]  # fmt: skip
    for trial in trials:
        study.add_trial(trial)
    running = optuna.trial.create_trial(
        state=TrialState.RUNNING,
        params={"lr": 0.01, "hidden": 64},
        distributions=DISTRIBUTIONS,
        system_attrs={"kdgat_worker": "1234_3", "kdgat_retry_of": 6},
    )
    study.add_trial(running)
    study.enqueue_trial({"lr": 0.02, "hidden": 32})  # WAITING
    return study_dir


def test_report_of_a_hand_built_study(hand_study_dir: Path) -> None:
    journal = hand_study_dir / "journal.log"
    before = journal.read_bytes()

    report = study_report(load_study(hand_study_dir), objective_metric="val_loss", min_resource=3)

    assert json.loads(json.dumps(report)) == report
    assert report["study"] == "hand"
    assert report["objective_metric"] == "val_loss"
    assert report["direction"] == "minimize"
    assert report["counts"] == {
        "COMPLETE": 3,
        "PRUNED": 3,
        "FAIL": 2,
        "RUNNING": 1,
        "WAITING": 1,
        "total": 10,
    }
    assert report["pruning_rate"] == pytest.approx(3 / 6)
    assert report["stale_failures"] == 1
    assert report["retries"] == 1
    assert report["durations"] == {
        "COMPLETE": {"n": 3, "mean_s": pytest.approx(30.0), "p50_s": pytest.approx(20.0)},
        "PRUNED": {"n": 3, "mean_s": pytest.approx(7.0), "p50_s": pytest.approx(7.0)},
        "FAIL": {"n": 2, "mean_s": pytest.approx(52.0), "p50_s": pytest.approx(52.0)},
    }
    assert report["epochs_at_prune"] == {"min": 2, "max": 9, "mean": pytest.approx(14 / 3)}
    assert report["pruned_before_min_resource"] == 1
    assert report["best"] == {
        "number": 1,
        "value": 0.3,
        "params": {"lr": 0.003, "hidden": 128},
        "worker": "1234_2",
        "duration_s": pytest.approx(20.0),
    }
    assert list(report["workers"].items()) == [("1234_2", 2), ("1234_3", 2), ("1234_10", 2)]
    assert journal.read_bytes() == before, "reporting must not write to the journal"


def test_report_without_min_resource_or_complete_trials(tmp_path: Path) -> None:
    study = make_study_dir(tmp_path / "empty", "empty")
    report = study_report(study, objective_metric="val_loss")
    assert report["counts"] == {"COMPLETE": 0, "PRUNED": 0, "FAIL": 0, "RUNNING": 0, "WAITING": 0, "total": 0}
    assert report["pruning_rate"] is None
    assert report["durations"]["COMPLETE"] == {"n": 0, "mean_s": None, "p50_s": None}
    assert report["epochs_at_prune"] is None
    assert report["pruned_before_min_resource"] is None
    assert report["best"] is None
    assert report["workers"] == {}
    text = format_report(report)
    assert "pruning rate:      -" in text
    assert "best trial: none (no complete trials yet)" in text


def test_format_report(hand_study_dir: Path) -> None:
    report = study_report(load_study(hand_study_dir), objective_metric="val_loss", min_resource=3)
    text = format_report(report)
    lines = text.splitlines()
    table = lines[lines.index("state      trials    mean s     p50 s") + 1 :][:6]
    assert table == [
        "complete        3      30.0      20.0",
        "pruned          3       7.0       7.0",
        "fail            2      52.0      52.0",
        "running         1",
        "waiting         1",
        "total          10",
    ]
    assert "pruning rate:      50.0% of finished trials pruned" in lines
    assert "epochs at prune:   min 2, mean 4.7, max 9" in lines
    assert "pruned too early:  1 (before min_resource)" in lines
    assert "stale failures:    1" in lines
    assert "retries:           1" in lines
    workers = [line for line in lines if line.startswith("  1234_")]
    assert workers == ["  1234_2      2 trials", "  1234_3      2 trials", "  1234_10     2 trials"]
    assert "best trial: #1  val_loss = 0.3" in lines
    assert "    lr = 0.003" in lines
    assert "    hidden = 128" in lines
    assert "\x1b" not in text


# --- the report against the journal's raw records, for a study run by two processes at once ---


def replay_counts(journal: Path, study_name: str) -> Counter[str]:
    """Trial states of ``study_name`` by replaying ``journal`` line by line, without Optuna.

    Follows optuna/storages/journal/_storage.py: study ids and trial ids are handed out in log
    order, and a finished trial ignores later state writes (the first worker to finish it wins).
    """
    create_study, delete_study, create_trial, set_trial_state = 0, 1, 4, 6
    study_ids: dict[str, int] = {}
    next_study_id = 0
    trial_study: dict[int, int] = {}
    trial_state: dict[int, TrialState] = {}
    for line in journal.read_text().splitlines():
        log = json.loads(line)
        op = log["op_code"]
        if op == create_study and log["study_name"] not in study_ids:
            study_ids[log["study_name"]] = next_study_id
            next_study_id += 1
        elif op == delete_study:
            study_ids = {name: sid for name, sid in study_ids.items() if sid != log["study_id"]}
        elif op == create_trial and log["study_id"] in study_ids.values():
            trial_id = len(trial_study)
            trial_study[trial_id] = log["study_id"]
            trial_state[trial_id] = TrialState(log.get("state", TrialState.RUNNING.value))
        elif op == set_trial_state and log["trial_id"] in trial_state:
            current, new = trial_state[log["trial_id"]], TrialState(log["state"])
            if not current.is_finished():
                trial_state[log["trial_id"]] = new
    study_id = study_ids[study_name]
    return Counter(state.name for tid, state in trial_state.items() if trial_study[tid] == study_id)


def make_pruner() -> optuna.pruners.BasePruner:
    hyperband = HyperbandPruner(min_resource=MIN_RESOURCE, max_resource=MAX_RESOURCE, reduction_factor=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return PatientPruner(hyperband, patience=1)


def overfitting_objective(trial: optuna.Trial, worker: str) -> float:
    """Validation loss that bottoms out and then rises, the worse the earlier, so the patient pruner acts.

    The worst trials rise from epoch 2 on, which lets the pruner act as early as it ever may.
    """
    # Optuna has no public setter for system attrs; the workers write them through the storage too.
    trial.storage.set_trial_system_attr(trial._trial_id, "kdgat_worker", worker)
    x = trial.suggest_float("x", 0.0, 1.0)
    if x > 0.85:
        raise RuntimeError("diverged")
    lowest_at = 1 + round(7 * (0.85 - x))
    loss = x
    for epoch in range(1, MAX_RESOURCE + 1):
        loss = x + 0.02 * (epoch - lowest_at) ** 2
        trial.report(loss, epoch)
        if trial.should_prune():
            raise optuna.TrialPruned()
    return loss


def optimize_in_process(journal: str, study_name: str, seed: int, n_trials: int) -> None:
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = optuna.load_study(
        study_name=study_name,
        storage=JournalStorage(JournalFileBackend(journal)),
        sampler=optuna.samplers.RandomSampler(seed=seed),
        pruner=make_pruner(),
    )
    worker = f"999_{seed}"
    study.optimize(
        lambda trial: overfitting_objective(trial, worker), n_trials=n_trials, catch=(RuntimeError,)
    )


def test_report_matches_the_journal_of_a_two_process_study(tmp_path: Path) -> None:
    study_dir = tmp_path / "concurrent"
    make_study_dir(study_dir, "concurrent")
    journal = str(study_dir / "journal.log")
    # Fork, not spawn: a spawned child re-imports optuna and matplotlib, seconds on a busy machine.
    # The children only open their own storages, so nothing forked from the parent is shared.
    context = multiprocessing.get_context("fork")
    workers = [
        context.Process(target=optimize_in_process, args=(journal, "concurrent", seed, TRIALS_PER_PROCESS))
        for seed in (1, 2)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    assert [w.exitcode for w in workers] == [0, 0]
    records = [json.loads(line) for line in (study_dir / "journal.log").read_text().splitlines()]
    trial_writers = {r["worker_id"].rsplit("-", 1)[0] for r in records if r["op_code"] == 4}  # CREATE_TRIAL
    assert len(trial_writers) == 2, "both processes should have created trials in the one journal"

    report = study_report(load_study(study_dir), objective_metric="val_loss", min_resource=MIN_RESOURCE)
    replayed = replay_counts(study_dir / "journal.log", "concurrent")

    assert report["counts"]["total"] == sum(replayed.values()) == 2 * TRIALS_PER_PROCESS
    for state in ("COMPLETE", "PRUNED", "FAIL", "RUNNING", "WAITING"):
        assert report["counts"][state] == replayed[state], state
    assert report["counts"]["PRUNED"] > 0, "the pruner should have stopped some overfitting trials"
    assert report["pruning_rate"] == pytest.approx(
        replayed["PRUNED"] / (replayed["COMPLETE"] + replayed["PRUNED"])
    )
    assert report["pruned_before_min_resource"] == 0
    assert report["epochs_at_prune"]["min"] >= MIN_RESOURCE
    assert report["workers"] == {"999_1": TRIALS_PER_PROCESS, "999_2": TRIALS_PER_PROCESS}


# --- plots and errors ---


@pytest.mark.parametrize("with_complete_trials", [True, False])
def test_write_plots(tmp_path: Path, hand_study_dir: Path, with_complete_trials: bool) -> None:
    if with_complete_trials:
        study = load_study(hand_study_dir)
    else:
        study = make_study_dir(tmp_path / "none", "none")
        study.add_trial(finished(TrialState.PRUNED, start_s=0, duration_s=5, steps={1: 1.0, 2: 2.0, 3: 3.0}))
    out_dir = tmp_path / "plots"

    paths = write_plots(study, out_dir)

    assert [p.name for p in paths] == ["optimization_history.png", "intermediate_values.png"]
    for path in paths:
        data = path.read_bytes()
        assert data.startswith(PNG_SIGNATURE) and len(data) > 1000, path
    assert sorted(p.name for p in out_dir.iterdir()) == sorted(p.name for p in paths), "temp files left"


def test_load_study_names_the_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=re.escape(str(tmp_path / "nowhere" / "study.json"))):
        load_study(tmp_path / "nowhere")
    study_dir = tmp_path / "half"
    study_dir.mkdir()
    (study_dir / "study.json").write_text('{"study": "half"}')
    with pytest.raises(ValueError, match=re.escape(str(study_dir / "journal.log"))):
        load_study(study_dir)
    assert not (study_dir / "journal.log").exists(), "a failed load must not create a journal"


def test_load_study_names_the_study_missing_from_the_journal(tmp_path: Path) -> None:
    study_dir = tmp_path / "renamed"
    make_study_dir(study_dir, "old-name")
    (study_dir / "study.json").write_text('{"study": "new-name"}')
    with pytest.raises(ValueError, match="no study named 'new-name'") as err:
        load_study(study_dir)
    assert str(study_dir / "journal.log") in str(err.value)
    assert "old-name" in str(err.value)
