"""Tracking with the real things: a real ``mlflow server`` (from the venv, a SQLite store and an
artifacts folder in a temporary directory, on a free loopback port, always stopped), W&B offline
files read back with W&B's own reader (``wandb leet inspect --json``), TensorBoard event files read
back with TensorBoard's ``EventAccumulator``.

A stage interrupted by the requeue signal halfway and resumed is one MLflow run, one W&B run and
one TensorBoard run, with continuous epochs and no step logged twice; a 2-point sweep whose tasks
start together is one parent with two children; a study's trials are children with their states.
Only loopback traffic; every wait is bounded."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kdgat.contract import CONTRACT

from helpers import AUTOENCODER, DATASET, FAST

STAGE = Path(DATASET) / "vgae_small_autoencoder"
MANIFEST = {
    "experiment": "tracking-e2e",
    "git": {"commit": "0123456789abcdef0123456789abcdef01234567", "dirty": False},
    "code": {"tree": "feedface", "commit": "0123456789abcdef0123456789abcdef01234567"},
    "resolved": {"specHash": "5bec5bec"},
    "environment": {"name": "cpu-local", "lockHash": "10c410c4"},
}
# Bounded client retries: a broken server fails the test in seconds, not minutes.
CLIENT_ENV = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2", "MLFLOW_HTTP_REQUEST_TIMEOUT": "30"}


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def mlflow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``python -m mlflow server`` on 127.0.0.1, its store on local disk; stopped (its whole process
    group) at the end."""
    root = tmp_path_factory.mktemp("mlflow")
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [
        sys.executable,
        "-m",
        "mlflow",
        "server",
        *("--backend-store-uri", f"sqlite:///{root}/mlflow.db"),
        *("--artifacts-destination", str(root / "artifacts")),
        *("--host", "127.0.0.1", "--port", str(port), "--workers", "1"),
    ]
    log = root / "server.log"
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, f"mlflow server exited:\n{log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, (
                f"mlflow server not ready in 120 s:\n{log.read_text()[-3000:]}"
            )
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                time.sleep(0.5)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


