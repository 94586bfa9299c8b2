"""A study directory and what it holds: ``study.json`` (the search, written by the runner from the
spec's ``tune:`` section), ``journal.log`` (Optuna's journal storage: appends under a lock file, so
many workers on a shared filesystem can write it; never SQLite over NFS) and ``trials/``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

import optuna
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

STUDY_FILE = "study.json"
JOURNAL_FILE = "journal.log"

Scalar = str | int | float | bool | None


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True, frozen=True)


class FloatParam(_Model):
    type: Literal["float"]
    low: float
    high: float
    log: bool = False


class IntParam(_Model):
    type: Literal["int"]
    low: int
    high: int
    step: int = Field(default=1, ge=1)
    log: bool = False


class CategoricalParam(_Model):
    type: Literal["categorical"]
    choices: list[Scalar] = Field(min_length=1)


SearchParam = Annotated[FloatParam | IntParam | CategoricalParam, Field(discriminator="type")]


class Patient(_Model):
    patience: int = Field(ge=0)
    min_delta: float = Field(default=0.0, ge=0)


class HyperbandSpec(_Model):
    type: Literal["hyperband"]
    min_resource: int = Field(default=3, ge=1)
    max_resource: int = Field(default=100, ge=1)
    reduction_factor: int = Field(default=3, ge=2)
    patient: Patient | None = None


class MedianSpec(_Model):
    type: Literal["median"]
    startup_trials: int = Field(default=5, ge=0)
    warmup_steps: int = Field(default=0, ge=0)
    patient: Patient | None = None


class NoPruning(_Model):
    type: Literal["none"]


PrunerSpec = Annotated[HyperbandSpec | MedianSpec | NoPruning, Field(discriminator="type")]


class Objective(_Model):
    #: A metric the tuned stage logs each epoch (the run contract's ``epochMetrics``).
    metric: str = Field(pattern=r"^[a-z_][a-z0-9_]*$")
    direction: Literal["minimize", "maximize"]


class Sampler(_Model):
    type: Literal["tpe", "random"] = "tpe"
    seed: int | None = Field(default=None, ge=0)


class StudyConfig(_Model):
    """``study.json``: the tuned stage, the base overrides and the search (camelCase, as the
    runner writes it from the spec's resolved ``tune:`` section)."""

    study: str
    experiment: str = ""
    #: The spec's id of the tuned stage (`train --from-study` applies the best values to it).
    stage_id: str | None = None
    stage: str
    model: Literal["gat", "vgae"]
    scale: Literal["large", "small"]
    dataset: str
    overrides: dict[str, Scalar] = {}
    space: dict[str, SearchParam] = Field(min_length=1)
    objective: Objective
    n_trials: int = Field(ge=1, le=100_000)
    #: Parallel SLURM tasks (one job array) pulling trials from the study.
    n_workers: int = Field(default=1, ge=1, le=1000)
    pruner: PrunerSpec
    sampler: Sampler = Sampler()
    #: How often a worker records that its trial is alive.
    heartbeat_seconds: int = Field(default=60, ge=1, le=3600)
    #: A RUNNING trial whose heartbeat is older than this is failed and retried by another worker.
    stale_after_seconds: int = Field(default=300, ge=2, le=86_400)
    #: How many times a trial lost to a dead or requeued worker is retried with the same params.
    max_retries: int = Field(default=1, ge=0, le=10)
    #: Run root of the stages before the tuned one (a curriculum trial reads the VGAE there).
    inputs_root: str | None = None
    #: The runner's run dir that created the study.
    run_dir: str | None = None


def study_json_schema() -> dict[str, Any]:
    """The JSON Schema of ``study.json`` (camelCase), checked in as libs/config/schema/study.schema.json:
    the runner validates what it writes with it and the spec's ``tune:`` bounds come from it."""
    return StudyConfig.model_json_schema(by_alias=True)


class StudyError(ValueError):
    """The study directory or its config is unusable: says which file and what to do."""


def read_config(study_dir: Path) -> StudyConfig:
    path = study_dir / STUDY_FILE
    if not path.is_file():
        raise StudyError(
            f"{path} does not exist: a study directory is made by `nx run runner:tune --spec <yaml>`"
        )
    try:
        return StudyConfig.model_validate(json.loads(path.read_text()))
    except json.JSONDecodeError as e:
        raise StudyError(f"{path} is not JSON: {e}") from None
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in e.errors())
        raise StudyError(f"{path} is not a valid study config: {problems}") from None


def storage_for(study_dir: Path) -> JournalStorage:
    """The journal storage of ``study_dir`` (Optuna's default symlink lock: NFS-safe)."""
    return JournalStorage(JournalFileBackend(str(study_dir / JOURNAL_FILE)))


def make_pruner(spec: HyperbandSpec | MedianSpec | NoPruning) -> optuna.pruners.BasePruner:
    if isinstance(spec, NoPruning):
        return optuna.pruners.NopPruner()
    inner: optuna.pruners.BasePruner
    if isinstance(spec, HyperbandSpec):
        inner = optuna.pruners.HyperbandPruner(
            min_resource=spec.min_resource,
            max_resource=spec.max_resource,
            reduction_factor=spec.reduction_factor,
        )
    else:
        inner = optuna.pruners.MedianPruner(
            n_startup_trials=spec.startup_trials, n_warmup_steps=spec.warmup_steps
        )
    if spec.patient is None:
        return inner
    return optuna.pruners.PatientPruner(
        inner, patience=spec.patient.patience, min_delta=spec.patient.min_delta
    )


def make_sampler(spec: Sampler, worker_index: int) -> optuna.samplers.BaseSampler:
    # Workers must not draw the same random start points: one seed per worker, derived.
    seed = None if spec.seed is None else spec.seed + 1009 * worker_index
    if spec.type == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    # constant_liar: running trials count as bad guesses, so parallel workers spread out.
    return optuna.samplers.TPESampler(seed=seed, constant_liar=True)


def open_study(study_dir: Path, cfg: StudyConfig, *, worker_index: int = 0) -> optuna.Study:
    """Creates the study on first use, loads it afterwards (every worker calls this)."""
    return optuna.create_study(
        study_name=cfg.study,
        storage=storage_for(study_dir),
        direction=cfg.objective.direction,
        sampler=make_sampler(cfg.sampler, worker_index),
        pruner=make_pruner(cfg.pruner),
        load_if_exists=True,
    )


def suggest(trial: optuna.Trial, space: dict[str, Any]) -> dict[str, Scalar]:
    """The trial's values for every key of the search space (enqueued retries get theirs back)."""
    params: dict[str, Scalar] = {}
    for key, p in space.items():
        if isinstance(p, FloatParam):
            params[key] = trial.suggest_float(key, p.low, p.high, log=p.log)
        elif isinstance(p, IntParam):
            params[key] = trial.suggest_int(key, p.low, p.high, step=p.step, log=p.log)
        else:
            params[key] = trial.suggest_categorical(key, p.choices)
    return params
