"""The catalogue on disk: a folder of Parquet files, one row each, that any Parquet reader takes as one
table (``pyarrow.dataset.dataset(dir)``, ``pandas.read_parquet(dir)``, DuckDB's
``read_parquet('<dir>/*.parquet')``).

Appending is safe when many jobs finish at once, on a shared filesystem too: each row is its own file,
written under a hidden temporary name (``.<name>.<pid>.<random>.tmp``: readers skip it) and renamed
into place (``rename(2)`` is atomic), so a reader sees a whole file or none, and no two writers share
a file. A row's file name comes from its stage run (``<stage>-<task>-<row key>.parquet``): a stage
that ends again (a resubmission after a failure) replaces its row. Readers keep the newest row of each
``row_key`` (after :func:`compact`, a key's older row may sit in a merged ``part-*.parquet``).

Compaction as rows accumulate: after its row, a writer that finds :data:`LOOSE_LIMIT` one-row files or
more merges them into one ``part-*.parquet`` under the catalogue's lock (taken without waiting: when
another writer holds it, that one compacts), then merges the parts of a size class once there are
:data:`FAN_IN` of them (a part of ``r`` rows is in class ``floor(log_FAN_IN(r / LOOSE_LIMIT))``). So a
folder holds at most ``LOOSE_LIMIT - 1`` loose rows and ``FAN_IN - 1`` parts per class (about a hundred
files at 100,000 rows), each row is rewritten about once per class, and a part, once written, is never
changed (a copy of the folder brings back only new files). :func:`compact` merges everything into one.
"""

from __future__ import annotations

import fcntl
import logging
import os
import secrets
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from kdgat.catalogue.schema import SCHEMA

log = logging.getLogger("kdgat.catalogue")

PART_PREFIX = "part-"
LOCK_FILE = ".compact.lock"
#: A writer compacts once the folder holds this many one-row files.
LOOSE_LIMIT = 64
#: Parts of one size class merged together (see the module doc).
FAN_IN = 8
#: The most one-row files one writer merges at a time (a folder written before compaction existed
#: catches up over the next writes; ``catalogue-compact`` merges it at once).
MAX_MERGE = 4096
#: Temporary files older than this are a killed writer's, removed by the next compaction.
STALE_S = 3600.0


def row_file_name(row: dict[str, Any]) -> str:
    task = (
        f"point{row['point_index']}"
        if row.get("point_index") is not None
        else f"trial{row['trial']}"
        if row.get("trial") is not None
        else "run"
    )
    stage = "".join(c if c.isalnum() or c in "._-" else "_" for c in str(row.get("stage_id") or "stage"))
    return f"{stage}-{task}-{row['row_key']}.parquet"


