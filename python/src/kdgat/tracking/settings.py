"""What a stage tracks, from ``tracking.*`` of the config and the variables the runner or a user
sets, and the rule for tracking stores on a shared filesystem.

SQLite locks its database file with POSIX advisory locks, which NFS, Lustre and GPFS implement
partly or not at all (sqlite.org/howtocorrupt.html, section 2.1): several jobs writing one
``mlflow.db`` there corrupt it or fail with "database is locked". So ``sqlite:///`` on such a
filesystem is refused before the stage starts; an ``http(s)://`` URI of an ``mlflow server`` (whose
store sits on one machine's local disk) is safe from any node.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from kdgat.config import ConfigError, PipelineConfig
from kdgat.tracking.redact import redact_uri

#: MLflow's own variables (read by MLflow too).
MLFLOW_URI_ENV = "MLFLOW_TRACKING_URI"
MLFLOW_EXPERIMENT_ENV = "MLFLOW_EXPERIMENT_NAME"
#: W&B on for a job without changing its overrides (the runner can export it).
WANDB_ENV = "KD_GAT_WANDB"
WANDB_PROJECT_ENV = "WANDB_PROJECT"

#: The kernel's table of mounts (a module value so a test can give another machine's).
MOUNTS_FILE = Path("/proc/mounts")
#: Filesystems where SQLite's file locking cannot be trusted (``stat -f -c %T`` / /proc/mounts names).
SHARED_FILESYSTEMS = frozenset(
    {"nfs", "nfs4", "lustre", "gpfs", "beegfs", "cifs", "smb2", "smb3", "ceph", "fuse.sshfs", "9p"}
)


@dataclass(frozen=True)
class TrackingSettings:
    tensorboard: bool
    log_every_n_steps: int
    mlflow_uri: str | None
    #: Where the URI came from (the config field or the variable), for messages.
    mlflow_uri_source: str
    mlflow_experiment: str | None
    wandb: bool
    wandb_project: str
    wandb_mode: str

    @property
    def any_remote(self) -> bool:
        return self.mlflow_uri is not None or self.wandb


def _truthy(text: str) -> bool:
    return text.strip().lower() in {"1", "true", "yes", "on"}


def resolve(cfg: PipelineConfig) -> TrackingSettings:
    """The config's ``tracking`` section with the variables filled in where it says null; raises
    :class:`ConfigError` for a store that is not safe where it is (see the module's docstring)."""
    t = cfg.tracking
    env = os.environ
    uri, source = t.mlflow.uri, "tracking.mlflow.uri"
    if not uri and env.get(MLFLOW_URI_ENV, "").strip():
        uri, source = env[MLFLOW_URI_ENV].strip(), f"${MLFLOW_URI_ENV}"
    if uri:
        check_store(uri, source)
    mode = t.wandb.mode
    if mode == "online" and env.get("SLURM_JOB_ID"):
        mode = "offline"  # a compute node has no network: files now, `tracking-sync` later
    return TrackingSettings(
        tensorboard=t.tensorboard,
        log_every_n_steps=t.log_every_n_steps,
        mlflow_uri=uri or None,
        mlflow_uri_source=source,
        mlflow_experiment=t.mlflow.experiment or env.get(MLFLOW_EXPERIMENT_ENV, "").strip() or None,
        wandb=t.wandb.enabled or _truthy(env.get(WANDB_ENV, "")),
        wandb_project=t.wandb.project or env.get(WANDB_PROJECT_ENV, "").strip() or "kdgat",
        wandb_mode=mode,
    )


def filesystem_type(path: Path) -> str:
    """The filesystem type of ``path`` (or of its nearest existing parent), as /proc/mounts names
    it (``ext4``, ``nfs4``, ``lustre``, ``gpfs``); ``unknown`` where /proc/mounts is unreadable."""
    p = Path(os.path.abspath(path))
    while not p.exists() and p != p.parent:
        p = p.parent
    # The existing part resolved (symlinks), the rest as written.
    real = os.path.join(os.path.realpath(p), os.path.relpath(os.path.abspath(path), p))
    best, fstype = "", "unknown"
    try:
        lines = MOUNTS_FILE.read_text().splitlines()
    except OSError:
        return fstype
    for line in lines:
        fields = line.split()
        if len(fields) < 3:
            continue
        mount = fields[1].replace("\\040", " ")
        inside = real == mount or real.startswith(mount.rstrip("/") + "/")
        if inside and len(mount) >= len(best):
            best, fstype = mount, fields[2]
    return fstype


def sqlite_path(uri: str) -> Path | None:
    """The database file of a ``sqlite:///`` URI (``sqlite:////abs`` or ``sqlite:///rel``), else None."""
    if not uri.startswith("sqlite:"):
        return None
    # After "sqlite://": "/rel.db" (relative to the working directory) or "//abs/x.db" (absolute).
    rest = uri.removeprefix("sqlite:").removeprefix("//").split("?", 1)[0]
    if not rest.startswith("/") or rest in {"/", "/:memory:"}:
        return None
    return Path(rest[1:])


def check_store(uri: str, source: str) -> None:
    """Refuses a SQLite tracking store on a shared filesystem, naming the field, the value and
    what to use instead."""
    path = sqlite_path(uri)
    if path is None:
        return
    fstype = filesystem_type(path)
    if fstype.split(".")[0] in SHARED_FILESYSTEMS or fstype in SHARED_FILESYSTEMS:
        raise ConfigError(
            f"{source} = {redact_uri(uri)!r}: the SQLite file {path} is on a {fstype} filesystem, where "
            "SQLite's file locking is not safe (jobs writing it at once corrupt it or fail with 'database is "
            "locked'). Use an MLflow server instead: run `mlflow server --backend-store-uri "
            "sqlite:///<local disk>/mlflow.db` on one machine and set "
            f"{source.lstrip('$')} to its http://host:port, or put the sqlite file on node-local disk"
        )
