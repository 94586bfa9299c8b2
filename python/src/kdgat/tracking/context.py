"""Where a stage runs, in tags: the SLURM variables of the job, the run's ``manifest.json`` (written
by the runner in its run dir, above the pipeline's run root), and the sweep point or study the stage
belongs to. What is not there is simply absent."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kdgat.config import PipelineConfig
from kdgat.tracking.redact import redact_text

MANIFEST_FILE = "manifest.json"
#: A sweep point's run root is ``<run dir>/outputs/point_<i>`` (the job script's array task).
_POINT = re.compile(r"^point_(\d+)$")
#: How far above a stage's run dir a manifest is looked for (<run dir>/outputs/point_i/<dataset>/<stage>).
_MANIFEST_DEPTH = 5

#: SLURM variables worth a tag, and the tag each becomes.
_SLURM_TAGS = {
    "SLURM_JOB_ID": "slurm.job_id",
    "SLURM_ARRAY_JOB_ID": "slurm.array_job_id",
    "SLURM_ARRAY_TASK_ID": "slurm.array_task_id",
    "SLURM_JOB_NODELIST": "slurm.nodelist",
    "SLURM_RESTART_COUNT": "slurm.restart_count",
    "SLURM_CLUSTER_NAME": "slurm.cluster",
    "SLURM_JOB_PARTITION": "slurm.partition",
}


@dataclass(frozen=True)
class Group:
    """The parent a stage's run belongs to: a sweep (keyed by the directory holding its points) or
    a study (keyed by the study directory). ``key`` is the directory the parent's id is kept in."""

    kind: str  # "sweep" | "study"
    name: str
    key: Path
    tags: dict[str, str] = field(default_factory=dict)


def find_manifest(start: Path, *more: Path | None) -> dict[str, Any] | None:
    """The runner's ``manifest.json`` in ``start`` or up to a few directories above it (then in
    ``more``, e.g. a study's run dir); None when there is none."""
    candidates: list[Path] = []
    p = start.resolve()
    for _ in range(_MANIFEST_DEPTH):
        p = p.parent
        candidates.append(p / MANIFEST_FILE)
    candidates += [Path(m) / MANIFEST_FILE for m in more if m]
    for c in candidates:
        try:
            doc = json.loads(c.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict):
            return doc
    return None


def sweep_point(run_dir: Path) -> tuple[int, Path] | None:
    """``(i, <dir holding the points>)`` when ``run_dir`` is a sweep point's stage
    (``…/point_<i>/<dataset>/<model>_<scale>_<stage>``), else None."""
    root = run_dir.resolve().parent.parent
    m = _POINT.match(root.name)
    return (int(m.group(1)), root.parent) if m else None


def experiment_name(manifest: dict[str, Any] | None, fallback: str) -> str:
    name = (manifest or {}).get("experiment")
    return name if isinstance(name, str) and name else fallback


def _get(doc: dict[str, Any] | None, *path: str) -> str | None:
    cur: Any = doc
    for p in path:
        if not isinstance(cur, dict):
            return None
        cur = cur.get(p)
    return str(cur) if isinstance(cur, str | int | float) and cur != "" else None


def run_tags(run_dir: Path, identity: dict[str, str], manifest: dict[str, Any] | None) -> dict[str, str]:
    """Tags of a stage's run: the stage's identity, the run directory, the SLURM job, the commit,
    spec hash, environment lock and code snapshot of the manifest (the code snapshot also from the
    job's ``PYTHONPATH``, which the job script starts with ``<snapshot>/src``)."""
    tags = {f"kdgat.{k}": v for k, v in identity.items()}
    tags["kdgat.run_dir"] = str(run_dir.resolve())
    for var, tag in _SLURM_TAGS.items():
        if os.environ.get(var):
            tags[tag] = os.environ[var]
    values = {
        "kdgat.experiment": _get(manifest, "experiment"),
        "kdgat.runner_run_dir": _get(manifest, "runDir"),
        "git.commit": _get(manifest, "code", "commit") or _get(manifest, "git", "commit"),
        "git.dirty": _get(manifest, "git", "dirty"),
        "kdgat.spec_hash": _get(manifest, "resolved", "specHash"),
        "kdgat.environment": _get(manifest, "environment", "name"),
        "kdgat.environment_lock_hash": _get(manifest, "environment", "lockHash"),
        "kdgat.code_snapshot": _get(manifest, "code", "tree") or _code_snapshot_from_path(),
        "kdgat.code_dir": _get(manifest, "code", "dir"),
    }
    tags.update({k: v for k, v in values.items() if v is not None})
    if "git.commit" in tags:
        tags["mlflow.source.git.commit"] = tags["git.commit"]
    return tags


def _code_snapshot_from_path() -> str | None:
    first = os.environ.get("PYTHONPATH", "").split(":")[0]
    # <scratch>/code/<tree>/src (libs/run-record/src/code/snapshot.ts)
    parts = Path(first).parts
    if len(parts) >= 3 and parts[-1] == "src" and parts[-3] == "code":
        return parts[-2]
    return None


def flat_config(cfg: PipelineConfig) -> dict[str, str | int | float | bool]:
    """The resolved config as dotted keys (``training.lr``), values TensorBoard, MLflow and W&B
    all accept (lists and None as text); a URI among them (``tracking.mlflow.uri``) without its
    credentials (:func:`kdgat.tracking.redact.redact_text`): these values are logged and stored."""
    out: dict[str, str | int | float | bool] = {}

    def walk(node: Any, prefix: str) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, f"{prefix}{k}.")
            return
        key = prefix.rstrip(".")
        if isinstance(node, str):
            out[key] = redact_text(node)
        else:
            out[key] = node if isinstance(node, int | float | bool) else redact_text(json.dumps(node))

    walk(cfg.model_dump(mode="json"), "")
    return out
