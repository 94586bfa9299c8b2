"""The per-epoch history a training run leaves (history.csv) and the run report drawn from it."""

import csv
import json
from pathlib import Path

from kdgat.report.run_report import _read_history, point_metric, write_run_report

from helpers import AUTOENCODER, DATASET, kdgat, metrics


def test_training_appends_one_history_row_per_epoch_and_resume_continues_it(run_root: Path) -> None:
    # (Also the stages' resume test: a second run of the same stage continues the epoch count.)
    assert kdgat(run_root, *AUTOENCODER, "-O", "training.max_epochs", "2") == 0
    assert metrics(run_root, "vgae_small_autoencoder")["epochs"] == 2
    assert kdgat(run_root, *AUTOENCODER, "-O", "training.max_epochs", "3") == 0
    assert metrics(run_root, "vgae_small_autoencoder")["epochs"] == 3
    with (run_root / DATASET / "vgae_small_autoencoder" / "history.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [r["epoch"] for r in rows] == ["0", "1", "2"]
    for r in rows:
        assert float(r["train_loss"]) > 0 and float(r["val_loss"]) > 0
        assert float(r["graphs_per_sec"]) > 0 and 0 <= float(r["data_wait_fraction"]) <= 1
        assert float(r["rss_tree_mb"]) > 50  # a Python process with torch is far above this
        assert r["gpu_mem_mb"] == ""  # CPU run


def _task(tmp: Path, index: int, lr: float, f1: float | None, val_acc: list[float]) -> dict:
    d = tmp / f"point_{index}"
    d.mkdir()
    with (d / "history.csv").open("w") as f:
        f.write(
            "epoch,time,train_loss,val_loss,val_acc,graphs_per_sec,data_wait_fraction,rss_tree_mb,gpu_mem_mb\n"
        )
        for e, acc in enumerate(val_acc):
            f.write(f"{e},{1000 + e},{1 / (e + 1)},{1.1 / (e + 1)},{acc},900,0.3,512,\n")
    (d / "gpu_samples.csv").write_text(
        "timestamp, utilization.gpu [%], utilization.memory [%], memory.used [MiB], memory.total [MiB]\n"
        "2026/11/23 10:00:00.000, 5 %, 1 %, 100 MiB, 16384 MiB\n"
        "2026/11/23 10:00:10.000, 85 %, 1 %, 900 MiB, 16384 MiB\n"
    )
    usage = {"peakRssMB": 512.0, "elapsedSeconds": 60, "final": {"state": "COMPLETED"}, "attempts": [{}]}
    return {
        "job": "ae",
        "index": index,
        "point": {"training.lr": lr},
        "dir": str(d),
        "history": str(d / "history.csv"),
        "gpuSamples": str(d / "gpu_samples.csv"),
        "metrics": {"scores": {"f1": f1}} if f1 is not None else None,
        "usage": usage,
    }


def _input(tmp: Path, tasks: list[dict]) -> dict:
    return {
        "manifest": {
            "experiment": "unit <sweep>",
            "runDir": str(tmp),
            "specHash": "abc",
            "jobs": [{"key": "ae", "jobId": "7"}],
        },
        "stages": [
            {
                "id": "ae",
                "stage": "autoencoder",
                "model": "vgae",
                "scale": "small",
                "dataset": "synth",
                "environment": {"name": "gnn-cpu", "lockHash": "f00d" * 16},
                "request": {"cpus": 2, "memGB": 4, "gpus": 1, "time": "0:30:00", "partition": "gpu"},
                "thresholds": {"dataWaitHigh": 0.2},
                "verdicts": [
                    {"code": "DATA_WAIT", "evidence": "ae: steps wait 30%", "fix": "more <workers>"}
                ],
                "sizing": {"memGB": {"value": 1, "current": 4, "basis": "x"}},
                "tasks": tasks,
            }
        ],
        "study": None,
    }


def test_a_sweep_report_has_every_plot_the_best_point_and_escapes_text(tmp_path: Path) -> None:
    tasks = [
        _task(tmp_path, 0, 0.1, 0.80, [0.7, 0.8]),
        _task(tmp_path, 1, 0.01, 0.89, [0.7, 0.9]),
        _task(tmp_path, 2, 0.5, 0.5, [0.6]),
    ]
    out = tmp_path / "report"
    result = write_run_report(_input(tmp_path, tasks), out)
    assert result["best"]["ae"] == {"index": 1, "point": {"training.lr": 0.01}, "metric": "f1", "value": 0.89}
    for name in ("ae-curves.png", "ae-throughput.png", "ae-gpu.png", "ae-memory.png", "ae-sweep.png"):
        assert (out / name).stat().st_size > 1000, name
    html = (out / "report.html").read_text()
    assert "unit &lt;sweep&gt;" in html and "more &lt;workers&gt;" in html
    assert "best point</b>: #1" in html
    # the stage says which environment and lock it ran with
    assert "environment gnn-cpu (lock f00df00df00d)" in html
    assert "http" not in html  # nothing fetched from the network
    json.dumps(result)


def test_point_metric_prefers_f1_then_best_val_acc_then_lowest_val_loss(tmp_path: Path) -> None:
    t = _task(tmp_path, 0, 0.1, None, [0.6, 0.75, 0.7])
    assert point_metric(t) == ("val_acc", 0.75, True)
    t["metrics"] = {"scores": {"f1": 0.9}}
    assert point_metric(t) == ("f1", 0.9, True)
    assert point_metric({"history": None, "metrics": None}) is None


def test_the_report_shows_the_runs_rows_in_the_catalogue(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    from kdgat.catalogue import SCHEMA, write_row

    catalogue = tmp_path / "catalogue"
    blank = dict.fromkeys(SCHEMA.names)
    when = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
    for i, (run_id, f1) in enumerate((("r1", 0.91), ("r1", 0.87), ("r2", 0.99))):
        row = {**blank, "experiment": "exp", "run_id": run_id, "stage_id": "ae", "point_index": i}
        write_row(catalogue, {**row, "state": "COMPLETED", "f1": f1, "finished_at": when, "row_key": f"k{i}"})
    data = {**_input(tmp_path, []), "catalogue": {"dir": str(catalogue), "experiment": "exp", "runId": "r1"}}
    result = write_run_report(data, tmp_path / "report")
    assert result["catalogue"] == {"dir": str(catalogue), "rows": 2}
    html = (tmp_path / "report" / "report.html").read_text()
    assert "<h2>In the catalogue</h2>" in html and f"<code>{catalogue}</code>" in html
    assert "runner runs --where run_id=r1" in html
    assert "<td>0.91</td>" in html and "<td>0.87</td>" in html and "0.99" not in html
    assert "<td>2026-11-25 12:00:00</td>" in html


def test_a_lightning_csv_history_is_one_row_per_epoch(tmp_path: Path) -> None:
    """A declared pipeline's history (Lightning's CSVLogger): the training and validation values of an
    epoch are on rows of their own; the report's curves and a sweep point's metric read them merged."""
    path = tmp_path / "metrics.csv"
    path.write_text(
        "epoch,step,train_loss,val_acc,val_loss\n"
        "0,62,,0.91,0.30\n"
        "0,62,0.45,,\n"
        "1,125,,0.94,0.21\n"
        "1,125,0.25,,\n"
    )
    task = {"history": str(path), "metrics": {"val_loss": 0.21}}
    assert _read_history(str(path)) == [
        {"epoch": 0.0, "step": 62.0, "train_loss": 0.45, "val_acc": 0.91, "val_loss": 0.30},
        {"epoch": 1.0, "step": 125.0, "train_loss": 0.25, "val_acc": 0.94, "val_loss": 0.21},
    ]
    assert point_metric(task) == ("val_acc", 0.94, True)
