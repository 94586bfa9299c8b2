"""The catalogue of all runs (:mod:`kdgat.catalogue`): the row a stage leaves (from its run dir, its
metrics.json and the runner's manifest above it), the folder of one-row Parquet files read as one
table by pyarrow, pandas and its own reader, appends from many processes at once, the ``--where``
language, and ``python -m kdgat runs``."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from kdgat import cli
from kdgat.catalogue import (
    COLUMNS,
    NotAStage,
    compact,
    locate,
    read_rows,
    record_stage,
    stage_row,
    write_row,
)
from kdgat.catalogue.query import (
    QueryError,
    format_table,
    format_table_of,
    parse_columns,
    parse_sort,
    parse_where,
    select,
    select_table,
)
from kdgat.catalogue.schema import SCHEMA
from kdgat.catalogue.store import FAN_IN, LOCK_FILE, PART_PREFIX, read_table, size_class
from kdgat.contract import CATALOGUE_DIR, CONTRACT
from kdgat.training.requeue import RequeueRequested

EXPERIMENT = "gat-sweep"
RUN_ID = "20261125T120000Z-abcdef12"
POINTS: list[dict[str, Any]] = [{"training.lr": lr} for lr in (0.1, 0.01, 0.001)]


def make_run(runs_root: Path, *, site_run_dir: str | None = None) -> Path:
    """A run dir as the runner leaves it: manifest.json with the resolved stages, sweep points, cost
    per stage, git, spec hash and two environments (curriculum runs in its own)."""
    run_dir = runs_root / EXPERIMENT / RUN_ID
    run_dir.mkdir(parents=True)
    manifest = {
        "version": 1,
        "experiment": EXPERIMENT,
        "runDir": site_run_dir or str(run_dir),
        "spec": {"file": "x.yaml", "text": "", "hash": "f" * 64},
        "git": {"commit": "c0ffee" * 6 + "beef", "dirty": False},
        "environment": {"name": "gnn-rapids", "lockHash": "aaa", "specHash": "", "lockPath": ""},
        "otherEnvironments": [{"name": "gnn-cpu", "lockHash": "bbb", "specHash": "", "lockPath": ""}],
        "resolved": {
            "stages": [
                {"id": "ae", "stage": "autoencoder", "model": "vgae", "scale": "small", "dataset": "hcrl_sa"},
                {
                    "id": "cur",
                    "stage": "curriculum",
                    "model": "gat",
                    "scale": "small",
                    "dataset": "hcrl_sa",
                    "environment": "gnn-cpu",
                },
            ],
            "sweepPoints": POINTS,
        },
        "cost": {
            "unit": "SU",
            "stages": {
                "ae": {"tasks": 1, "worstUnits": 2.0, "expectedUnits": 1.0},
                "cur": {"tasks": 3, "worstUnits": 6.0, "expectedUnits": 3.0},
            },
        },
    }
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    return run_dir


def make_stage(run_root: Path, name: str, metrics: dict[str, Any] | None) -> Path:
    stage_dir = run_root / "hcrl_sa" / name
    stage_dir.mkdir(parents=True)
    if metrics is not None:
        (stage_dir / "metrics.json").write_text(json.dumps(metrics))
    return stage_dir


CURRICULUM_METRICS = {
    "stage": "curriculum",
    "model": "gat",
    "scale": "small",
    "dataset": "hcrl_sa",
    "status": "complete",
    "epochs": 7,
    "val_loss": 0.21,
    "scores": {"accuracy": 0.97, "f1": 0.93, "auroc": float("nan"), "mcc": 0.9, "n": 500, "brier": 0.04},
    "scores_by_attack": {"dos": {"f1": 0.99}},
}


def test_a_sweep_points_row_carries_the_manifests_facts_and_the_stages_scores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLURM_ARRAY_JOB_ID", "4242")
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "2")
    monkeypatch.setenv("SLURM_JOB_ID", "4245")
    monkeypatch.setenv(
        "HPC_RECORD_STAGE", "stageId=cur stage=curriculum model=gat scale=small dataset=hcrl_sa"
    )
    run_dir = make_run(tmp_path / "runs", site_run_dir="/fs/scratch/P/kd-gat/runs/gat-sweep/" + RUN_ID)
    stage_dir = make_stage(run_dir / "outputs" / "point_2", "gat_small_curriculum", CURRICULUM_METRICS)

    path = record_stage(stage_dir, "COMPLETED", elapsed_s=12.3456)

    assert path is not None and path.parent == tmp_path / "runs" / CATALOGUE_DIR
    (row,) = read_rows(path.parent)
    assert list(row) == list(COLUMNS)
    assert row["experiment"] == EXPERIMENT and row["run_id"] == RUN_ID
    assert (row["stage_id"], row["stage"], row["model"], row["scale"], row["dataset"]) == (
        "cur",
        "curriculum",
        "gat",
        "small",
        "hcrl_sa",
    )
    assert row["point_index"] == 2 and row["trial"] is None
    assert json.loads(row["point"]) == {"training.lr": 0.001}
    assert row["state"] == "COMPLETED"
    assert (row["f1"], row["accuracy"], row["mcc"], row["val_loss"]) == (0.93, 0.97, 0.9, 0.21)
    assert row["auroc"] is None  # NaN (one class) is absent
    assert row["precision"] is None and row["anomaly_auroc"] is None  # not in metrics.json
    assert json.loads(row["other_scores"]) == {"n": 500, "brier": 0.04, "by_attack": {"dos": {"f1": 0.99}}}
    assert row["epochs"] == 7 and row["elapsed_s"] == 12.346
    assert (row["cost_expected"], row["cost_worst"], row["cost_unit"]) == (1.0, 2.0, "SU")  # per task
    assert row["git_commit"].startswith("c0ffee") and row["git_dirty"] is False
    assert row["spec_hash"] == "f" * 64
    assert (row["environment"], row["environment_lock_hash"]) == ("gnn-cpu", "bbb")  # the stage's own
    assert (row["slurm_job_id"], row["slurm_array_index"]) == ("4242_2", 2)
    # Paths as the site has them, whatever this process resolved.
    assert row["run_dir"] == "/fs/scratch/P/kd-gat/runs/gat-sweep/" + RUN_ID
    assert row["stage_dir"] == row["run_dir"] + "/outputs/point_2/hcrl_sa/gat_small_curriculum"
    assert isinstance(row["finished_at"], datetime) and row["finished_at"].tzinfo is not None
    assert row["recorded_by"] == "pipeline"


def test_where_a_row_goes_for_each_kind_of_run_root(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path / "runs")
    catalogue = tmp_path / "runs" / CATALOGUE_DIR
    single = locate(make_stage(run_dir / "outputs", "vgae_small_autoencoder", None))
    assert (single.run_dir, single.catalogue, single.point_index, single.trial) == (
        run_dir,
        catalogue,
        None,
        None,
    )
    trial = locate(make_stage(run_dir / "study" / "trials" / "trial_5", "vgae_small_autoencoder", None))
    assert (trial.run_dir, trial.catalogue, trial.trial) == (run_dir, catalogue, 5)
    with pytest.raises(NotAStage, match="study worker"):
        locate(make_stage(run_dir / "outputs" / "worker_1", "vgae_small_autoencoder", None))
    # By hand, no manifest: beside the run root (a sweep point's or trial's: its parent's).
    hand = locate(make_stage(tmp_path / "experimentruns" / "point_0", "gat_large_curriculum", None))
    assert (hand.run_dir, hand.catalogue) == (None, tmp_path / "experimentruns" / CATALOGUE_DIR)


def test_a_failed_stage_keeps_no_scores_of_an_earlier_attempt_and_a_trial_has_no_task_cost(
    tmp_path: Path,
) -> None:
    run_dir = make_run(tmp_path / "runs")
    stage_dir = make_stage(run_dir / "outputs" / "point_0", "gat_small_curriculum", CURRICULUM_METRICS)
    _, row = stage_row(stage_dir, "FAILED", recorded_by="epilog")
    assert row["f1"] is None and row["epochs"] is None and row["state"] == "FAILED"
    trial_dir = make_stage(
        run_dir / "study" / "trials" / "trial_3", "gat_small_curriculum", CURRICULUM_METRICS
    )
    _, row = stage_row(trial_dir, "PRUNED", trial=9, point={"training.lr": 0.5}, recorded_by="study")
    assert (row["trial"], row["f1"], row["cost_expected"]) == (9, 0.93, None)
    assert json.loads(row["point"]) == {"training.lr": 0.5}
    with pytest.raises(ValueError, match="expected one of"):
        stage_row(trial_dir, "DONE")


def test_a_stage_that_ends_again_replaces_its_row_and_the_epilog_writes_only_what_is_missing(
    tmp_path: Path,
) -> None:
    run_dir = make_run(tmp_path / "runs")
    catalogue = tmp_path / "runs" / CATALOGUE_DIR
    stage_dir = make_stage(run_dir / "outputs", "vgae_small_autoencoder", None)
    assert record_stage(stage_dir, "FAILED", recorded_by="epilog") is not None
    (stage_dir / "metrics.json").write_text(json.dumps({"scores": {"anomaly_auroc": 0.8}}))
    assert record_stage(stage_dir, "COMPLETED") is not None  # the resubmission succeeded
    assert record_stage(stage_dir, "COMPLETED", unless_recorded=True) is None  # the epilog after it
    (row,) = read_rows(catalogue)
    assert (row["state"], row["anomaly_auroc"], row["recorded_by"]) == ("COMPLETED", 0.8, "pipeline")
    assert record_stage(stage_dir, "TERMINATED", unless_recorded=True) is not None
    assert [r["state"] for r in read_rows(catalogue)] == ["TERMINATED"]


def _append_at_once(args: tuple[str, int, Any]) -> str:
    run_dir, point, barrier = args
    stage_dir = Path(run_dir) / "outputs" / f"point_{point}" / "hcrl_sa" / "gat_small_curriculum"
    barrier.wait()
    path = record_stage(stage_dir, "COMPLETED", elapsed_s=float(point))
    return str(path)


def test_twelve_processes_appending_at_once_leave_twelve_rows_and_readers_never_see_a_partial_file(
    tmp_path: Path,
) -> None:
    run_dir = make_run(tmp_path / "runs")
    for p in range(12):
        make_stage(run_dir / "outputs" / f"point_{p}", "gat_small_curriculum", CURRICULUM_METRICS)
    catalogue = tmp_path / "runs" / CATALOGUE_DIR
    ctx = mp.get_context("fork")
    with ctx.Manager() as manager:
        barrier = manager.Barrier(12)
        reader = subprocess.Popen(  # reads the folder as fast as it can while the writers write
            [sys.executable, "-c", _READER, str(catalogue), str(tmp_path / "reader.json")],
        )
        with ctx.Pool(12) as pool:
            paths = pool.map(_append_at_once, [(str(run_dir), p, barrier) for p in range(12)])
        reader.wait(timeout=60)
    assert reader.returncode == 0
    seen = json.loads((tmp_path / "reader.json").read_text())
    assert seen["reads"] > 0 and seen["errors"] == [] and seen["max"] <= 12
    assert len(set(paths)) == 12
    rows = read_rows(catalogue)
    assert sorted(r["point_index"] for r in rows) == list(range(12))
    assert not [p for p in os.listdir(catalogue) if not p.endswith(".parquet")], "temporary files left"
    # Any Parquet reader takes the folder as one table.
    assert ds.dataset(catalogue, format="parquet").count_rows() == 12
    assert len(pd.read_parquet(catalogue)) == 12


_READER = """
import json, sys, time
from pathlib import Path
from kdgat.catalogue import read_rows
folder, out = Path(sys.argv[1]), sys.argv[2]
reads, errors, most = 0, [], 0
deadline = time.monotonic() + 20
while time.monotonic() < deadline:
    try:
        n = len(read_rows(folder))
    except Exception as e:
        errors.append(f"{type(e).__name__}: {e}")
        n = 0
    reads += 1
    most = max(most, n)
    if n == 12:
        break