def _write_atomically(table: pa.Table, path: Path) -> None:
    tmp = path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    try:
        pq.write_table(table, tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_row(catalogue: Path, row: dict[str, Any], *, compact_at: int | None = LOOSE_LIMIT) -> Path:
    """Writes one row as its own file in ``catalogue`` (made when missing); returns the file.

    ``compact_at``: then compacts when the folder holds that many one-row files or more and no other
    writer is compacting (see the module doc); None: never. A compaction that fails leaves the row
    written (it is retried by a later writer)."""
    catalogue.mkdir(parents=True, exist_ok=True)
    path = catalogue / row_file_name(row)
    _write_atomically(pa.Table.from_pylist([row], schema=SCHEMA), path)
    if compact_at is not None:
        try:
            compact_as_rows_accumulate(catalogue, loose_limit=compact_at)
        except Exception as e:  # the row is written: a merge that fails is a later writer's to retry
            log.warning("catalogue %s: not compacted: %s: %s", catalogue, type(e).__name__, e)
    return path


def _files(catalogue: Path) -> list[Path]:
    return sorted(p for p in catalogue.glob("*.parquet") if not p.name.startswith("."))


def _at_least_loose(catalogue: Path, n: int) -> bool:
    """Whether the folder holds ``n`` one-row files or more (a look at the names, stopping at ``n``)."""
    seen = 0
    with os.scandir(catalogue) as entries:
        for e in entries:
            name = e.name
            if name.endswith(".parquet") and not name.startswith((".", PART_PREFIX)):
                seen += 1
                if seen >= n:
                    return True
    return False


def _loose(files: list[Path]) -> list[Path]:
    return [p for p in files if not p.name.startswith(PART_PREFIX)]


def _newest_per_key(table: pa.Table) -> pa.Table:
    """One row per row_key: the newest (finished_at; the later file on a tie), in the files' order."""
    n = table.num_rows
    if n <= 1 or pc.count_distinct(table.column("row_key"), mode="all").as_py() == n:
        return table  # no stage run twice: every row is its key's newest
    order = pc.sort_indices(
        pa.table(
            {
                "k": table.column("row_key"),
                "t": table.column("finished_at"),
                "i": pa.array(np.arange(n, dtype=np.int64)),
            }
        ),
        sort_keys=[
            ("k", "ascending", "at_start"),
            ("t", "ascending", "at_start"),
            ("i", "ascending", "at_start"),
        ],
    )
    keys = table.column("row_key").take(order)
    # The last of each run of one key in that order is its newest row.
    last = pc.not_equal(keys.slice(0, n - 1), keys.slice(1, n - 1)).combine_chunks()
    keep = pc.fill_null(pa.concat_arrays([last, pa.array([True])]), True)
    newest = order.filter(keep)
    return table.take(pc.take(newest, pc.sort_indices(newest)))


def _schema_of(columns: Sequence[str] | None) -> pa.Schema:
    """The contract's schema, or the named columns of it (in the contract's order)."""
    if columns is None:
        return SCHEMA
    wanted = set(columns)
    return pa.schema([f for f in SCHEMA if f.name in wanted], metadata=SCHEMA.metadata)


def _read_files(files: list[Path], schema: pa.Schema = SCHEMA) -> pa.Table:
    """The files as one table of ``schema``'s columns (a column a file lacks reads as null), in the
    order given, file by file."""
    tables = []
    for f in files:
        with pq.ParquetFile(f) as pf:
            names = set(pf.schema_arrow.names)
            t = pf.read(columns=[c for c in schema.names if c in names])
        if not t.schema.equals(schema):
            t = pa.Table.from_arrays(
                [
                    t.column(field.name).cast(field.type)
                    if field.name in t.column_names
                    else pa.nulls(t.num_rows, field.type)
                    for field in schema
                ],
                schema=schema,
            )
        tables.append(t.replace_schema_metadata(schema.metadata))
    return pa.concat_tables(tables) if tables else schema.empty_table()


def read_table(catalogue: Path, *, columns: Sequence[str] | None = None, attempts: int = 5) -> pa.Table:
    """The catalogue as one table (the contract's columns, or those of ``columns`` that are the
    contract's; files written before a column existed read it as null), one row per stage run.
    Empty when the folder does not exist."""
    schema = _schema_of(None if columns is None else [*columns, "row_key", "finished_at"])
    for attempt in range(attempts):
        files = _files(catalogue) if catalogue.is_dir() else []
        if not files:
            return schema.empty_table()
        try:
            table = _read_files(files, schema)
        except FileNotFoundError:
            # A compaction merged and removed a file between the listing and the read: list again.
            if attempt == attempts - 1:
                raise
            time.sleep(0.05 * (attempt + 1))
            continue
        return _newest_per_key(table)
    raise AssertionError("unreachable")


def read_rows(catalogue: Path) -> list[dict[str, Any]]:
    return read_table(catalogue).to_pylist()


def recorded_state(catalogue: Path, row: dict[str, Any]) -> str | None:
    """The state the catalogue holds for this row's stage run, if any (its own file, else a merged part)."""
    own = catalogue / row_file_name(row)
    newest: tuple[datetime, str] | None = None
    read: set[str] = set()
    # Twice: a compaction may merge the row's own file into a new part between the look and the read.
    for _ in range(2):
        candidates = (
            [own] if own.is_file() else [p for p in _files(catalogue) if p.name.startswith(PART_PREFIX)]
        )
        for path in candidates:
            if path.name in read and path != own:
                continue
            read.add(path.name)
            try:
                with pq.ParquetFile(path) as pf:
                    t = pf.read(columns=["row_key", "state", "finished_at"])
            except FileNotFoundError:
                continue
            for r in t.filter(pc.equal(t.column("row_key"), row["row_key"])).to_pylist():
                when = r["finished_at"] or datetime.min.replace(tzinfo=UTC)
                if newest is None or when >= newest[0]:
                    newest = (when, r["state"])
        if newest is not None:
            break
    return newest[1] if newest else None


@contextmanager
def _locked(catalogue: Path, *, wait: bool = True) -> Iterator[bool]:
    """Holds the catalogue's lock; yields False (holding nothing) when ``wait`` is False and another
    process holds it."""
    with open(catalogue / LOCK_FILE, "a+") as f:
        try:
            fcntl.lockf(f, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except (BlockingIOError, PermissionError):
            yield False
            return
        try:
            yield True
        finally:
            fcntl.lockf(f, fcntl.LOCK_UN)


def _merge(catalogue: Path, files: list[Path]) -> Path:
    """Writes the newest row per key of ``files`` as one new part and removes them (the caller holds
    the lock). A one-row file a writer replaced since it was read stays (its row is the newer)."""
    seen = {f: os.stat(f).st_ino for f in files}
    table = _newest_per_key(_read_files(files))
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    merged = catalogue / f"{PART_PREFIX}{stamp}-{secrets.token_hex(4)}.parquet"
    _write_atomically(table, merged)
    for f, inode in seen.items():
        _remove_if_unchanged(f, inode)
    return merged


def compact(catalogue: Path) -> tuple[int, Path | None]:
    """Merges every file of ``catalogue`` into one ``part-<utc>-<random>.parquet`` (the newest row of
    each stage run), under a lock: returns (files merged, the merged file). Writers may go on
    meanwhile: a row file replaced after it was read is kept, and readers take its newer row."""
    if not catalogue.is_dir():
        return 0, None
    with _locked(catalogue):
        _remove_stale(catalogue)
        files = _files(catalogue)
        if len(files) <= 1:
            return 0, None
        return len(files), _merge(catalogue, files)


def size_class(rows: int, *, loose_limit: int = LOOSE_LIMIT, fan_in: int = FAN_IN) -> int:
    """The class of a part of ``rows`` rows: 0 below ``loose_limit * fan_in`` rows, then one more per
    factor ``fan_in``."""
    k, bound = 0, loose_limit * fan_in
    while rows >= bound:
        k, bound = k + 1, bound * fan_in
    return k


def compact_as_rows_accumulate(
    catalogue: Path, *, loose_limit: int = LOOSE_LIMIT, fan_in: int = FAN_IN
) -> list[Path]:
    """What a writer does after its row (see the module doc): with ``loose_limit`` one-row files or
    more, merges them (at most :data:`MAX_MERGE`) into a part, then the parts of the smallest class
    that has ``fan_in`` of them, and so on up; nothing when another process holds the lock. Returns
    the parts written."""
    if not _at_least_loose(catalogue, loose_limit):
        return []
    written: list[Path] = []
    with _locked(catalogue, wait=False) as held:
        if not held:
            return []
        _remove_stale(catalogue)
        loose = _loose(_files(catalogue))  # again, under the lock: another writer may have merged them
        if len(loose) >= loose_limit:
            written.append(_merge(catalogue, loose[:MAX_MERGE]))
        while True:
            classes: dict[int, list[Path]] = {}
            for p in _files(catalogue):
                if p.name.startswith(PART_PREFIX):
                    rows = pq.read_metadata(p).num_rows
                    classes.setdefault(size_class(rows, loose_limit=loose_limit, fan_in=fan_in), []).append(p)
            full = sorted(k for k, parts in classes.items() if len(parts) >= fan_in)
            if not full:
                return written
            written.append(_merge(catalogue, classes[full[0]]))


def _remove_stale(catalogue: Path) -> None:
    """A killed writer's temporary files (hidden ``*.tmp`` and ``*.merged``, older than :data:`STALE_S`)."""
    cutoff = time.time() - STALE_S
    for p in catalogue.glob(".*"):
        if p.name.endswith((".tmp", ".merged")):
            with suppress(OSError):
                if p.stat().st_mtime < cutoff:
                    p.unlink()


def _remove_if_unchanged(path: Path, inode: int) -> None:
    """Removes the file merged, not a newer one a writer renamed over it since."""
    aside = path.parent / f".{path.name}.{secrets.token_hex(4)}.merged"
    try:
        os.rename(path, aside)
    except FileNotFoundError:
        return
    if os.stat(aside).st_ino != inode:
        # A newer row took the name after the merge read it: put it back (unless a newer one still came).
        with suppress(FileExistsError):
            os.link(aside, path)
    aside.unlink()
