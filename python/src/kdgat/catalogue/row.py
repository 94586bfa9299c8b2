"""One catalogue row from what a finished stage left: its run dir (``<run-root>/<dataset>/<model>_
<scale>_<stage>``), its ``metrics.json``, the runner's ``manifest.json`` above it and the job's
SLURM variables.

Where the manifest is, from a stage's run dir (the runner writes ``<run dir>/manifest.json`` and
gives the pipeline ``--run-root <run dir>/outputs``)::

    <run dir>/outputs/<dataset>/<stage dir>                      a stage
    <run dir>/outputs/point_<i>/<dataset>/<stage dir>            a sweep point (array task)
    <run dir>/study/trials/trial_<n>/<dataset>/<stage dir>       a study's trial
    <run dir>/outputs/worker_<k>/<dataset>/<stage dir>           a study worker: not a stage, no row

so it is one, two or three levels above the run root. The runs root is two levels above the run dir
(``<runs root>/<experiment>/<utc>-<hash>``): the catalogue is ``<runs root>/catalogue``. A stage run
by hand, without a manifest, has its catalogue beside its run root (``experimentruns/catalogue``).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kdgat.catalogue.schema import COLUMNS, SCORE_COLUMNS
from kdgat.contract import CATALOGUE_DIR, CONTRACT, METRICS_FILE

MANIFEST_FILE = "manifest.json"

#: The final states a row can carry (the epilog's, and a trial's PRUNED).
STATES = ("COMPLETED", "FAILED", "TERMINATED", "PRUNED", "UNKNOWN")
#: States whose metrics.json is this run's (a failed stage's may be an earlier attempt's).
_SCORED_STATES = {"COMPLETED", "PRUNED"}

_POINT = re.compile(r"^point_(\d+)$")
_TRIAL = re.compile(r"^trial_(\d+)$")
_WORKER = re.compile(r"^worker_(\d+)$")


class NotAStage(ValueError):
    """The directory is no stage's run dir (a study worker's job, or not the layout)."""


@dataclass(frozen=True)
class Location:
    """Where a stage's row goes and what its path says."""

    stage_dir: Path
    #: The runner's run dir (holds manifest.json); None for a stage run by hand.
    run_dir: Path | None
    catalogue: Path
    point_index: int | None
    trial: int | None


def locate(stage_dir: Path) -> Location:
    """Finds the manifest above ``stage_dir`` and the catalogue it adds to (see the module doc)."""
    stage_dir = Path(stage_dir).resolve()
    run_root = stage_dir.parent.parent
    if _WORKER.match(run_root.name):
        raise NotAStage(f"{stage_dir} is a study worker's run dir: its trials are the catalogue's rows")
    point = _POINT.match(run_root.name)
    trial = _TRIAL.match(run_root.name)
    run_dir = next(
        (
            d
            for d in (run_root.parent, run_root.parent.parent, run_root.parent.parent.parent)
            if (d / MANIFEST_FILE).is_file()
        ),
        None,
    )
    if run_dir is not None:
        catalogue = run_dir.parent.parent / CATALOGUE_DIR
    else:
        # By hand: the run root a sweep point or a trial sits in.
        top = run_root.parent if point else run_root.parent.parent if trial else run_root
        catalogue = top / CATALOGUE_DIR
    return Location(
        stage_dir=stage_dir,
        run_dir=run_dir,
        catalogue=catalogue,
        point_index=int(point.group(1)) if point else None,
        trial=int(trial.group(1)) if trial else None,
    )


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def _identity(stage_dir: Path, metrics: dict[str, Any] | None) -> dict[str, str | None]:
    """stage, model, scale, dataset: metrics.json's, else the run dir's name (the contract's layout)."""
    parts = stage_dir.name.split(CONTRACT.run_dir.separator)
    named = dict(zip(CONTRACT.run_dir.name_parts, parts, strict=False)) if len(parts) == 3 else {}
    out: dict[str, str | None] = {}
    for key in ("stage", "model", "scale"):
        v = (metrics or {}).get(key) or named.get(key)
        out[key] = str(v) if v else None
    out["dataset"] = str((metrics or {}).get("dataset") or stage_dir.parent.name)
    return out