Path(out).write_text(json.dumps({"reads": reads, "errors": errors[:5], "max": most}))
"""


def test_compact_merges_the_files_and_a_row_written_after_it_wins(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path / "runs")
    catalogue = tmp_path / "runs" / CATALOGUE_DIR
    dirs = [make_stage(run_dir / "outputs" / f"point_{p}", "gat_small_curriculum", None) for p in range(4)]
    for d in dirs:
        record_stage(d, "FAILED")
    merged, part = compact(catalogue)
    assert merged == 4 and part is not None
    assert [p.name for p in catalogue.glob("*.parquet")] == [part.name]
    assert len(read_rows(catalogue)) == 4
    assert len(pd.read_parquet(catalogue)) == 4  # its lock file (hidden) is no Parquet file to pandas
    record_stage(dirs[1], "COMPLETED")  # its FAILED row is in the merged file
    states = {r["point_index"]: r["state"] for r in read_rows(catalogue)}
    assert states == {0: "FAILED", 1: "COMPLETED", 2: "FAILED", 3: "FAILED"}
    assert record_stage(dirs[2], "FAILED", unless_recorded=True) is None  # found in the merged file


def _sweep_rows(run_dir: Path, n: int, *, compact_at: int | None) -> list[Path]:
    """``n`` sweep points' curriculum rows, written one at a time as their jobs end."""
    catalogue = run_dir.parent.parent / CATALOGUE_DIR
    dirs = [make_stage(run_dir / "outputs" / f"point_{p}", "gat_small_curriculum", None) for p in range(n)]
    for d in dirs:
        _, row = stage_row(d, "FAILED")
        write_row(catalogue, row, compact_at=compact_at)
    return dirs


