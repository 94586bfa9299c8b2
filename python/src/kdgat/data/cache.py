"""The graph cache of a data set on disk: its files, the fingerprint of its source files, its lock and
its ``meta.json``. Built by :mod:`kdgat.data.build`, loaded by :mod:`kdgat.data.dataset`.

Cache layout, in ``kdgat.paths.cache_dir(dataset)``:

- ``graphs.pt``: one ``dict[str, Tensor]`` in collated form (loaded with
  ``torch.load(weights_only=True, mmap=True)``; 17 tensors, hence 17 storages however many graphs):
  ``x`` float32[N, F] (F = 11, or 17 for the payload features), ``edge_index`` int64[2, E] (local
  to each graph), ``edge_attr`` float32[E, 11], ``node_ptr`` / ``edge_ptr`` int64[G+1], ``y``
  int64[G], ``attack_type`` int64[G],
  ``split`` uint8[G] (0 train, 1 val, 2 test), ``file_index`` int64[G], ``window_start`` int64[G],
  ``window_times`` float64[G, 4] (seconds: the window's first message, its last, its first injected
  message or +inf, its verdict time — the last message its features read, :mod:`kdgat.data.verdict`),
  ``node_mean`` / ``node_std`` float32[F - 1] and ``edge_mean`` / ``edge_std`` float32[11] (the
  normalisation, from benign training windows), ``raw_node_can_id`` int64[N];
- ``vocab.json``: the CAN-ID vocabulary (:class:`~kdgat.data.vocab.CanIdVocab`);
- ``meta.json``: written last; holds the parameter digest, the source-file fingerprints
  (relative path, size, mtime, sha256), the per-file parse reports and the split counts;
- ``shards/<params digest>/``: only where the cache was built by a sharded preprocess (an array of
  tasks, then one join; :mod:`kdgat.data.shards`): per source file, keyed by its content's sha256,
  ``<sha256>.npz`` (its window graphs and benign CAN IDs) and ``ledger/<sha256>.json`` (ok or
  failed, with the error; written after the ``.npz``). The join reads them instead of the raw files.

A cache is reused when ``meta.json`` names the same parameter digest and the same source files
with the same contents (sha256; recomputed only for files whose size or mtime changed).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import socket
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

GRAPHS_FILE = "graphs.pt"
VOCAB_FILE = "vocab.json"
META_FILE = "meta.json"
SPLIT_CODES = {"train": 0, "val": 1, "test": 2}


@dataclass(frozen=True)
class CacheInfo:
    """Outcome of :func:`preprocess_dataset`. ``hit`` is True when the cache was reused.
    ``files`` are the per-file parse reports (rows, parsed, malformed, reasons, examples)."""

    path: Path
    hit: bool
    params_digest: str
    source_digest: str
    files: list[dict[str, Any]]
    graphs: dict[str, int]
    attack_graphs: dict[str, int]
    vocab_size: int
    messages: int
    seconds: float

    def summary(self) -> str:
        state = "reused" if self.hit else "built"
        lines = [
            f"graph cache {state}: {self.path} ({self.messages} messages, vocab {self.vocab_size}, "
            + ", ".join(f"{k} {v} graphs ({self.attack_graphs[k]} attack)" for k, v in self.graphs.items())
            + f", {self.seconds:.1f}s)"
        ]
        for f in self.files:
            line = f"  {f['path']}: {f['parsed']}/{f['rows']} rows"
            if f["malformed"]:
                line += f", {f['malformed']} malformed: " + ", ".join(
                    f"{k} {v}" for k, v in f["reasons"].items()
                )
            lines.append(line)
        return "\n".join(lines)


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def fingerprint(raw: Path, files: list[Path], previous: dict[str, Any] | None) -> list[dict[str, Any]]:
    known = {s["relpath"]: s for s in (previous or {}).get("sources", [])}
    out = []
    for p in files:
        rel = p.relative_to(raw).as_posix()
        st = p.stat()
        old = known.get(rel)
        same_stat = old is not None and old["size"] == st.st_size and old["mtime_ns"] == st.st_mtime_ns
        digest = old["sha256"] if same_stat and old is not None else sha256_of(p)
        out.append({"relpath": rel, "size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": digest})
    return out


def sources_digest(sources: list[dict[str, Any]]) -> str:
    text = json.dumps([[s["relpath"], s["sha256"]] for s in sources])
    return hashlib.sha256(text.encode()).hexdigest()


def read_meta(cache: Path) -> dict[str, Any] | None:
    try:
        meta: dict[str, Any] = json.loads((cache / META_FILE).read_text())
        return meta
    except (OSError, json.JSONDecodeError):
        return None


@contextlib.contextmanager
def locked(cache: Path) -> Iterator[None]:
    # Array jobs may preprocess the same data set at once: one builds, the others then reuse.
    cache.mkdir(parents=True, exist_ok=True)
    with (cache / ".lock").open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def write_json(path: Path, doc: dict[str, Any]) -> None:
    """Writes ``path`` atomically: a temp file of this writer's own in the same folder (several
    writers, on several nodes, may write the same path), then ``os.replace``."""
    tmp = unique_temp(path)
    try:
        tmp.write_text(json.dumps(doc, indent=1) + "\n")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def unique_temp(path: Path) -> Path:
    """A temp name beside ``path`` no other writer uses (host, process, random), hidden."""
    return path.with_name(f".{path.name}.{socket.gethostname()}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")


def cache_info(cache: Path, meta: dict[str, Any], *, hit: bool, seconds: float) -> CacheInfo:
    return CacheInfo(
        path=cache,
        hit=hit,
        params_digest=meta["params_digest"],
        source_digest=meta["source_digest"],
        files=meta["files"],
        graphs=meta["graphs"],
        attack_graphs=meta["attack_graphs"],
        vocab_size=meta["vocab_size"],
        messages=meta["messages"],
        seconds=seconds,
    )
