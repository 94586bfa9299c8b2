"""The stages end to end on a tiny synthetic data set, in process (CPU)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import lightning as L
import pytest

from kdgat.contract import CONTRACT, EPOCH_METRICS
from kdgat.data import write_synthetic_dataset
from kdgat.training.fit import extra_callbacks

from helpers import AUTOENCODER, DATASET, cli_args, kdgat, metrics


class EpochMetrics(L.Callback):
    """What a stage logs at the end of each validation epoch (what a pruner can watch)."""

    def __init__(self) -> None:
        self.seen: set[str] = set()

    def on_validation_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.seen |= {k for k in trainer.callback_metrics if k.startswith("val_")}


def test_chained_pipeline_beats_the_trivial_baseline(run_root: Path) -> None:
    chain = [
        ("autoencoder", "vgae", "small", "2"),
        ("curriculum", "gat", "large", "4"),
        ("distillation", "gat", "small", "4"),
    ]
    for stage, model, scale, epochs in chain:
        logged = EpochMetrics()
        with extra_callbacks(logged):
            status = kdgat(
                run_root, stage, "--model", model, "--scale", scale, "-O", "training.max_epochs", epochs
            )
        assert status == 0, stage
        # The run contract says what each stage logs per epoch (the runner checks tune objectives with it).
        assert logged.seen == set(EPOCH_METRICS[stage]), stage
    logged = EpochMetrics()
    with extra_callbacks(logged):
        assert kdgat(run_root, "evaluation", "--model", "gat", "--scale", "small") == 0
    assert logged.seen == set(EPOCH_METRICS["evaluation"]) == set()
    ev = metrics(run_root, "gat_small_evaluation")
    assert ev["status"] == "complete"
    assert ev["baseline_majority"]["f1"] == 0.0
    assert ev["scores"]["f1"] > 0.5, ev["scores"]
    assert ev["scores"]["auroc"] > 0.8
    assert set(ev["scores_by_attack"]) == {"dos", "fuzzy", "gear", "rpm"}
    # the event figures of the verdicts: delays to each window's verdict time, false alarms per hour
    # of benign traffic, overall and per recording (by its path)
    events, by_recording = ev["events"], ev["false_alarms_by_recording"]
    assert events["episodes"] > 0 and 0 < events["detected"] <= events["episodes"]
    assert events["median_delay_s"] is not None and events["median_delay_s"] >= 0
    assert by_recording and all(path.startswith("test_") for path in by_recording)  # the test files
    assert sum(r["false_alarm_windows"] for r in by_recording.values()) == events["false_alarm_windows"]
    dist = metrics(run_root, "gat_small_distillation")
    assert dist["student_to_teacher_size"] < 0.5
    for key in (
        "epochs",
        "graphs_per_sec",
        "data_wait_fraction",
        "peak_cpu_rss_mb",
        "batch_size",
        "batch_size_mode",
        "timings",
    ):
        assert key in dist, key
    assert dist["peak_gpu_mem_mb"] is None  # CPU
    # Every stage records the graph cache it read, so a later run can check it reads the same.
    cache = metrics(run_root, "vgae_small_autoencoder")["graph_cache"]
    assert len(cache["params_digest"]) == 64 and len(cache["source_digest"]) == 64
    assert cache["params"]["window_size"] == 100
    for d in ("gat_large_curriculum", "gat_small_distillation", "gat_small_evaluation"):
        assert metrics(run_root, d)["graph_cache"] == cache, d
    # the default scoring: the GAT's verdict, the VGAE's novel windows and the timing rule's, on the
    # payload features (the synthetic traffic's event-driven IDs are not periodic: the rule stays quiet)
    assert ev["scoring"]["mode"] == "novelty_timing"
    assert ev["scoring"]["vgae_model"].endswith("vgae_small_autoencoder/model.pt")
    assert ev["scoring"]["timing_val_benign_flagged"] < 0.05
    # and per recording against the models: on the test files, and on each training file's
    # validation windows with the models' bars fitted on the other training files'
    rule = ev["timing_rule"]
    assert rule["after_windows"] == 20 and rule["test"]
    assert all(path.startswith("test_") for path in rule["test"])
    assert rule["validation"] and all(path.startswith("train_") for path in rule["validation"])
    assert all("rule_only_false_alarms_per_hour" in r for r in rule["validation"].values())
    # no warm-up by default: every test window is judged
    assert ev["scoring"]["warmup_windows"] == 0 and ev["warmup"]["test_windows"] == 0
    assert cache["params"]["features"] == "payload"
    args = ("evaluation", "--model", "gat", "--scale", "small", "-O", "evaluation.scoring", "gat")
    assert kdgat(run_root, *args) == 0
    alone = metrics(run_root, "gat_small_evaluation")
    assert alone["scoring"] == {"mode": "gat", "threshold": 0.5}
    assert alone["scores"]["f1"] > 0.5, alone["scores"]
    # fusion_novelty, a config value: the GAT's verdict plus the VGAE's novel windows
    novelty = ("evaluation", "--model", "gat", "--scale", "small")
    novelty += ("-O", "evaluation.scoring", "fusion_novelty")
    assert kdgat(run_root, *novelty) == 0
    fused = metrics(run_root, "gat_small_evaluation")
    assert fused["scoring"]["mode"] == "fusion_novelty"
    assert fused["scores"]["f1"] > 0.5, fused["scores"]


def test_the_papers_feature_set_still_runs(run_root: Path, pipeline_env: dict[str, str]) -> None:
    """The published 11 + 11 features (CAN-ID vocabulary index) with the GAT alone: the chain runs
    on its own cache (its own data set name: one cache per data set)."""
    write_synthetic_dataset(Path(pipeline_env["KD_GAT_DATA_ROOT"]) / "synthpaper", n_messages=30_000, seed=1)
    paper = [
        *("-O", "data.features", "paper", "-O", "data.calibration_windows", "0"),
        *("-O", "evaluation.scoring", "gat", "-O", "training.max_epochs", "1"),
    ]

    def run(*args: str) -> int:
        return kdgat(run_root, *args, *paper, dataset="synthpaper")

    assert run("preprocess", "--model", "gat", "--scale", "small") == 0
    assert run("autoencoder", "--model", "vgae", "--scale", "small") == 0
    assert run("curriculum", "--model", "gat", "--scale", "large") == 0
    assert run("evaluation", "--model", "gat", "--scale", "large") == 0
    ev = metrics(run_root, "gat_large_evaluation", dataset="synthpaper")
    assert ev["status"] == "complete" and ev["scoring"]["mode"] == "gat"
    assert "features" not in ev["graph_cache"]["params"]  # the digest caches had before the option
    meta = json.loads((Path(pipeline_env["KD_GAT_CACHE_ROOT"]) / "synthpaper" / "meta.json").read_text())
    assert meta["feature_names"]["node"][0] == "can_id_index"


def test_missing_input_names_the_stage_to_run_first(
    run_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert kdgat(run_root, "curriculum", "--model", "gat", "--scale", "large") == 2
    err = capsys.readouterr().err
    assert "curriculum needs the vgae model of stage `autoencoder`" in err
    assert "python -m kdgat autoencoder --model vgae" in err


def test_unknown_override_is_a_user_error(run_root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert kdgat(run_root, *AUTOENCODER, "-O", "training.epochs", "2") == 2
    assert "did you mean 'training.max_epochs'" in capsys.readouterr().err


def test_profiler_writes_a_trace_and_a_table(run_root: Path) -> None:
    args = [
        "-O",
        "training.max_epochs",
        "1",
        "-O",
        "training.profile",
        "true",
        "-O",
        "training.profile_steps",
        "2",
        "-O",
        "training.batch_size",
        "16",
    ]
    assert kdgat(run_root, *AUTOENCODER, *args) == 0
    traces = run_root / DATASET / "vgae_small_autoencoder" / "profiler_traces"
    assert list(traces.glob("trace_step*.json"))
    assert "Name" in (traces / "top_ops.txt").read_text()


def test_trial_batch_size_is_recorded(run_root: Path) -> None:
    args = [
        "-O",
        "training.max_epochs",
        "1",
        "-O",
        "training.memory_estimation",
        "trial",
        "-O",
        "training.memory_budget_mb",
        "64",
    ]
    assert kdgat(run_root, *AUTOENCODER, *args) == 0
    m = metrics(run_root, "vgae_small_autoencoder")
    assert m["batch_size_mode"] == "trial" and m["batch_size"] == int(m["batch_size_trial"]["max_fit"] * 0.85)


def test_requeue_signal_checkpoints_acknowledges_and_resumes(
    run_root: Path, pipeline_env: dict[str, str]
) -> None:
    overrides = ("-O", "training.max_epochs", "400", "-O", "training.batch_size", "8")
    cmd = [sys.executable, "-m", "kdgat", *cli_args(run_root, *AUTOENCODER, *overrides)]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env={**os.environ, **pipeline_env})
    assert proc.stderr is not None
    deadline = time.time() + 120
    for line in proc.stderr:
        if "requeue handshake armed" in line or time.time() > deadline:
            break
    time.sleep(1.0)
    proc.send_signal(signal.SIGUSR1)
    proc.stderr.read()
    assert proc.wait(timeout=120) == CONTRACT.requeue.exit_status == 75
    run_dir = run_root / DATASET / "vgae_small_autoencoder"
    ack = json.loads((run_dir / "requeue_ack.json").read_text())
    assert tuple(ack) == CONTRACT.requeue.ack_fields.stage
    assert Path(ack["checkpoint"]).exists() and ack["checkpoint"].endswith("last.ckpt")
    assert not (run_dir / "metrics.json").exists()
    first_epoch = ack["epoch"]
    # The requeued job: same run dir, resumes from last.ckpt and completes the configured epochs.
    total = first_epoch + 2
    assert kdgat(run_root, *AUTOENCODER, "-O", "training.max_epochs", str(total)) == 0
    assert metrics(run_root, "vgae_small_autoencoder")["epochs"] == total