def test_writers_compact_the_folder_as_rows_accumulate_and_every_row_stays(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path / "runs")
    catalogue = tmp_path / "runs" / CATALOGUE_DIR
    dirs = _sweep_rows(run_dir, 150, compact_at=4)
    names = [p.name for p in catalogue.glob("*.parquet")]
    loose = [n for n in names if not n.startswith(PART_PREFIX)]
    parts = [catalogue / n for n in names if n.startswith(PART_PREFIX)]
    # At most 3 one-row files, and fewer than FAN_IN parts of each size class.
    assert len(loose) < 4 and parts
    classes = [size_class(pq.read_metadata(p).num_rows, loose_limit=4) for p in parts]
    assert all(classes.count(k) < FAN_IN for k in set(classes))
    assert len(names) < 20
    rows = read_rows(catalogue)
    assert sorted(r["point_index"] for r in rows) == list(range(150))
    # Any Parquet reader still takes the folder as one table (each row once: no stage ended twice).
    assert len(pd.read_parquet(catalogue)) == 150
    assert not [p for p in os.listdir(catalogue) if p.startswith(".") and p != LOCK_FILE]
    # A stage that ends again wins over its merged row, and is found there by the epilog.
    _, again = stage_row(dirs[7], "COMPLETED")
    write_row(catalogue, again, compact_at=4)
    assert {r["point_index"]: r["state"] for r in read_rows(catalogue)}[7] == "COMPLETED"
    assert record_stage(dirs[8], "FAILED", unless_recorded=True) is None
    assert len(read_rows(catalogue)) == 150


