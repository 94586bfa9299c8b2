"""The tracking settings on their own: the ``tracking.*`` overrides (two sections deep), the
variables that fill them, the rule for SQLite stores on shared filesystems, the kept identity,
and the tags a stage's run gets from SLURM and the runner's manifest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kdgat.config import ConfigError, build_config
from kdgat.tracking import context, identity, settings


def test_tracking_overrides_reach_two_sections_deep_and_keep_their_defaults() -> None:
    cfg = build_config(
        "small",
        {
            "tracking.mlflow.uri": "http://127.0.0.1:5000",
            "tracking.wandb.enabled": "true",
            "tracking.log_every_n_steps": "5",
        },
    )
    assert cfg.tracking.mlflow.uri == "http://127.0.0.1:5000"
    assert cfg.tracking.mlflow.experiment is None
    assert cfg.tracking.wandb.enabled is True and cfg.tracking.wandb.mode == "offline"
    assert cfg.tracking.log_every_n_steps == 5 and cfg.tracking.tensorboard is True
    with pytest.raises(ConfigError, match=r"did you mean 'tracking\.mlflow\.uri'"):
        build_config("small", {"tracking.mlflow.url": "x"})
    with pytest.raises(ConfigError, match=r"tracking\.wandb\.mode"):
        build_config("small", {"tracking.wandb.mode": "cloud"})


def test_variables_fill_what_the_config_leaves_null(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in (
        "MLFLOW_TRACKING_URI",
        "MLFLOW_EXPERIMENT_NAME",
        "KD_GAT_WANDB",
        "WANDB_PROJECT",
        "SLURM_JOB_ID",
    ):
        monkeypatch.delenv(var, raising=False)
    off = settings.resolve(build_config("small"))
    assert (off.tensorboard, off.mlflow_uri, off.wandb) == (True, None, False)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:5001")
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "from-env")
    monkeypatch.setenv("KD_GAT_WANDB", "1")
    monkeypatch.setenv("WANDB_PROJECT", "proj")
    on = settings.resolve(build_config("small"))
    assert (on.mlflow_uri, on.mlflow_uri_source) == ("http://127.0.0.1:5001", "$MLFLOW_TRACKING_URI")
    assert (on.mlflow_experiment, on.wandb, on.wandb_project) == ("from-env", True, "proj")
    # The config wins over the variable; online W&B inside a SLURM job is offline.
    cfg = build_config(
        "small", {"tracking.mlflow.uri": "http://127.0.0.1:5002", "tracking.wandb.mode": "online"}
    )
    monkeypatch.setenv("SLURM_JOB_ID", "12")
    mine = settings.resolve(cfg)
    assert (mine.mlflow_uri, mine.mlflow_uri_source) == ("http://127.0.0.1:5002", "tracking.mlflow.uri")
    assert mine.wandb_mode == "offline"


MOUNTS = """\
/dev/vda1 / ext4 rw,relatime 0 0
fs1:/export/scratch /fs/scratch nfs4 rw,vers=4.2 0 0
10.0.0.1@o2ib:/lustre /lustre lustre rw 0 0
/dev/nvme0n1 /fs/scratch/local ext4 rw 0 0
"""


def test_sqlite_on_a_shared_filesystem_is_refused_naming_the_field_value_and_remedy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mounts = tmp_path / "mounts"
    mounts.write_text(MOUNTS)
    monkeypatch.setattr(settings, "MOUNTS_FILE", mounts)
    assert settings.filesystem_type(Path("/fs/scratch/PAS1/runs/mlflow.db")) == "nfs4"
    assert settings.filesystem_type(Path("/fs/scratch/local/x/mlflow.db")) == "ext4"  # the longest mount
    assert settings.filesystem_type(Path("/lustre/proj/m.db")) == "lustre"
    uri = "sqlite:////fs/scratch/PAS1/runs/mlflow.db"
    with pytest.raises(ConfigError) as e:
        build_and_resolve({"tracking.mlflow.uri": uri})
    msg = str(e.value)
    assert "tracking.mlflow.uri" in msg and repr(uri) in msg and "nfs4" in msg
    assert "mlflow server" in msg and "http://host:port" in msg
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:////lustre/proj/m.db")
    with pytest.raises(ConfigError, match=r"\$MLFLOW_TRACKING_URI = 'sqlite:////lustre/proj/m.db'.*lustre"):
        build_and_resolve({})
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    # Local disk, a relative path on local disk, and a server are fine.
    build_and_resolve({"tracking.mlflow.uri": "sqlite:////fs/scratch/local/x/mlflow.db"})
    build_and_resolve({"tracking.mlflow.uri": "http://login01:5000"})


def build_and_resolve(overrides: dict[str, str]) -> settings.TrackingSettings:
    return settings.resolve(build_config("small", overrides))


def test_the_real_mounts_name_this_machines_filesystem(tmp_path: Path) -> None:
    fstype = settings.filesystem_type(tmp_path / "not" / "yet" / "there.db")
    assert fstype != "unknown" and fstype not in settings.SHARED_FILESYSTEMS
    assert settings.sqlite_path("sqlite:////abs/m.db") == Path("/abs/m.db")
    assert settings.sqlite_path("sqlite:///rel/m.db") == Path("rel/m.db")
    assert settings.sqlite_path("sqlite://") is None and settings.sqlite_path("http://h:1") is None


def test_the_ids_are_kept_only_with_a_checkpoint_to_resume_from(tmp_path: Path) -> None:
    kept = identity.Identity(mlflow_run_id="abc", wandb_id="w1", logged_epoch=3, logged_step=40, lives=1)
    identity.save(tmp_path, kept)
    again, resumed = identity.load(tmp_path)
    assert not resumed and again.mlflow_run_id is None  # no last.ckpt: a new run
    ckpt = tmp_path / "checkpoints" / "last.ckpt"
    ckpt.write_bytes(b"")
    again, resumed = identity.load(tmp_path)
    assert resumed and (again.mlflow_run_id, again.wandb_id, again.logged_epoch) == ("abc", "w1", 3)
    assert identity.identity_path(tmp_path) == ckpt.parent / "tracking.json"


def test_one_parent_per_key_directory(tmp_path: Path) -> None:
    made: list[str] = []

    def create() -> str:
        made.append(f"p{len(made)}")
        return made[-1]

    assert identity.parent_id(tmp_path, "mlflow", "uri 1", create) == "p0"
    assert identity.parent_id(tmp_path, "mlflow", "uri 1", create) == "p0"
    assert identity.parent_id(tmp_path, "mlflow", "uri 2", create) == "p1"  # another store: its own
    assert made == ["p0", "p1"]


def test_tags_come_from_slurm_and_the_runners_manifest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "exp" / "20261125T000000Z-abcd1234"
    stage_dir = run / "outputs" / "point_3" / "synth" / "vgae_small_autoencoder"
    stage_dir.mkdir(parents=True)
    (run / "manifest.json").write_text(
        json.dumps(
            {
                "experiment": "exp",
                "runDir": str(run),
                "git": {"commit": "c0ffee", "dirty": False},
                "code": {"tree": "tree123", "commit": "c0ffee", "dir": "/scratch/code/tree123"},
                "resolved": {"specHash": "spec9"},
                "environment": {"name": "gnn-rapids", "lockHash": "lock7"},
            }
        )
    )
    for var in ("SLURM_JOB_ID", "SLURM_ARRAY_JOB_ID", "SLURM_RESTART_COUNT", "PYTHONPATH"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "3")
    monkeypatch.setenv("SLURM_JOB_NODELIST", "c01")
    manifest = context.find_manifest(stage_dir)
    tags = context.run_tags(stage_dir, {"stage": "autoencoder"}, manifest)
    assert tags["kdgat.stage"] == "autoencoder"
    assert (tags["slurm.array_task_id"], tags["slurm.nodelist"]) == ("3", "c01")
    assert "slurm.job_id" not in tags  # absent, not empty
    assert (tags["git.commit"], tags["mlflow.source.git.commit"]) == ("c0ffee", "c0ffee")
    assert (tags["kdgat.spec_hash"], tags["kdgat.environment_lock_hash"]) == ("spec9", "lock7")
    assert (tags["kdgat.code_snapshot"], tags["kdgat.experiment"]) == ("tree123", "exp")
    assert context.sweep_point(stage_dir) == (3, (run / "outputs").resolve())
    # Without a manifest: the snapshot from the job's PYTHONPATH (<scratch>/code/<tree>/src).
    monkeypatch.setenv("PYTHONPATH", "/fs/scratch/p/code/deadbeef/src:/other")
    alone = context.run_tags(tmp_path / "a" / "b", {}, None)
    assert alone["kdgat.code_snapshot"] == "deadbeef" and "git.commit" not in alone
