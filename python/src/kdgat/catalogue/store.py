"""The catalogue on disk: a folder of Parquet files, one row each, that any Parquet reader takes as one
table (``pyarrow.dataset.dataset(dir)``, ``pandas.read_parquet(dir)``, DuckDB's
``read_parquet('<dir>/*.parquet')``).

Appending is safe when many jobs finish at once, on a shared filesystem too: each row is its own file,
written under a hidden temporary name (``.<name>.<pid>.<random>.tmp``: readers skip it) and renamed
into place (``rename(2)`` is atomic), so a reader sees a whole file or none, and no two writers share
a file. A row's file name comes from its stage run (``<stage>-<task>-<row key>.parquet``): a stage
that ends again (a resubmission after a failure) replaces its row. Readers keep the newest row of each
``row_key`` (after :func:`compact`, a key's older row may sit in a merged ``part-*.parquet``).
"""

from __future__ import annotations

import fcntl
import os
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from kdgat.catalogue.schema import SCHEMA

PART_PREFIX = "part-"
LOCK_FILE = ".compact.lock"


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


def write_row(catalogue: Path, row: dict[str, Any]) -> Path:
    """Writes one row as its own file in ``catalogue`` (made when missing); returns the file."""
    catalogue.mkdir(parents=True, exist_ok=True)
    path = catalogue / row_file_name(row)
    _write_atomically(pa.Table.from_pylist([row], schema=SCHEMA), path)
    return path


def _files(catalogue: Path) -> list[Path]:
    return sorted(p for p in catalogue.glob("*.parquet") if not p.name.startswith("."))


def _newest_per_key(table: pa.Table) -> pa.Table:
    """One row per row_key: the newest (finished_at; the later file on a tie)."""
    if table.num_rows <= 1:
        return table
    keys = table.column("row_key").to_pylist()
    times = table.column("finished_at").to_pylist()
    best: dict[Any, int] = {}
    for i, (k, t) in enumerate(zip(keys, times, strict=True)):
        j = best.get(k)
        if j is None or (t or datetime.min.replace(tzinfo=UTC)) >= (
            times[j] or datetime.min.replace(tzinfo=UTC)
        ):
            best[k] = i
    return table.take(sorted(best.values()))


def read_table(catalogue: Path, *, attempts: int = 5) -> pa.Table:
    """The catalogue as one table (the contract's columns; files written before a column existed
    read it as null), one row per stage run. Empty when the folder does not exist."""
    for attempt in range(attempts):
        files = _files(catalogue) if catalogue.is_dir() else []
        if not files:
            return SCHEMA.empty_table()
        try:
            table = ds.dataset([str(f) for f in files], format="parquet", schema=SCHEMA).to_table()
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
    candidates = [own] if own.is_file() else [p for p in _files(catalogue) if p.name.startswith(PART_PREFIX)]
    newest: tuple[datetime, str] | None = None
    for path in candidates:
        try:
            t = pq.read_table(path, columns=["row_key", "state", "finished_at"])
        except FileNotFoundError:
            continue
        for r in t.to_pylist():
            if r["row_key"] == row["row_key"]:
                when = r["finished_at"] or datetime.min.replace(tzinfo=UTC)
                if newest is None or when >= newest[0]:
                    newest = (when, r["state"])
    return newest[1] if newest else None


@contextmanager
def _locked(catalogue: Path) -> Iterator[None]:
    with open(catalogue / LOCK_FILE, "a+") as f:
        fcntl.lockf(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.lockf(f, fcntl.LOCK_UN)


def compact(catalogue: Path) -> tuple[int, Path | None]:
    """Merges every file of ``catalogue`` into one ``part-<utc>-<random>.parquet`` (the newest row of
    each stage run), under a lock: returns (files merged, the merged file). Writers may go on
    meanwhile: a row file replaced after it was read is kept, and readers take its newer row."""
    if not catalogue.is_dir():
        return 0, None
    with _locked(catalogue):
        files = _files(catalogue)
        if len(files) <= 1:
            return 0, None
        seen = {f: os.stat(f).st_ino for f in files}
        table = _newest_per_key(
            ds.dataset([str(f) for f in files], format="parquet", schema=SCHEMA).to_table()
        )
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
        merged = catalogue / f"{PART_PREFIX}{stamp}-{secrets.token_hex(4)}.parquet"
        _write_atomically(table, merged)
        for f, inode in seen.items():
            _remove_if_unchanged(f, inode)
        return len(files), merged


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