def test_without_compaction_each_row_is_its_own_file(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path / "runs")
    _sweep_rows(run_dir, 10, compact_at=None)
    assert len(list((tmp_path / "runs" / CATALOGUE_DIR).glob("*.parquet"))) == 10


_HOLD_LOCK = """
import fcntl, sys
with open(sys.argv[1], "a+") as f:
    fcntl.lockf(f, fcntl.LOCK_EX)
    print("held", flush=True)
    sys.stdin.readline()
"""


def test_a_writer_that_finds_the_lock_held_writes_its_row_and_leaves_the_merge_to_a_later_one(
    tmp_path: Path,
) -> None:
    run_dir = make_run(tmp_path / "runs")
    catalogue = tmp_path / "runs" / CATALOGUE_DIR
    catalogue.mkdir(parents=True)
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD_LOCK, str(catalogue / LOCK_FILE)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        _sweep_rows(run_dir, 6, compact_at=4)  # returns: nobody waits for the lock
        assert len(list(catalogue.glob(f"{PART_PREFIX}*"))) == 0
        assert len(list(catalogue.glob("*.parquet"))) == 6
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=60)
    point = make_stage(run_dir / "outputs" / "point_6", "gat_small_curriculum", None)
    _, row = stage_row(point, "FAILED")
    write_row(catalogue, row, compact_at=4)
    assert [p.name.startswith(PART_PREFIX) for p in catalogue.glob("*.parquet")] == [True]
    assert len(read_rows(catalogue)) == 7