def _env_words(name: str) -> dict[str, str]:
    """``HPC_RECORD_STAGE='stageId=… stage=…'`` (what the job script exports for its epilog)."""
    return dict(w.split("=", 1) for w in os.environ.get(name, "").split() if "=" in w)


def _stage_id(identity: dict[str, str | None], manifest: dict[str, Any] | None) -> str | None:
    job = _env_words("HPC_RECORD_STAGE")
    if job.get("stageId") and all(job.get(k) == identity[k] for k in ("stage", "model", "scale", "dataset")):
        return job["stageId"]
    for s in _stages(manifest):
        if all(s.get(k) == identity[k] for k in ("stage", "model", "scale", "dataset")):
            return str(s.get("id"))
    return identity["stage"]


def _stages(manifest: dict[str, Any] | None) -> list[dict[str, Any]]:
    resolved = (manifest or {}).get("resolved") or {}
    stages = resolved.get("stages") if isinstance(resolved, dict) else None
    return [s for s in stages or [] if isinstance(s, dict)]


def _environment(manifest: dict[str, Any] | None, stage_id: str | None) -> tuple[str | None, str | None]:
    if not manifest:
        return None, None
    main = manifest.get("environment") or {}
    others = manifest.get("otherEnvironments") or []
    name = next((s.get("environment") for s in _stages(manifest) if s.get("id") == stage_id), None)
    env = next((e for e in [main, *others] if e.get("name") == name), main) if name else main
    return env.get("name"), env.get("lockHash")


def _cost(
    manifest: dict[str, Any] | None, stage_id: str | None, trial: int | None
) -> tuple[float | None, float | None, str | None]:
    """Expected and worst cost of one task of the stage (a study's trial is no task: none)."""
    cost = (manifest or {}).get("cost") or {}
    stage = (cost.get("stages") or {}).get(stage_id or "") if trial is None else None
    if not stage:
        return None, None, cost.get("unit")
    tasks = max(int(stage.get("tasks") or 1), 1)

    def per_task(v: Any) -> float | None:
        return None if v is None else float(v) / tasks

    return per_task(stage.get("expectedUnits")), per_task(stage.get("worstUnits")), cost.get("unit")


