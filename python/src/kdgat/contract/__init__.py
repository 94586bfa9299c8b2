"""The run contract: facts the job scripts, the runner and this pipeline share, read from
``run_contract.json`` next to this module (shipped in the wheel). The TypeScript side reads the
same file (``RUN_CONTRACT`` of ``@kdgat/config``); nothing here is declared a second time.

- the requeue handshake: exit status, acknowledgement file and its fields, the signal variable
  and its default (the handshake itself: :mod:`kdgat.training.requeue`);
- the OOM back-off across jobs: the variable a resubmission sets to the batch size to start from,
  and the log line the back-off prints when it gives up (:mod:`kdgat.training.oom`);
- the run-dir layout ``<run-root>/<dataset>/<model>_<scale>_<stage>/`` and the files in it;
- the stages, in order, with the metrics each logs once per validation epoch;
- the catalogue of all runs: its folder under the runs root and its columns (:mod:`kdgat.catalogue`).
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

CONTRACT_FILE = "run_contract.json"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, alias_generator=to_camel, populate_by_name=True)


class AckFields(_Model):
    stage: tuple[str, ...]
    tune: tuple[str, ...]


class Requeue(_Model):
    exit_status: int = Field(ge=1, le=255)
    signal_env: str = Field(pattern=r"^[A-Z_][A-Z0-9_]*$")
    default_signal: str = Field(pattern=r"^[A-Z0-9]+$")
    ack_file: str = Field(pattern=r"^[A-Za-z0-9._-]+$")
    ack_fields: AckFields


class Oom(_Model):
    batch_size_env: str = Field(pattern=r"^[A-Z_][A-Z0-9_]*$")
    gave_up_line: str = Field(min_length=1)


class Shards(_Model):
    comment: str = Field(default="", alias="$comment")
    index_env: str = Field(pattern=r"^[A-Z_][A-Z0-9_]*$")
    count_env: str = Field(pattern=r"^[A-Z_][A-Z0-9_]*$")


class RunDirFiles(_Model):
    metrics: str
    checkpoint: str
    model: str
    history: str
    profiler_traces: str
    tensorboard: str


class RunDir(_Model):
    layout: str
    name_parts: tuple[str, ...]
    separator: str
    files: RunDirFiles


class StageFacts(_Model):
    name: str = Field(pattern=r"^[a-z]+$")
    epoch_metrics: tuple[str, ...]


class CatalogueColumn(_Model):
    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    type: Literal["string", "int64", "float64", "bool", "timestamp"]
    #: identity, outcome, score (read from metrics.json), cost or provenance.
    kind: Literal["identity", "outcome", "score", "cost", "provenance"]
    doc: str = Field(min_length=1)


class Catalogue(_Model):
    comment: str = Field(default="", alias="$comment")
    dir: str = Field(pattern=r"^[A-Za-z0-9._-]+$")
    schema_name: str = Field(alias="schema", min_length=1)
    columns: tuple[CatalogueColumn, ...] = Field(min_length=1)


class RunContract(_Model):
    comment: str = Field(default="", alias="$comment")
    requeue: Requeue
    oom: Oom
    run_dir: RunDir
    stages: tuple[StageFacts, ...] = Field(min_length=1)
    shards: Shards
    catalogue: Catalogue


def load() -> RunContract:
    """Reads and validates ``run_contract.json`` (a broken file fails at import, naming the field)."""
    text = resources.files(__name__).joinpath(CONTRACT_FILE).read_text(encoding="utf-8")
    return RunContract.model_validate(json.loads(text))


CONTRACT = load()

#: EX_TEMPFAIL: checkpointed and acknowledged, please requeue.
REQUEUE_EXIT_STATUS = CONTRACT.requeue.exit_status
#: The environment variable naming the pre-timeout signal (the job script exports it).
REQUEUE_SIGNAL_ENV = CONTRACT.requeue.signal_env
DEFAULT_REQUEUE_SIGNAL = CONTRACT.requeue.default_signal
#: Written into the run dir once the checkpoint is saved; the job script requeues only after it.
ACK_FILE = CONTRACT.requeue.ack_file

#: A resubmission after a CUDA OOM sets it (the runner's recovery): the largest batch size to start from.
OOM_BATCH_SIZE_ENV = CONTRACT.oom.batch_size_env
#: How the log line starts when the OOM back-off gives up: ``<this> <N>, …`` (the runner reads N).
OOM_GAVE_UP_LINE = CONTRACT.oom.gave_up_line

METRICS_FILE = CONTRACT.run_dir.files.metrics
#: Relative to the run dir; a start with this file present resumes from it.
CHECKPOINT_FILE = CONTRACT.run_dir.files.checkpoint
MODEL_FILE = CONTRACT.run_dir.files.model
HISTORY_FILE = CONTRACT.run_dir.files.history
PROFILER_DIR = CONTRACT.run_dir.files.profiler_traces
TENSORBOARD_DIR = CONTRACT.run_dir.files.tensorboard

#: The pipeline's stages, in order.
STAGES: tuple[str, ...] = tuple(s.name for s in CONTRACT.stages)
#: What each stage logs once per validation epoch (what a pruner or early stopping can watch).
EPOCH_METRICS: dict[str, tuple[str, ...]] = {s.name: s.epoch_metrics for s in CONTRACT.stages}


#: A sharded stage's array task i of N has SHARD_INDEX_ENV=i and SHARD_COUNT_ENV=N; its join job
#: has SHARD_COUNT_ENV alone (:mod:`kdgat.data.shards`).
SHARD_INDEX_ENV = CONTRACT.shards.index_env
SHARD_COUNT_ENV = CONTRACT.shards.count_env

#: The catalogue's folder under the runs root, and its columns in order (:mod:`kdgat.catalogue`).
CATALOGUE_DIR = CONTRACT.catalogue.dir
CATALOGUE_COLUMNS: tuple[CatalogueColumn, ...] = CONTRACT.catalogue.columns


def run_dir_name(model: str, scale: str, stage: str) -> str:
    """The run dir's own name, ``<model>_<scale>_<stage>`` (the layout's last component)."""
    parts = {"model": model, "scale": scale, "stage": stage}
    return CONTRACT.run_dir.separator.join(parts[p] for p in CONTRACT.run_dir.name_parts)


__all__ = [
    "ACK_FILE",
    "CATALOGUE_COLUMNS",
    "CATALOGUE_DIR",
    "CHECKPOINT_FILE",
    "CONTRACT",
    "DEFAULT_REQUEUE_SIGNAL",
    "EPOCH_METRICS",
    "HISTORY_FILE",
    "METRICS_FILE",
    "MODEL_FILE",
    "OOM_BATCH_SIZE_ENV",
    "OOM_GAVE_UP_LINE",
    "PROFILER_DIR",
    "REQUEUE_EXIT_STATUS",
    "REQUEUE_SIGNAL_ENV",
    "SHARD_COUNT_ENV",
    "SHARD_INDEX_ENV",
    "STAGES",
    "CatalogueColumn",
    "RunContract",
    "run_dir_name",
]