def test_a_file_written_before_a_column_existed_reads_it_as_null(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path / "runs")
    catalogue = tmp_path / "runs" / CATALOGUE_DIR
    _, row = stage_row(make_stage(run_dir / "outputs", "vgae_small_autoencoder", None), "COMPLETED")
    path = write_row(catalogue, row)
    old = pq.read_table(path).drop_columns(["mcc", "recorded_by"])
    pq.write_table(old, path)
    (back,) = read_rows(catalogue)
    assert back["mcc"] is None and back["recorded_by"] is None and back["state"] == "COMPLETED"


ROWS: list[dict[str, Any]] = [
    {"experiment": "a", "dataset": "hcrl_sa", "state": "COMPLETED", "f1": 0.91, "elapsed_s": 10.0},
    {"experiment": "sweep-1", "dataset": "hcrl_sa", "state": "FAILED", "f1": None, "elapsed_s": 3.0},
    {"experiment": "sweep-2", "dataset": "hcrl_ch", "state": "COMPLETED", "f1": 0.95, "elapsed_s": 7.0},
    {"experiment": "b", "dataset": "hcrl_sa", "state": "COMPLETED", "f1": 0.85, "elapsed_s": None},
]


@pytest.mark.parametrize(
    ("where", "want"),
    [
        (["dataset=hcrl_sa"], ["a", "sweep-1", "b"]),
        (["f1>0.9"], ["a", "sweep-2"]),
        (["f1>=0.91,dataset=hcrl_sa"], ["a"]),
        (["state=COMPLETED", "f1<0.9"], ["b"]),
        (["state!=COMPLETED"], ["sweep-1"]),
        (["experiment~sweep-*"], ["sweep-1", "sweep-2"]),
        (["f1=null"], ["sweep-1"]),
        (["f1!=null, elapsed_s<=7"], ["sweep-2"]),
        ([], ["a", "sweep-1", "sweep-2", "b"]),
    ],
)
def test_the_where_language(where: list[str], want: list[str]) -> None:
    assert [r["experiment"] for r in select(ROWS, parse_where(where), [])] == want
    # The whole-table query `runs` answers with says the same.
    assert _experiments(select_table(_table(ROWS), parse_where(where), [])) == want


def _table(rows: list[dict[str, Any]]) -> Any:
    return pa.Table.from_pylist(rows, schema=SCHEMA)


def _experiments(table: Any) -> list[str]:
    return list(table.column("experiment").to_pylist())


