"""Sharded preprocessing: the per-file step of :func:`kdgat.data.preprocess_dataset` spread over a
job array, then one join.

Array task ``i`` of ``N`` (``build_shard(dataset, params, i, N)``) builds the window graphs of its
share of the source files (:func:`assign_shards`: balanced by bytes) into the shard store, and the
join (``preprocess_dataset(..., from_shards=True)``) reads them back instead of the raw files and
writes the cache exactly as a one-job build would (``graphs.pt`` and ``vocab.json`` byte for byte).

The store, ``<cache>/shards/<params digest>/``, keys every file by the sha256 of its content:

- ``<sha256>.npz``: the file's :class:`~kdgat.data.graphs.WindowGraphs` arrays and its windows'
  times (``window_times``; uncompressed ``np.savez``);
- ``ledger/<sha256>.json``: written after the ``.npz``: ``relpath``, ``sha256``, ``status`` (``ok``
  or ``failed``), ``error`` (failed), ``report`` (the parse report, ok), ``messages``, ``graphs``,
  ``seconds``, ``host``, ``job`` (the SLURM array task or job), ``time`` (UTC).

A file's shard is done when its ledger says ``ok`` and its ``.npz`` is there; a task skips the
files that are done, so running the tasks again redoes only what is missing or failed. Tasks on
several nodes write the store at once: every write goes to a temp name of its own, then
``os.replace``; nothing is appended to a shared file.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import logging
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kdgat import paths
from kdgat.data.build import _build_file, _file_args, _FileResult, list_sources
from kdgat.data.cache import sha256_of, unique_temp, write_json
from kdgat.data.errors import DataError
from kdgat.data.graphs import WindowGraphs
from kdgat.data.params import GraphParams

log = logging.getLogger("kdgat.data")

SHARDS_DIR = "shards"
LEDGER_DIR = "ledger"
#: What to do when shards are missing or failed (the join's error ends with it).
RERUN_HINT = (
    "run the preprocess stage's shards again (runner train with the same spec, or `runner resume`): "
    "tasks skip the shards that are done"
)

_GRAPH_FIELDS = tuple(f.name for f in dataclasses.fields(WindowGraphs))
#: the ``.npz`` key of the file's window times (``build.WINDOW_TIME_COLUMNS``)
_TIMES = "window_times"


@dataclass(frozen=True)
class ShardReport:
    """What one array task did (:func:`build_shard`).

    Args:
        index: the task's shard, ``0 <= index < count``.
        count: the number of shards (array tasks).
        built: relative paths of the files built now, e.g. ``("train_dos.csv",)``.
        skipped: relative paths of the files whose shard was already done.
        failed: relative path -> error of the files that failed now.
        messages: CAN messages of the shard's done files (built now or before).
        seconds: wall time of the task.
    """

    index: int
    count: int
    built: tuple[str, ...]
    skipped: tuple[str, ...]
    failed: dict[str, str]
    messages: int
    seconds: float

    def summary(self) -> str:
        files = len(self.built) + len(self.skipped) + len(self.failed)
        lines = [
            f"shard {self.index} of {self.count}: {files} files, {len(self.built)} built, "
            f"{len(self.skipped)} already done, {len(self.failed)} failed "
            f"({self.messages} messages, {self.seconds:.1f}s)"
        ]
        lines += [f"  failed {rel}: {err}" for rel, err in self.failed.items()]
        return "\n".join(lines)


def assign_shards(sizes: list[int], count: int) -> list[list[int]]:
    """Files (by index into ``sizes``, their byte sizes) per shard, balanced by bytes.

    Longest-processing-time greedy: the largest file first (ties: the lower index), each to the
    shard with the fewest bytes so far (ties: the lower shard). Deterministic; every file in exactly
    one shard; a shard's indices ascending; shards beyond the number of files are empty.

    Example: ``assign_shards([5, 9, 2, 7, 3], 2) == [[1, 2, 4], [0, 3]]`` (14 and 12 bytes).
    """
    _check_shard(0, count)
    totals = [0] * count
    shards: list[list[int]] = [[] for _ in range(count)]
    for i in sorted(range(len(sizes)), key=lambda i: (-sizes[i], i)):
        target = min(range(count), key=lambda k: (totals[k], k))
        shards[target].append(i)
        totals[target] += sizes[i]
    return [sorted(s) for s in shards]


def shard_store(cache: Path, params: GraphParams) -> Path:
    """The shard store of the graph cache ``cache`` for ``params``."""
    return cache / SHARDS_DIR / params.digest()


def build_shard(
    dataset: str,
    params: GraphParams,
    index: int,
    count: int,
    *,
    raw: Path | None = None,
    cache: Path | None = None,
) -> ShardReport:
    """Builds shard ``index`` of ``count`` of ``dataset``'s graph cache into the shard store.

    Lists the CAN files under ``raw`` (default ``paths.raw_dir(dataset)``) as
    :func:`kdgat.data.preprocess_dataset` does, assigns them to shards by size
    (:func:`assign_shards`) and builds this shard's files one by one into
    ``shard_store(cache, params)`` (``cache`` default ``paths.cache_dir(dataset)``), skipping the
    files whose shard is done.

    Raises:
        ValueError: ``index`` or ``count`` out of range (``0 <= index < count``, ``count >= 1``).
        DataError: the raw directory is missing or empty, or files failed (named, with their
            errors; each has a ``failed`` ledger entry and the shard's other files were built).
    """
    _check_shard(index, count)
    raw = Path(raw) if raw is not None else paths.raw_dir(dataset)
    cache = Path(cache) if cache is not None else paths.cache_dir(dataset)
    started = time.perf_counter()
    files = list_sources(raw)
    mine = assign_shards([p.stat().st_size for p in files], count)[index]
    store = shard_store(cache, params)
    (store / LEDGER_DIR).mkdir(parents=True, exist_ok=True)
    built: list[str] = []
    skipped: list[str] = []
    failed: dict[str, str] = {}
    messages = 0
    for i in mine:
        path = files[i]
        rel = path.relative_to(raw).as_posix()
        digest = sha256_of(path)
        entry = _done_entry(store, digest)
        if entry is not None:
            log.info("shard %d of %d: %s is done already (%s), skipped", index, count, rel, digest[:12])
            skipped.append(rel)
            messages += int(entry["messages"])
            continue
        file_started = time.perf_counter()
        try:
            result = _build_file(*_file_args(path, params))
        except Exception as e:  # any failure of one file: recorded, the shard's others still built
            error = str(e) if isinstance(e, DataError) else f"{type(e).__name__}: {e}"
            log.error("shard %d of %d: %s failed: %s", index, count, rel, error)
            _write_entry(store, rel, digest, "failed", time.perf_counter() - file_started, error=error)
            failed[rel] = error
            continue
        _save_result(store, digest, result)
        _write_entry(store, rel, digest, "ok", time.perf_counter() - file_started, result=result)
        built.append(rel)
        messages += result.messages
    report = ShardReport(
        index=index,
        count=count,
        built=tuple(built),
        skipped=tuple(skipped),
        failed=failed,
        messages=messages,
        seconds=time.perf_counter() - started,
    )
    if failed:
        raise DataError(
            f"shard {index} of {count}: {len(failed)} of {len(mine)} files failed "
            f"(ledger: {store / LEDGER_DIR}):\n" + "\n".join(f"  {rel}: {err}" for rel, err in failed.items())
        )
    return report


def load_results(cache: Path, params: GraphParams, sources: list[dict[str, Any]]) -> list[_FileResult]:
    """The per-file results of ``sources`` (:func:`kdgat.data.cache.fingerprint` entries, in
    order) from the shard store: what the join of a sharded preprocess builds the cache from.

    Raises:
        DataError: some files have no done shard (missing, or failed: with the ledger's error),
            each named, and what to do.
    """
    store = shard_store(cache, params)
    missing: list[str] = []
    failed: list[str] = []
    for s in sources:
        if _done_entry(store, s["sha256"]) is not None:
            continue
        entry = _read_entry(store, s["sha256"])
        if entry is not None and entry.get("status") == "failed":
            failed.append(f"  {s['relpath']}: failed: {entry.get('error')}")
        else:
            missing.append(f"  {s['relpath']}: missing")
    if missing or failed:
        raise DataError(
            f"the shard store {store} lacks {len(missing) + len(failed)} of {len(sources)} files "
            f"({len(missing)} missing, {len(failed)} failed):\n"
            + "\n".join(failed + missing)
            + f"\n{RERUN_HINT}"
        )
    return [load_shard(store, s["sha256"]) for s in sources]


def load_shard(store: Path, digest: str) -> _FileResult:
    """The stored result of the file whose content has sha256 ``digest`` (its shard is done)."""
    entry = _done_entry(store, digest)
    if entry is None:
        raise DataError(f"{store}: no done shard for sha256 {digest}; {RERUN_HINT}")
    with np.load(store / f"{digest}.npz", allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    graphs = WindowGraphs(**{k: arrays[k] for k in _GRAPH_FIELDS})
    return _FileResult(entry["report"], graphs, int(entry["messages"]), arrays[_TIMES])


def _check_shard(index: int, count: int) -> None:
    if count < 1:
        raise ValueError(f"shard count is {count}; expected >= 1")
    if not 0 <= index < count:
        raise ValueError(f"shard index is {index} with shard count {count}; expected 0 <= index < {count}")


def _read_entry(store: Path, digest: str) -> dict[str, Any] | None:
    try:
        entry: dict[str, Any] = json.loads((store / LEDGER_DIR / f"{digest}.json").read_text())
        return entry
    except (OSError, json.JSONDecodeError):
        return None


def _done_entry(store: Path, digest: str) -> dict[str, Any] | None:
    """The ledger entry of ``digest`` when its shard is done (ok, ``.npz`` there), else None."""
    entry = _read_entry(store, digest)
    if entry is None or entry.get("status") != "ok" or entry.get("sha256") != digest:
        return None
    return entry if (store / f"{digest}.npz").is_file() else None


def _save_result(store: Path, digest: str, result: _FileResult) -> None:
    path = store / f"{digest}.npz"
    tmp = unique_temp(path)
    arrays = {k: getattr(result.graphs, k) for k in _GRAPH_FIELDS}
    arrays[_TIMES] = result.times
    try:
        with tmp.open("xb") as fh:
            np.savez(fh, **arrays)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _write_entry(
    store: Path,
    rel: str,
    digest: str,
    status: str,
    seconds: float,
    *,
    result: _FileResult | None = None,
    error: str | None = None,
) -> None:
    entry: dict[str, Any] = {"relpath": rel, "sha256": digest, "status": status}
    if error is not None:
        entry["error"] = error
    if result is not None:
        entry["report"] = result.report
    entry.update(
        messages=None if result is None else result.messages,
        graphs=None if result is None else result.graphs.num_graphs,
        seconds=round(seconds, 3),
        host=socket.gethostname(),
        job=_slurm_job(),
        time=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    )
    write_json(store / LEDGER_DIR / f"{digest}.json", entry)


def _slurm_job() -> str | None:
    array_job, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    if array_job and task:
        return f"{array_job}_{task}"
    return os.environ.get("SLURM_JOB_ID") or None