@pytest.fixture
def client(mlflow_server: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    from mlflow import MlflowClient

    for k, v in CLIENT_ENV.items():
        monkeypatch.setenv(k, v)
    return MlflowClient(tracking_uri=mlflow_server)


def _env(pipeline_env: dict[str, str], **extra: str) -> dict[str, str]:
    env = {**os.environ, **pipeline_env, **CLIENT_ENV, "OMP_NUM_THREADS": "1", **extra}
    for var in ("SLURM_JOB_ID", "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID", "MLFLOW_TRACKING_URI"):
        if var not in extra:
            env.pop(var, None)
    return env


def _tail(path: Path) -> str:
    return path.read_text(errors="replace")[-4000:] if path.exists() else "(no log)"


def _history_rows(run_dir: Path) -> int:
    path = run_dir / "history.csv"
    return max(0, len(path.read_text().splitlines()) - 1) if path.exists() else 0


@pytest.fixture(scope="module")
def requeued_run(
    mlflow_server: str, pipeline_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """One stage, TensorBoard + MLflow + W&B, interrupted by the requeue signal after two epochs and
    resumed in a second process for two more epochs (the requeued job's second life)."""
    run = tmp_path_factory.mktemp("requeued") / "tracking-e2e" / "20261125T000000Z-5bec5bec"
    (run / "outputs").mkdir(parents=True)
    (run / "manifest.json").write_text(json.dumps({**MANIFEST, "runDir": str(run)}))
    run_dir = run / "outputs" / STAGE
    tracking = [
        *("-O", "tracking.mlflow.uri", mlflow_server),
        *("-O", "tracking.wandb.enabled", "true", "-O", "tracking.log_every_n_steps", "5"),
    ]

    def command(epochs: int) -> list[str]:
        return [
            *(sys.executable, "-m", "kdgat", *AUTOENCODER, "--dataset", DATASET),
            *("--run-root", str(run / "outputs"), *FAST, *tracking),
            *("-O", "training.max_epochs", str(epochs), "-O", "training.batch_size", "8"),
        ]

    slurm = {"SLURM_JOB_ID": "5001", "SLURM_JOB_NODELIST": "c01", "KD_GAT_REQUEUE_SIGNAL": "USR1"}
    first = run / "life0.log"
    with first.open("wb") as out:
        proc = subprocess.Popen(
            command(400),
            env=_env(pipeline_env, **slurm, SLURM_RESTART_COUNT="0"),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 240
        while _history_rows(run_dir) < 2:
            assert proc.poll() is None, f"the stage exited early:\n{_tail(first)}"
            assert time.monotonic() < deadline, f"no two epochs in 240 s:\n{_tail(first)}"
            time.sleep(0.1)
        proc.send_signal(signal.SIGUSR1)
        assert proc.wait(timeout=120) == CONTRACT.requeue.exit_status, _tail(first)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    ack = json.loads((run_dir / "requeue_ack.json").read_text())
    total = ack["epoch"] + 2
    second = run / "life1.log"
    with second.open("wb") as out:
        again = subprocess.run(
            command(total),
            env=_env(pipeline_env, **slurm, SLURM_RESTART_COUNT="1"),
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=300,
        )
    assert again.returncode == 0, _tail(second)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["epochs"] == total
    return {"run": run, "run_dir": run_dir, "ack": ack, "total": total, "metrics": metrics}


def test_a_requeued_stage_is_one_mlflow_run_with_continuous_epochs_and_no_step_twice(
    requeued_run: dict[str, Any], client: Any
) -> None:
    run_dir, total = requeued_run["run_dir"], requeued_run["total"]
    experiment = client.get_experiment_by_name("tracking-e2e")  # the manifest's experiment
    assert experiment is not None
    (run,) = client.search_runs([experiment.experiment_id])
    kept = json.loads((run_dir / "checkpoints" / "tracking.json").read_text())
    assert kept["mlflow_run_id"] == run.info.run_id and kept["lives"] == 2
    assert run.info.status == "FINISHED"
    tags = run.data.tags
    assert (tags["kdgat.stage"], tags["kdgat.dataset"], tags["kdgat.model"]) == (
        "autoencoder",
        "synth",
        "vgae",
    )
    assert (tags["slurm.job_id"], tags["slurm.nodelist"], tags["slurm.restart_count"]) == ("5001", "c01", "1")
    assert tags["git.commit"] == MANIFEST["git"]["commit"] == tags["mlflow.source.git.commit"]
    assert (tags["kdgat.spec_hash"], tags["kdgat.environment_lock_hash"]) == ("5bec5bec", "10c410c4")
    assert tags["kdgat.code_snapshot"] == "feedface"
    assert tags["kdgat.run_dir"] == str(run_dir.resolve())
    # The second life ran with another max_epochs: the first value stays, the change is said.
    assert run.data.params["training.max_epochs"] == "400"
    assert "training.max_epochs" in tags["kdgat.config_changed_on_resume"]
    assert run.data.params["training.batch_size"] == "8"

    epochs = client.get_metric_history(run.info.run_id, "epoch/val_loss")
    assert sorted(m.step for m in epochs) == list(range(total)), "epochs continuous, each once"
    for key in ("train_loss", "lr", "graphs_per_sec", "data_wait_fraction", "cpu_mem_pct", "cpu_mem_mb"):
        assert len(client.get_metric_history(run.info.run_id, f"epoch/{key}")) == total, key
    sizes = client.get_metric_history(run.info.run_id, "epoch/batch_size")
    assert {m.value for m in sizes} == {8.0}
    steps = [m.step for m in client.get_metric_history(run.info.run_id, "step/train_loss")]
    assert len(steps) == len(set(steps)) > 0, "no step logged twice"
    assert all(s % 5 == 0 for s in steps)
    assert max(steps) > requeued_run["ack"]["global_step"], "the second life logged its steps"
    assert not any(k.startswith("epoch/gpu_mem") for k in run.data.metrics)  # CPU only here
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"metrics.json", "history.csv"} <= artifacts


def _wandb_records(path: Path) -> list[dict[str, Any]]:
    """W&B's own reader of a ``.wandb`` transaction log: ``wandb leet inspect --json``."""
    out = subprocess.run(
        [sys.executable, "-m", "wandb", "leet", "inspect", str(path), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        check=True,
    )
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def test_the_w_and_b_offline_files_of_the_requeued_stage_form_one_run(
    requeued_run: dict[str, Any], pipeline_env: dict[str, str]
) -> None:
    run_dir, total = requeued_run["run_dir"], requeued_run["total"]
    lives = sorted((run_dir / "wandb").glob("offline-run-*"))
    assert len(lives) == 2, lives  # one directory per life of the job
    kept = json.loads((run_dir / "checkpoints" / "tracking.json").read_text())
    ids, steps, epochs, resumed = set(), [], [], []
    for life in lives:
        (log_file,) = life.glob("run-*.wandb")
        records = _wandb_records(log_file)
        (run,) = [r["run"] for r in records if r["type"] == "run"]
        ids.add(run["run_id"])
        resumed.append(bool(run.get("resume")))
        assert run["project"] == "kdgat" and run["job_type"] == "autoencoder"
        assert run["run_group"] == "tracking-e2e"
        for r in records:
            if r["type"] == "history":
                item = r["history"]["item"]
                steps.append(int(item["_step"]))
                if "epoch/val_loss" in item:
                    epochs.append(int(item["epoch"]))
    assert ids == {kept["wandb_id"]}, "the same run id in every life"
    assert resumed == [True, True]
    assert steps == sorted(set(steps)), "W&B's steps (the optimizer's) rise across lives, none twice"
    assert epochs == list(range(total))
    # The upload command finds both lives (W&B's dry run uploads nothing).
    out = subprocess.run(
        [sys.executable, "-m", "kdgat", "tracking-sync", "--run-dir", str(requeued_run["run"]), "--dry-run"],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(pipeline_env),
        stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 0, out.stderr
    assert "2 offline run directories" in out.stdout
    assert all(life.name in out.stdout + out.stderr for life in lives), out.stdout + out.stderr


def test_the_tensorboard_events_of_the_requeued_stage_are_one_run_per_epoch(
    requeued_run: dict[str, Any],
) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import plugin_data_pb2

    run_dir, total = requeued_run["run_dir"], requeued_run["total"]
    tb = run_dir / "tensorboard"
    assert len(list(tb.glob("events.out.tfevents.*"))) == 2  # one file per life, one directory
    acc = EventAccumulator(str(tb), size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    scalars = set(acc.Tags()["scalars"])
    for key in (
        "val_loss",
        "train_loss",
        "lr",
        "graphs_per_sec",
        "data_wait_fraction",
        "cpu_mem_%",
        "cpu_mem_mb",
        "batch_size",
    ):
        events = acc.Scalars(f"epoch/{key}")
        assert [e.step for e in events] == list(range(total)), key
    assert not any(t.startswith("epoch/gpu_mem") for t in scalars)  # no CUDA here
    steps = [e.step for e in acc.Scalars("step/train_loss")]
    assert steps == sorted(set(steps)), "no step twice after the resume"
    # The resolved config as hyperparameters (the HParams dashboard's session start).
    content = acc.SummaryMetadata("_hparams_/session_start_info").plugin_data.content
    hparams = plugin_data_pb2.HParamsPluginData.FromString(content).session_start_info.hparams
    assert hparams["training.batch_size"].number_value == 8
    assert hparams["tag.kdgat.stage"].string_value == "autoencoder"


class _FaultyFront:
    """A loopback HTTP front of the real server that answers two requests with the error a store
    that could not take them gives (400 BAD_REQUEST, not one MLflow's client retries): the stage's
    first request, and its second batch of metrics. Every other request goes to the server."""

    def __init__(self, upstream: str) -> None:
        import http.server
        import threading

        front = self
        self.refused: list[str] = []
        self.metric_batches = 0

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _forward(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                first = not front.refused and front.metric_batches == 0
                if b'"metrics"' in body and self.path.endswith("/runs/log-batch"):
                    front.metric_batches += 1
                if first or (front.metric_batches == 2 and len(front.refused) == 1):
                    front.refused.append(self.path)
                    self._answer(400, b'{"error_code": "BAD_REQUEST", "message": "injected: store busy"}')
                    return
                req = urllib.request.Request(upstream + self.path, data=body or None, method=self.command)
                req.add_header("Content-Type", self.headers.get("Content-Type") or "application/json")
                try:
                    with urllib.request.urlopen(req, timeout=30) as r:
                        self._answer(r.status, r.read())
                except urllib.error.HTTPError as e:
                    self._answer(e.code, e.read())

            def _answer(self, code: int, body: bytes) -> None:
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _forward

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=30)


def test_a_server_that_refuses_the_first_request_and_a_batch_still_gets_every_epoch_once(
    mlflow_server: str, client: Any, pipeline_env: dict[str, str], tmp_path: Path
) -> None:
    """The stage's MLflow run could not be opened at its start, and later one batch of epoch
    metrics was refused: both are tried again at the next epoch's end with what they missed."""
    front = _FaultyFront(mlflow_server)
    run_dir = tmp_path / "outputs" / STAGE
    log = tmp_path / "stage.log"
    try:
        with log.open("wb") as out:
            done = subprocess.run(
                [
                    *(sys.executable, "-m", "kdgat", *AUTOENCODER, "--dataset", DATASET),
                    *("--run-root", str(tmp_path / "outputs"), *FAST, "-O", "tracking.mlflow.uri", front.url),
                    *("-O", "tracking.mlflow.experiment", "refused-then-taken"),
                    *("-O", "training.max_epochs", "3", "-O", "training.batch_size", "8"),
                ],
                env=_env(pipeline_env),
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=300,
            )
    finally:
        front.close()
    said = _tail(log)
    assert done.returncode == 0, said
    assert len(front.refused) == 2, (front.refused, said)
    assert "mlflow failed to open (RestException: BAD_REQUEST: injected: store busy)" in said
    assert "mlflow open on a second try" in said
    assert "mlflow failed on log_epoch (RestException: BAD_REQUEST: injected: store busy)" in said
    assert "training goes on without it" not in said and "not sent" not in said
    experiment = client.get_experiment_by_name("refused-then-taken")
    (run,) = client.search_runs([experiment.experiment_id])
    assert run.info.status == "FINISHED"
    epochs = client.get_metric_history(run.info.run_id, "epoch/val_loss")
    assert sorted(m.step for m in epochs) == [0, 1, 2], "every epoch, each once"
    assert {"metrics.json", "history.csv"} <= {a.path for a in client.list_artifacts(run.info.run_id)}
    steps = [m.step for m in client.get_metric_history(run.info.run_id, "step/train_loss")]
    # Every 10th optimizer step (tracking.log_every_n_steps), from the first epoch's, none twice.
    assert sorted(steps) == list(range(10, max(steps) + 1, 10)), steps
    assert (
        json.loads((run_dir / "checkpoints" / "tracking.json").read_text())["mlflow_run_id"]
        == run.info.run_id
    )


def test_a_sweeps_points_started_together_are_children_of_one_parent(
    mlflow_server: str, client: Any, pipeline_env: dict[str, str], tmp_path: Path
) -> None:
    run = tmp_path / "sweep-exp" / "20261125T000000Z-0badcafe"
    (run / "outputs").mkdir(parents=True)
    (run / "manifest.json").write_text(json.dumps({"experiment": "sweep-exp", "runDir": str(run)}))
    procs = []
    for i in (0, 1):
        cmd = [
            *(sys.executable, "-m", "kdgat", *AUTOENCODER, "--dataset", DATASET),
            *("--run-root", str(run / "outputs" / f"point_{i}"), *FAST),
            *("-O", "tracking.mlflow.uri", mlflow_server, "-O", "training.max_epochs", "1"),
            *("-O", "training.lr", str([0.001, 0.003][i])),
        ]
        env = _env(
            pipeline_env, SLURM_ARRAY_JOB_ID="600", SLURM_ARRAY_TASK_ID=str(i), SLURM_JOB_ID=str(601 + i)
        )
        log = tmp_path / f"point_{i}.log"
        with log.open("wb") as out:
            procs.append((subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT), log))
    for proc, log in procs:
        try:
            assert proc.wait(timeout=300) == 0, _tail(log)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    experiment = client.get_experiment_by_name("sweep-exp")
    runs = client.search_runs([experiment.experiment_id])
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert len(parents) == 1 and len(runs) == 3, [r.info.run_name for r in runs]
    (parent,) = parents
    assert parent.info.run_name == "sweep-exp" and parent.data.tags["kdgat.kind"] == "sweep"
    children = client.search_runs(
        [experiment.experiment_id], filter_string=f"tags.mlflow.parentRunId = '{parent.info.run_id}'"
    )
    points = sorted(
        (c.data.tags["kdgat.sweep_point"], c.data.tags["slurm.array_task_id"], c.data.params["training.lr"])
        for c in children
    )
    assert points == [("0", "0", "0.001"), ("1", "1", "0.003")]
    assert all(c.info.status == "FINISHED" for c in children)
    kept = json.loads((run / "outputs" / "tracking-parent.json").read_text())
    assert list(kept.values()) == [parent.info.run_id]


def test_a_studys_trials_are_children_with_their_optuna_number_and_state(
    mlflow_server: str,
    client: Any,
    pipeline_env: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import optuna
    import torch

    from kdgat.tune.study import open_study, read_config
    from kdgat.tune.worker import Worker, WorkerId

    study_dir = tmp_path / "study"
    study_dir.mkdir()
    doc = {
        "study": "tracked-study",
        "experiment": "tune-exp",
        "stage": "autoencoder",
        "model": "vgae",
        "scale": "small",
        "dataset": DATASET,
        "overrides": {
            "data.num_workers": 0,
            "training.patience": 0,
            "training.max_epochs": 3,
            "tracking.mlflow.uri": mlflow_server,
            "tracking.mlflow.experiment": "tune-exp",
        },
        "space": {"training.lr": {"type": "categorical", "choices": [0.003, 1e-9]}},
        "objective": {"metric": "val_loss", "direction": "minimize"},
        "nTrials": 2,
        # After one finished trial, a trial worse than it at an epoch is pruned.
        "pruner": {"type": "median", "startupTrials": 1, "warmupSteps": 0},
        "sampler": {"type": "random", "seed": 0},
        "heartbeatSeconds": 5,
    }
    (study_dir / "study.json").write_text(json.dumps(doc))
    cfg = read_config(study_dir)
    study = open_study(study_dir, cfg)
    # The same start weights (one seed): 1e-9 learns nothing, so the second trial is pruned at epoch 1.
    study.enqueue_trial({"training.lr": 0.003})
    study.enqueue_trial({"training.lr": 1e-9})
    for k, v in CLIENT_ENV.items():
        monkeypatch.setenv(k, v)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    threads, handler = torch.get_num_threads(), signal.getsignal(signal.SIGUSR1)
    torch.set_num_threads(1)
    try:
        me = WorkerId(key="700_0", life="node1:1:0", index=0)
        assert Worker(study_dir, tmp_path / "worker", me).run() == 0
    finally:
        torch.set_num_threads(threads)
        signal.signal(signal.SIGUSR1, handler)
    states = {t.number: t.state.name for t in open_study(study_dir, cfg).get_trials()}
    assert states == {0: "COMPLETE", 1: "PRUNED"}

    experiment = client.get_experiment_by_name("tune-exp")
    runs = client.search_runs([experiment.experiment_id])
    (parent,) = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert parent.info.run_name == "tracked-study" and parent.data.tags["kdgat.kind"] == "study"
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    seen = {
        int(c.data.tags["optuna.trial.number"]): (c.data.tags["optuna.trial.state"], c.info.status)
        for c in children
    }
    assert seen == {0: ("COMPLETE", "FINISHED"), 1: ("PRUNED", "FINISHED")}
    pruned = next(c for c in children if c.data.tags["optuna.trial.state"] == "PRUNED")
    assert pruned.data.tags["optuna.trial.pruned_at_epoch"] == "1"
    assert pruned.data.params["training.lr"] == "1e-09"
    assert len(client.get_metric_history(pruned.info.run_id, "epoch/val_loss")) == 1