def test_the_table_query_reads_nan_as_absent_and_compares_times_and_booleans_as_the_rows_do() -> None:
    rows: list[dict[str, Any]] = [
        {**r, "finished_at": datetime(2026, 11, 1 + i, tzinfo=UTC), "git_dirty": i % 2 == 0}
        for i, r in enumerate(ROWS)
    ]
    rows.append({"experiment": "nan", "f1": float("nan"), "finished_at": None, "point_index": 3})
    for where, sort in [
        (["f1=null"], "experiment"),
        (["f1!=null"], "f1:desc"),
        (["f1>0"], ""),
        (["f1!=0.91"], ""),
        (["finished_at>=2026-11-02"], "finished_at:desc"),
        (["finished_at<2026-11-03T00:00"], ""),
        (["git_dirty=true"], ""),
        (["point_index=3"], ""),
        (["experiment~*-?"], "elapsed_s"),
        ([], "f1,experiment:desc"),
        ([], "finished_at"),
    ]:
        w, o = parse_where(where), parse_sort(sort)
        want = [r["experiment"] for r in select(rows, w, o)]
        assert _experiments(select_table(_table(rows), w, o)) == want, (where, sort)


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("f2>1", "no column 'f2'"),
        ("f1>high", "f1 is a number"),
        ("f1 0.9", "expected COLUMN OP VALUE"),
        ("f1>", "no value"),
        ("f1~0.9", "for text columns"),
        ("f1>null", "null goes with = or != only"),
        ("finished_at>yesterday", "expected a date"),
        ("__import__('os')=1", "expected COLUMN OP VALUE"),
    ],
)
def test_the_where_language_refuses_what_it_cannot_answer(where: str, message: str) -> None:
    with pytest.raises(QueryError, match=message):
        parse_where([where])


def test_the_table_prints_the_same_text_column_by_column_as_row_by_row() -> None:
    rows: list[dict[str, Any]] = [
        {
            **r,
            "finished_at": datetime(2026, 11, 1 + i, 12, 30, 15, 999_999, tzinfo=UTC),
            "git_dirty": i % 2 == 0,
            "git_commit": "c0ffee" * 7,
            "point_index": i,
            "cost_expected": [1.5, float("nan"), 123456.0, 0.000123][i],
        }
        for i, r in enumerate(ROWS)
    ]
    rows.append({"experiment": "ünïcode-ëxp", "state": None, "elapsed_s": 1234.56})
    columns = [
        "experiment",
        "point_index",
        "state",
        "f1",
        "elapsed_s",
        "cost_expected",
        "git_commit",
        "git_dirty",
        "finished_at",
    ]
    assert format_table_of(_table(rows), columns) == format_table(rows, columns)


def test_a_read_of_some_columns_reads_those_and_the_keys_and_a_file_without_one_reads_null(
    tmp_path: Path,
) -> None:
    run_dir = make_run(tmp_path / "runs")
    catalogue = tmp_path / "runs" / CATALOGUE_DIR
    _, row = stage_row(make_stage(run_dir / "outputs", "vgae_small_autoencoder", None), "COMPLETED")
    path = write_row(catalogue, row)
    pq.write_table(pq.read_table(path).drop_columns(["mcc"]), path)
    table = read_table(catalogue, columns=["mcc", "state"])
    assert table.column_names == ["state", "mcc", "finished_at", "row_key"]  # the contract's order
    assert table.to_pylist()[0]["mcc"] is None and table.to_pylist()[0]["state"] == "COMPLETED"


def test_sort_puts_nulls_last_either_way_and_columns_are_checked() -> None:
    order = [r["experiment"] for r in select(ROWS, [], parse_sort("f1:desc"))]
    assert order == ["sweep-2", "a", "b", "sweep-1"]
    order = [r["experiment"] for r in select(ROWS, [], parse_sort("f1"))]
    assert order == ["b", "a", "sweep-2", "sweep-1"]
    order = [r["experiment"] for r in select(ROWS, [], parse_sort("dataset,elapsed_s:desc"))]
    assert order == ["sweep-2", "a", "sweep-1", "b"]
    for sort, want in [
        ("f1:desc", ["sweep-2", "a", "b", "sweep-1"]),
        ("f1", ["b", "a", "sweep-2", "sweep-1"]),
        ("dataset,elapsed_s:desc", ["sweep-2", "a", "sweep-1", "b"]),
    ]:
        assert _experiments(select_table(_table(ROWS), [], parse_sort(sort))) == want
    with pytest.raises(QueryError, match="asc or desc"):
        parse_sort("f1:down")
    with pytest.raises(QueryError, match="no column 'score'"):
        parse_columns("experiment,score")
    assert parse_columns("all") == list(COLUMNS)


