"""Graph cache of a data set: build it from raw CAN files (in parallel over files), load it back.

Cache layout, in ``kdgat.paths.cache_dir(dataset)``:

- ``graphs.pt``: one ``dict[str, Tensor]`` in collated form (loaded with
  ``torch.load(weights_only=True, mmap=True)``; 16 tensors, hence 16 storages however many graphs):
  ``x`` float32[N, 11], ``edge_index`` int64[2, E] (local to each graph), ``edge_attr``
  float32[E, 11], ``node_ptr`` / ``edge_ptr`` int64[G+1], ``y`` int64[G], ``attack_type`` int64[G],
  ``split`` uint8[G] (0 train, 1 val, 2 test), ``file_index`` int64[G], ``window_start`` int64[G],
  ``node_mean`` / ``node_std`` float32[10] and ``edge_mean`` / ``edge_std`` float32[11] (the
  normalisation, from benign training windows), ``raw_node_can_id`` int64[N];
- ``vocab.json``: the CAN-ID vocabulary (:class:`~kdgat.data.vocab.CanIdVocab`);
- ``meta.json``: written last; holds the parameter digest, the source-file fingerprints
  (relative path, size, mtime, sha256), the per-file parse reports and the split counts.

A cache is reused when ``meta.json`` names the same parameter digest and the same source files
with the same contents (sha256; recomputed only for files whose size or mtime changed).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import multiprocessing
import os
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from torch.utils.data import Dataset
from torch_geometric.data import Data

from kdgat import paths
from kdgat.data.errors import DataError
from kdgat.data.graphs import (
    NUM_EDGE_FEATURES,
    NUM_NODE_FEATURES,
    WindowGraphs,
    build_window_graphs,
)
from kdgat.data.params import (
    ATTACK_TYPES,
    CACHE_FORMAT_VERSION,
    GraphParams,
    attack_type_of,
    split_of,
)
from kdgat.data.readers import is_can_file, read_can_file
from kdgat.data.vocab import CanIdVocab

log = logging.getLogger("kdgat.data")

GRAPHS_FILE = "graphs.pt"
VOCAB_FILE = "vocab.json"
META_FILE = "meta.json"
SPLIT_CODES = {"train": 0, "val": 1, "test": 2}


# ---------------------------------------------------------------------------------------------
# loaded graphs


class GraphSet(Dataset[Data]):
    """A split: ``len(ds)`` graphs, ``ds[i]`` a :class:`torch_geometric.data.Data` with
    ``x`` float32[n, 11] (column 0 the CAN-ID vocabulary index, integer-valued; 1..10 normalised),
    ``edge_index`` int64[2, e], ``edge_attr`` float32[e, 11], ``y`` int64[1] (1 = attack window),
    ``attack_type`` int64[1] (index into ``ATTACK_TYPES``), ``num_nodes`` = n.

    Tensors are views of the (memory-mapped) cache; ``Data.to()`` replaces attributes on the
    returned object only, so samples are safe to move. ``y`` / ``attack_type`` give the labels of
    the whole split at once (int64[len]); ``subset(idx)`` selects graphs (e.g. for curricula).

    Pickling (DataLoader workers under ``spawn``) sends the cache file's path and the indices, not
    the tensors: each worker memory-maps ``graphs.pt`` itself, once per process.
    """

    def __init__(self, store: dict[str, torch.Tensor], index: torch.Tensor, path: Path | None = None):
        self._store: dict[str, torch.Tensor] | None = store
        self._path = path
        self.index = index.to(torch.long)

    @property
    def store(self) -> dict[str, torch.Tensor]:
        if self._store is None:
            assert self._path is not None
            self._store = _open_store(self._path)
        return self._store

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        if self._path is not None:
            state["_store"] = None
        return state

    def __len__(self) -> int:
        return int(self.index.numel())

    def __getitem__(self, i: int) -> Data:
        if not -len(self) <= i < len(self):
            raise IndexError(f"graph {i} out of range for a split of {len(self)} graphs")
        g = int(self.index[i])
        s = self.store
        a, b = int(s["node_ptr"][g]), int(s["node_ptr"][g + 1])
        c, d = int(s["edge_ptr"][g]), int(s["edge_ptr"][g + 1])
        return Data(
            x=s["x"][a:b],
            edge_index=s["edge_index"][:, c:d],
            edge_attr=s["edge_attr"][c:d],
            y=s["y"][g : g + 1],
            attack_type=s["attack_type"][g : g + 1],
            num_nodes=b - a,
        )

    def __iter__(self) -> Iterator[Data]:
        for i in range(len(self)):
            yield self[i]

    @property
    def y(self) -> torch.Tensor:
        return self.store["y"][self.index]

    @property
    def attack_type(self) -> torch.Tensor:
        return self.store["attack_type"][self.index]

    def subset(self, idx: Sequence[int] | torch.Tensor | npt.NDArray[np.int64]) -> GraphSet:
        return GraphSet(self.store, self.index[torch.as_tensor(idx, dtype=torch.long)], self._path)


@dataclass(frozen=True)
class GraphSplits:
    """The three splits of a cached data set plus what a model needs to know about it."""

    train: GraphSet
    val: GraphSet
    test: GraphSet
    vocab_size: int
    attack_types: tuple[str, ...] = ATTACK_TYPES
    num_node_features: int = NUM_NODE_FEATURES
    num_edge_features: int = NUM_EDGE_FEATURES
    cache_dir: Path = Path()
    meta: dict[str, Any] = field(default_factory=dict)


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


# ---------------------------------------------------------------------------------------------
# building


@dataclass(frozen=True)
class _FileResult:
    report: dict[str, Any]
    graphs: WindowGraphs
    benign_ids: npt.NDArray[np.uint32]
    messages: int


def _build_file(path: str, window_size: int, stride: int, max_malformed: float) -> _FileResult:
    messages, report = read_can_file(path)
    if report.rows and report.malformed > max_malformed * report.rows:
        examples = "; ".join(f"line {n}: {r}: {t!r}" for n, r, t in report.examples[:3])
        raise DataError(
            f"{path}: {report.malformed} of {report.rows} rows are malformed "
            f"(more than max_malformed_fraction={max_malformed}); is it a {report.format} file? "
            f"first: {examples}"
        )
    graphs = build_window_graphs(messages.can_id, messages.payload, messages.label, window_size, stride)
    benign_ids = np.unique(messages.can_id[messages.label == 0])
    return _FileResult(report.to_json(), graphs, benign_ids, len(messages))


def list_sources(raw: Path) -> list[Path]:
    """CAN files of a data set directory, recursively, sorted by relative path (hidden skipped)."""
    if not raw.is_dir():
        raise DataError(
            f"raw data directory {raw} does not exist; put the data set's CAN files there "
            f"(or set {paths.DATA_ROOT_ENV}), or write a synthetic one with `python -m kdgat synth`"
        )
    files = sorted(
        p
        for p in raw.rglob("*")
        if p.is_file()
        and is_can_file(p)
        and not any(part.startswith(".") for part in p.relative_to(raw).parts)
    )
    if not files:
        raise DataError(f"raw data directory {raw} holds no CAN files (*.csv, *.txt, *.log, *.parquet)")
    return files


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def _fingerprint(raw: Path, files: list[Path], previous: dict[str, Any] | None) -> list[dict[str, Any]]:
    known = {s["relpath"]: s for s in (previous or {}).get("sources", [])}
    out = []
    for p in files:
        rel = p.relative_to(raw).as_posix()
        st = p.stat()
        old = known.get(rel)
        same_stat = old is not None and old["size"] == st.st_size and old["mtime_ns"] == st.st_mtime_ns
        digest = old["sha256"] if same_stat and old is not None else _sha256(p)
        out.append({"relpath": rel, "size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": digest})
    return out


def _source_digest(sources: list[dict[str, Any]]) -> str:
    text = json.dumps([[s["relpath"], s["sha256"]] for s in sources])
    return hashlib.sha256(text.encode()).hexdigest()


def _read_meta(cache: Path) -> dict[str, Any] | None:
    try:
        meta: dict[str, Any] = json.loads((cache / META_FILE).read_text())
        return meta
    except (OSError, json.JSONDecodeError):
        return None


@contextlib.contextmanager
def _locked(cache: Path) -> Iterator[None]:
    # Array jobs may preprocess the same data set at once: one builds, the others then reuse.
    cache.mkdir(parents=True, exist_ok=True)
    with (cache / ".lock").open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def preprocess_dataset(
    dataset: str,
    params: GraphParams | None = None,
    *,
    workers: int = 1,
    raw: Path | None = None,
    cache: Path | None = None,
    force: bool = False,
) -> CacheInfo:
    """Build or refresh the graph cache of ``dataset``.

    Reads every CAN file under ``raw`` (default ``paths.raw_dir(dataset)``) with up to ``workers``
    processes, builds window graphs, the vocabulary and the normalisation, and writes the cache to
    ``cache`` (default ``paths.cache_dir(dataset)``). When the cache already matches the parameters
    and the files, nothing is rebuilt (``CacheInfo.hit``). Raises :class:`DataError` for a missing
    directory, a file with too many malformed rows, or a data set without benign training windows.
    """
    params = params or GraphParams()
    if workers < 1:
        raise ValueError(f"workers is {workers}; expected >= 1")
    raw = Path(raw) if raw is not None else paths.raw_dir(dataset)
    cache = Path(cache) if cache is not None else paths.cache_dir(dataset)
    started = time.perf_counter()
    if not raw.exists():
        # On a compute node only the staged cache may be there: use it when it fits the params.
        meta = _read_meta(cache)
        if (
            meta is not None
            and meta.get("params_digest") == params.digest()
            and (cache / GRAPHS_FILE).is_file()
        ):
            log.warning(
                "raw data directory %s does not exist; using the graph cache at %s as it is "
                "(built from %s, source files not re-checked)",
                raw,
                cache,
                meta.get("raw_dir"),
            )
            return _info(cache, meta, hit=True, seconds=time.perf_counter() - started)
    files = list_sources(raw)
    with _locked(cache):
        previous = _read_meta(cache)
        sources = _fingerprint(raw, files, previous)
        source_digest = _source_digest(sources)
        if (
            not force
            and previous is not None
            and previous.get("params_digest") == params.digest()
            and previous.get("source_digest") == source_digest
            and (cache / GRAPHS_FILE).is_file()
        ):
            if previous["sources"] != sources:  # contents equal, stat changed: remember new stat
                _write_json(cache / META_FILE, {**previous, "sources": sources})
            log.info("graph cache of %s is up to date: %s", dataset, cache)
            return _info(cache, previous, hit=True, seconds=time.perf_counter() - started)
        (cache / META_FILE).unlink(missing_ok=True)
        meta = _build(dataset, params, raw, files, sources, source_digest, cache, workers)
        info = _info(cache, meta, hit=False, seconds=time.perf_counter() - started)
        log.info("%s", info.summary())
        return info


def _run_files(files: list[Path], params: GraphParams, workers: int) -> list[_FileResult]:
    args = [(str(p), params.window_size, params.stride, params.max_malformed_fraction) for p in files]
    if workers == 1 or len(files) == 1:
        return [_build_file(*a) for a in args]
    # fork: the workers only run numpy/pyarrow code, and fork avoids re-importing torch per worker.
    ctx = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(max_workers=min(workers, len(files)), mp_context=ctx) as pool:
        futures = [pool.submit(_build_file, *a) for a in args]
        return [f.result() for f in futures]


def _build(
    dataset: str,
    params: GraphParams,
    raw: Path,
    files: list[Path],
    sources: list[dict[str, Any]],
    source_digest: str,
    cache: Path,
    workers: int,
) -> dict[str, Any]:
    results = _run_files(files, params, workers)
    for r in results:
        rep = r.report
        if rep["malformed"]:
            log.warning(
                "%s: %d of %d rows malformed (%s)",
                rep["path"],
                rep["malformed"],
                rep["rows"],
                rep["reasons"],
            )
    rel = [p.relative_to(raw).as_posix() for p in files]
    file_split = [split_of(r) for r in rel]
    vocab = CanIdVocab.build([r.benign_ids for r, s in zip(results, file_split, strict=True) if s == "train"])

    graphs = WindowGraphs.concat([r.graphs for r in results])
    per_file = [r.graphs.num_graphs for r in results]
    file_index = np.repeat(np.arange(len(files), dtype=np.int64), per_file)
    file_attack = np.array([attack_type_of(r) for r in rel], np.int64)
    attack_type = np.where(graphs.y == 1, file_attack[file_index] if len(file_index) else 0, 0)

    split = np.array([SPLIT_CODES[file_split[f]] for f in file_index], np.uint8)
    rng = np.random.default_rng(params.split_seed)
    train_idx = rng.permutation(np.flatnonzero(split == 0))
    n_train = len(train_idx)
    n_test = 0 if "test" in file_split else round(params.test_fraction * n_train)
    n_val = round(params.val_fraction * n_train)
    split[train_idx[:n_test]] = 2
    split[train_idx[n_test : n_test + n_val]] = 1

    x = graphs.x.copy()
    x[:, 0] = vocab.index(graphs.node_can_id)
    nodes_per_graph = np.diff(graphs.node_ptr)
    edges_per_graph = np.diff(graphs.edge_ptr)
    benign_train = (split == 0) & (graphs.y == 0)
    if not benign_train.any():
        raise DataError(
            f"data set {dataset} ({raw}) has no benign training window of {params.window_size} "
            "messages: the normalisation statistics need some (are all training files attack-only "
            "or shorter than one window?)"
        )
    node_rows = np.repeat(benign_train, nodes_per_graph)
    edge_rows = np.repeat(benign_train, edges_per_graph)
    node_mean, node_std = _moments(x[node_rows, 1:])
    edge_mean, edge_std = _moments(graphs.edge_attr[edge_rows])
    x[:, 1:] = (x[:, 1:] - node_mean) / node_std
    edge_attr = (graphs.edge_attr - edge_mean) / edge_std

    store = {
        "x": torch.from_numpy(np.ascontiguousarray(x, np.float32)),
        "edge_index": torch.from_numpy(np.ascontiguousarray(graphs.edge_index)),
        "edge_attr": torch.from_numpy(np.ascontiguousarray(edge_attr, np.float32)),
        "node_ptr": torch.from_numpy(graphs.node_ptr),
        "edge_ptr": torch.from_numpy(graphs.edge_ptr),
        "y": torch.from_numpy(graphs.y),
        "attack_type": torch.from_numpy(attack_type.astype(np.int64)),
        "split": torch.from_numpy(split),
        "file_index": torch.from_numpy(file_index),
        "window_start": torch.from_numpy(graphs.window_start),
        "raw_node_can_id": torch.from_numpy(graphs.node_can_id.astype(np.int64)),
        "node_mean": torch.from_numpy(node_mean.astype(np.float32)),
        "node_std": torch.from_numpy(node_std.astype(np.float32)),
        "edge_mean": torch.from_numpy(edge_mean.astype(np.float32)),
        "edge_std": torch.from_numpy(edge_std.astype(np.float32)),
    }
    tmp = cache / (GRAPHS_FILE + ".tmp")
    torch.save(store, tmp)
    os.replace(tmp, cache / GRAPHS_FILE)
    vocab.save(cache / VOCAB_FILE)

    names = {v: k for k, v in SPLIT_CODES.items()}
    meta: dict[str, Any] = {
        "format_version": CACHE_FORMAT_VERSION,
        "dataset": dataset,
        "raw_dir": str(raw),
        "params": params.to_json(),
        "params_digest": params.digest(),
        "source_digest": source_digest,
        "sources": sources,
        "files": [
            {**r.report, "path": rp, "split": s, "graphs": r.graphs.num_graphs}
            for r, rp, s in zip(results, rel, file_split, strict=True)
        ],
        "messages": int(sum(r.messages for r in results)),
        "vocab_size": vocab.size,
        "attack_types": list(ATTACK_TYPES),
        "graphs": {names[c]: int((split == c).sum()) for c in range(3)},
        "attack_graphs": {names[c]: int(((split == c) & (graphs.y == 1)).sum()) for c in range(3)},
        "node_features": {"mean": node_mean.tolist(), "std": node_std.tolist()},
        "edge_features": {"mean": edge_mean.tolist(), "std": edge_std.tolist()},
    }
    _write_json(cache / META_FILE, meta)
    return meta


def _moments(a: npt.NDArray[np.float32]) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    a64 = a.astype(np.float64)
    mean = a64.mean(axis=0)
    std = a64.std(axis=0)
    return mean, np.where(std > 1e-12, std, 1.0)


def _write_json(path: Path, doc: dict[str, Any]) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n")
    os.replace(tmp, path)


def _info(cache: Path, meta: dict[str, Any], *, hit: bool, seconds: float) -> CacheInfo:
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


# ---------------------------------------------------------------------------------------------
# loading

_OPEN_STORES: dict[tuple[str, int, int], dict[str, torch.Tensor]] = {}


def _open_store(path: Path) -> dict[str, torch.Tensor]:
    """``graphs.pt`` memory-mapped, once per process and file version."""
    st = path.stat()
    key = (str(path.resolve()), st.st_mtime_ns, st.st_size)
    if key not in _OPEN_STORES:
        _OPEN_STORES[key] = torch.load(path, weights_only=True, mmap=True)
    return _OPEN_STORES[key]


def load_graphs(
    dataset: str,
    params: GraphParams | None = None,
    *,
    cache: Path | None = None,
    mmap: bool = True,
) -> GraphSplits:
    """Load the cached graphs of ``dataset`` (``paths.cache_dir(dataset)`` unless ``cache``).

    Raises :class:`DataError` naming the preprocess command when there is no cache or when it was
    built with other parameters than ``params``. The raw files are not needed (a cache staged to
    node-local disk loads on its own)."""
    params = params or GraphParams()
    cache = Path(cache) if cache is not None else paths.cache_dir(dataset)
    meta = _read_meta(cache)
    hint = f"run `python -m kdgat preprocess --dataset {dataset}` first"
    if meta is None or not (cache / GRAPHS_FILE).is_file():
        raise DataError(f"no graph cache for data set {dataset} at {cache}: {hint}")
    if meta.get("params_digest") != params.digest():
        raise DataError(
            f"graph cache at {cache} was built with parameters {meta.get('params')} "
            f"(format {meta.get('format_version')}), not the requested {params.to_json()} "
            f"(format {CACHE_FORMAT_VERSION}): {hint}"
        )
    path = cache / GRAPHS_FILE
    store = _open_store(path) if mmap else torch.load(path, weights_only=True)
    split = store["split"]
    sets = {
        name: GraphSet(store, torch.nonzero(split == code, as_tuple=False).flatten(), path if mmap else None)
        for name, code in SPLIT_CODES.items()
    }
    return GraphSplits(
        train=sets["train"],
        val=sets["val"],
        test=sets["test"],
        vocab_size=int(meta["vocab_size"]),
        attack_types=tuple(meta["attack_types"]),
        cache_dir=cache,
        meta=meta,
    )