def _number(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return None if math.isnan(float(v)) else float(v)


def _scores(metrics: dict[str, Any]) -> tuple[dict[str, float | None], str | None]:
    scores = metrics.get("scores") if isinstance(metrics.get("scores"), dict) else {}
    assert isinstance(scores, dict)
    columns = {name: _number(scores.get(name, metrics.get(name))) for name in SCORE_COLUMNS}
    other: dict[str, Any] = {k: v for k, v in scores.items() if k not in columns}
    if metrics.get("scores_by_attack"):
        other["by_attack"] = metrics["scores_by_attack"]
    text = json.dumps(other, sort_keys=True, default=str, allow_nan=False) if other else None
    return columns, text


def _slurm() -> tuple[str | None, int | None]:
    array_job, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    if array_job and task and task.isdigit():
        return f"{array_job}_{task}", int(task)
    return os.environ.get("SLURM_JOB_ID") or None, None


def row_key(stage_dir: str) -> str:
    """One key per stage run: a later row with the same key replaces an earlier one."""
    return hashlib.sha256(stage_dir.encode()).hexdigest()[:16]


def stage_row(
    stage_dir: Path,
    state: str,
    *,
    elapsed_s: float | None = None,
    trial: int | None = None,
    point: dict[str, Any] | None = None,
    recorded_by: str = "pipeline",
    now: datetime | None = None,
) -> tuple[Location, dict[str, Any]]:
    """The row of the stage whose run dir is ``stage_dir``, ended in ``state``.

    Args:
        stage_dir: the stage's run dir, e.g. ``<run dir>/outputs/point_3/hcrl_sa/gat_large_curriculum``.
        state: one of :data:`STATES`, e.g. ``"COMPLETED"``.
        elapsed_s: seconds the stage ran, e.g. ``312.5``.
        trial: a study's trial number (else read from a ``trial_<n>`` run root), e.g. ``7``.
        point: the sweep point's overrides or the trial's parameters, e.g. ``{"training.lr": 0.01}``
            (a sweep point's are read from the manifest when not given).
        recorded_by: ``pipeline``, ``study`` or ``epilog``.

    Raises:
        NotAStage: for a study worker's run dir.
        ValueError: for a state that is not one of :data:`STATES`.
    """
    if state not in STATES:
        raise ValueError(f"state {state!r}: expected one of {', '.join(STATES)}")
    loc = locate(stage_dir)
    manifest = _read_json(loc.run_dir / MANIFEST_FILE) if loc.run_dir else None
    metrics = _read_json(loc.stage_dir / METRICS_FILE)
    identity = _identity(loc.stage_dir, metrics)
    stage_id = _stage_id(identity, manifest)
    trial = trial if trial is not None else loc.trial
    if point is None and loc.point_index is not None and manifest:
        points = (manifest.get("resolved") or {}).get("sweepPoints") or []
        point = points[loc.point_index] if loc.point_index < len(points) else None
    scored = metrics if metrics is not None and state in _SCORED_STATES else {}
    scores, other = _scores(scored)
    env_name, lock_hash = _environment(manifest, stage_id)
    expected, worst, unit = _cost(manifest, stage_id, trial)
    job_id, array_index = _slurm()
    git = (manifest or {}).get("git") or {}
    spec = (manifest or {}).get("spec") or {}
    # As the runner named the run dir (the site's path), not as this process resolved it.
    recorded_run_dir = (manifest or {}).get("runDir") if loc.run_dir else None
    if recorded_run_dir and loc.run_dir:
        shown_stage_dir = f"{recorded_run_dir.rstrip('/')}/{loc.stage_dir.relative_to(loc.run_dir)}"
    else:
        shown_stage_dir = str(loc.stage_dir)
    epochs = scored.get("epochs")
    row: dict[str, Any] = {
        "experiment": (manifest or {}).get("experiment"),
        "run_id": loc.run_dir.name if loc.run_dir else None,
        "stage_id": stage_id,
        **identity,
        "point_index": loc.point_index,
        "trial": trial,
        "point": json.dumps(point, sort_keys=True, default=str) if point else None,
        "state": state,
        **scores,
        "other_scores": other,
        "epochs": epochs if isinstance(epochs, int) and not isinstance(epochs, bool) else None,
        "elapsed_s": None if elapsed_s is None else round(float(elapsed_s), 3),
        "cost_expected": expected,
        "cost_worst": worst,
        "cost_unit": unit,
        "git_commit": git.get("commit"),
        "git_dirty": git.get("dirty"),
        "spec_hash": spec.get("hash"),
        "environment": env_name,
        "environment_lock_hash": lock_hash,
        "slurm_job_id": job_id,
        "slurm_array_index": array_index,
        "run_dir": recorded_run_dir or (str(loc.run_dir) if loc.run_dir else None),
        "stage_dir": shown_stage_dir,
        "finished_at": now or datetime.now(UTC),
        "recorded_by": recorded_by,
        "row_key": row_key(shown_stage_dir),
    }
    missing = set(COLUMNS) - set(row)
    extra = set(row) - set(COLUMNS)
    if missing or extra:  # the contract's columns and this builder drifted apart
        raise AssertionError(f"catalogue row: missing {sorted(missing)}, not in the contract {sorted(extra)}")
    return loc, row