def test_python_m_kdgat_runs_prints_the_leaderboard_and_json(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path / "runs")
    for p, f1 in enumerate((0.5, 0.9, 0.7)):
        d = make_stage(run_dir / "outputs" / f"point_{p}", "gat_small_curriculum", {**CURRICULUM_METRICS})
        metrics = {**CURRICULUM_METRICS, "scores": {"f1": f1}}
        (d / "metrics.json").write_text(json.dumps(metrics))
        record_stage(d, "COMPLETED", elapsed_s=1.0 + p)

    def kdgat(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "kdgat", *args], capture_output=True, text=True, check=False, timeout=60
        )

    t0 = time.monotonic()
    r = kdgat("runs", "--runs-root", str(tmp_path / "runs"), "--sort", "f1:desc", "--where", "f1>0.6")
    seconds = time.monotonic() - t0
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == f"catalogue {tmp_path / 'runs' / CATALOGUE_DIR}: 2 row(s) matching f1>0.6"
    assert lines[1].split()[:4] == ["experiment", "run_id", "stage_id", "point_index"]
    assert [ln.split()[3] for ln in lines[2:]] == ["1", "2"]  # by F1, best first
    assert "torch" not in r.stderr and seconds < 30  # answered without importing the pipeline
    r = kdgat(
        "runs", "--runs-root", str(tmp_path / "runs"), "--json", "--columns", "point_index,f1,finished_at"
    )
    rows = json.loads(r.stdout)
    assert [sorted(x) for x in rows] == [["f1", "finished_at", "point_index"]] * 3
    assert all(x["finished_at"].endswith("Z") for x in rows)
    r = kdgat("runs", "--runs-root", str(tmp_path / "runs"), "--where", "f1>>1")
    assert r.returncode == 2 and "f1 is a number" in r.stderr
    # The epilog's call: the row is there already, in the same state.
    stage = run_dir / "outputs" / "point_0" / "hcrl_sa" / "gat_small_curriculum"
    r = kdgat("catalogue-append", "--stage-dir", str(stage), "--state", "COMPLETED", "--unless-recorded")
    assert r.returncode == 0 and "already recorded" in r.stdout


def test_the_stage_command_records_completed_failed_and_nothing_on_a_requeue(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir = make_run(tmp_path / "runs")
    run_root = run_dir / "outputs"
    catalogue = tmp_path / "runs" / CATALOGUE_DIR
    args = [
        "autoencoder",
        "--model",
        "vgae",
        "--scale",
        "small",
        "--dataset",
        "hcrl_sa",
        "--run-root",
        str(run_root),
    ]

    def completes(*a: object, **k: object) -> dict[str, object]:
        d = run_root / "hcrl_sa" / "vgae_small_autoencoder"
        d.mkdir(parents=True, exist_ok=True)
        (d / "metrics.json").write_text(
            json.dumps({"stage": "autoencoder", "scores": {"anomaly_auroc": 0.7}})
        )
        return {"anomaly_auroc": 0.7}

    def fails(*a: object, **k: object) -> dict[str, object]:
        raise ValueError("no cache for hcrl_sa")

    def requeued(*a: object, **k: object) -> dict[str, object]:
        raise RequeueRequested("last.ckpt")

    monkeypatch.setattr(cli, "run_stage", requeued)
    assert cli.main(args) == CONTRACT.requeue.exit_status
    assert read_rows(catalogue) == []
    monkeypatch.setattr(cli, "run_stage", fails)
    assert cli.main(args) == cli.USER_ERROR
    assert [(r["stage_id"], r["state"]) for r in read_rows(catalogue)] == [("ae", "FAILED")]
    monkeypatch.setattr(cli, "run_stage", completes)
    assert cli.main(args) == 0
    (row,) = read_rows(catalogue)
    assert (row["state"], row["anomaly_auroc"], row["recorded_by"]) == ("COMPLETED", 0.7, "pipeline")
    assert row["finished_at"] <= datetime.now(UTC)
