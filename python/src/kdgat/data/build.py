"""Building the graph cache of a data set from its raw CAN files, in parallel over files: window
graphs, the CAN-ID vocabulary, the splits and the normalisation (the layout: :mod:`kdgat.data.cache`).
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from kdgat import paths
from kdgat.data.cache import (
    GRAPHS_FILE,
    META_FILE,
    SPLIT_CODES,
    VOCAB_FILE,
    CacheInfo,
    cache_info,
    fingerprint,
    locked,
    read_meta,
    sources_digest,
    write_json,
)
from kdgat.data.calibration import calibrate_rows, standardise
from kdgat.data.calibration import moments as _moments
from kdgat.data.errors import DataError
from kdgat.data.features_payload import PAYLOAD_NODE_FEATURES, payload_features, payload_profile
from kdgat.data.features_vi import (
    VI_EDGE_FEATURES,
    VI_NODE_FEATURES,
    previous_occurrence,
    vehicle_independent_features,
)
from kdgat.data.graphs import EDGE_FEATURES, WindowGraphs, build_window_graphs, build_window_graphs_indexed
from kdgat.data.params import (
    ATTACK_TYPES,
    CACHE_FORMAT_VERSION,
    GraphParams,
    attack_type_of,
    node_feature_names,
    split_of,
)
from kdgat.data.readers import is_can_file, read_can_file
from kdgat.data.verdict import profile_head, verdict_messages, verdict_times
from kdgat.data.vocab import CanIdVocab

log = logging.getLogger("kdgat.data")


#: The columns of the cache's ``window_times`` (float64[G, 4], seconds, per window).
WINDOW_TIME_COLUMNS: tuple[str, ...] = ("first", "last", "attack", "verdict")


@dataclass(frozen=True)
class _FileResult:
    report: dict[str, Any]
    graphs: WindowGraphs
    messages: int
    #: float64[G, 4] per window: its first and last message's timestamp, its first injected
    #: message's (+inf without one) and its verdict time (:mod:`kdgat.data.verdict`)
    times: np.ndarray


def _window_times(messages: Any, graphs: WindowGraphs, window_size: int, verdict: np.ndarray) -> np.ndarray:
    """The ``window_times`` rows of one file's windows (``WINDOW_TIME_COLUMNS``)."""
    from kdgat.scoring.events import window_times  # numpy only; kdgat.scoring builds on kdgat.data

    t_first, t_last, t_attack = window_times(
        messages.timestamp, messages.label, graphs.window_start, window_size
    )
    # no injected message: +inf (never), so that equal caches compare equal (nan != nan)
    t_attack = np.where(np.isnan(t_attack), np.inf, t_attack)
    return np.stack([t_first, t_last, t_attack, verdict_times(messages.timestamp, verdict)], axis=1)


def _build_file(
    path: str,
    window_size: int,
    stride: int,
    max_malformed: float,
    features: str = "paper",
    history: int = 1000,
    profile_windows: int = 20,
    calibration_windows: int = 0,
) -> _FileResult:
    messages, report = read_can_file(path)
    if report.rows and report.malformed > max_malformed * report.rows:
        examples = "; ".join(f"line {n}: {r}: {t!r}" for n, r, t in report.examples[:3])
        raise DataError(
            f"{path}: {report.malformed} of {report.rows} rows are malformed "
            f"(more than max_malformed_fraction={max_malformed}); is it a {report.format} file? "
            f"first: {examples}"
        )
    if features == "paper":
        graphs = build_window_graphs(messages.can_id, messages.payload, messages.label, window_size, stride)
        verdict = verdict_messages(
            can_id=messages.can_id,
            timestamp=messages.timestamp,
            window_start=graphs.window_start,
            window_size=window_size,
            features=features,
            calibration_windows=calibration_windows,
        )
        return _FileResult(
            report.to_json(), graphs, len(messages), _window_times(messages, graphs, window_size, verdict)
        )
    # the other feature sets reuse where the graphs put each message and transition, and one
    # previous-occurrence pass over the stream
    graphs, index = build_window_graphs_indexed(
        messages.can_id, messages.payload, messages.label, window_size, stride
    )
    previous = previous_occurrence(messages.can_id)
    graphs = vehicle_independent_features(
        graphs,
        timestamp=messages.timestamp,
        can_id=messages.can_id,
        dlc=messages.dlc,
        payload=messages.payload,
        window_size=window_size,
        history=history,
        index=index,
        previous=previous,
        extra_columns=len(PAYLOAD_NODE_FEATURES) - len(VI_NODE_FEATURES) if features == "payload" else 0,
    )
    profile, head = None, 0
    if features == "payload":
        # each ID's payload profile from the recording's own first windows: unlabelled traffic
        head = profile_head(profile_windows, stride, window_size, len(messages))
        profile = payload_profile(messages.can_id[:head], messages.payload[:head], messages.timestamp[:head])
        graphs = payload_features(
            graphs,
            profile,
            can_id=messages.can_id,
            payload=messages.payload,
            timestamp=messages.timestamp,
            window_size=window_size,
            index=index,
            previous=previous,
        )
    verdict = verdict_messages(
        can_id=messages.can_id,
        timestamp=messages.timestamp,
        window_start=graphs.window_start,
        window_size=window_size,
        features=features,
        calibration_windows=calibration_windows,
        profile=profile,
        profile_messages=head,
        previous=previous,
    )
    return _FileResult(
        report.to_json(), graphs, len(messages), _window_times(messages, graphs, window_size, verdict)
    )


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


def preprocess_dataset(
    dataset: str,
    params: GraphParams,
    *,
    workers: int = 1,
    raw: Path | None = None,
    cache: Path | None = None,
    force: bool = False,
    from_shards: bool = False,
) -> CacheInfo:
    """Build or refresh the graph cache of ``dataset``.

    Reads every CAN file under ``raw`` (default ``paths.raw_dir(dataset)``) with up to ``workers``
    processes, builds window graphs, the vocabulary and the normalisation, and writes the cache to
    ``cache`` (default ``paths.cache_dir(dataset)``). When the cache already matches the parameters
    and the files, nothing is rebuilt (``CacheInfo.hit``). Raises :class:`DataError` for a missing
    directory, a file with too many malformed rows, or a data set without benign training windows.
    ``params`` has no default on purpose: the pipeline's are ``stages.common.graph_params(config)``.

    ``from_shards``: the join of a sharded preprocess. The per-file graphs come from the shard store
    that :func:`kdgat.data.shards.build_shard` tasks filled (``workers`` is not used); a file without
    a done shard is a :class:`DataError` naming it. The cache written is the same, byte for byte,
    as this function's without it.
    """
    if workers < 1:
        raise ValueError(f"workers is {workers}; expected >= 1")
    raw = Path(raw) if raw is not None else paths.raw_dir(dataset)
    cache = Path(cache) if cache is not None else paths.cache_dir(dataset)
    started = time.perf_counter()
    if not raw.exists():
        # On a compute node only the staged cache may be there: use it when it fits the params.
        meta = read_meta(cache)
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
            return cache_info(cache, meta, hit=True, seconds=time.perf_counter() - started)
    files = list_sources(raw)
    with locked(cache):
        previous = read_meta(cache)
        sources = fingerprint(raw, files, previous)
        source_digest = sources_digest(sources)
        if (
            not force
            and previous is not None
            and previous.get("params_digest") == params.digest()
            and previous.get("source_digest") == source_digest
            and (cache / GRAPHS_FILE).is_file()
        ):
            if previous["sources"] != sources:  # contents equal, stat changed: remember new stat
                write_json(cache / META_FILE, {**previous, "sources": sources})
            log.info("graph cache of %s is up to date: %s", dataset, cache)
            return cache_info(cache, previous, hit=True, seconds=time.perf_counter() - started)
        if from_shards:
            from kdgat.data import shards  # shards builds on this module's per-file step

            results = shards.load_results(cache, params, sources)
        else:
            results = _run_files(files, params, workers)
        (cache / META_FILE).unlink(missing_ok=True)
        meta = _build(dataset, params, raw, files, sources, source_digest, cache, results)
        info = cache_info(cache, meta, hit=False, seconds=time.perf_counter() - started)
        log.info("%s", info.summary())
        return info


def _file_args(path: Path, params: GraphParams) -> tuple[str, int, int, float, str, int, int, int]:
    """The arguments of :func:`_build_file` for ``path``."""
    return (
        str(path),
        params.window_size,
        params.stride,
        params.max_malformed_fraction,
        params.features,
        params.novelty_history,
        params.profile_windows,
        params.calibration_windows,
    )


def _run_files(files: list[Path], params: GraphParams, workers: int) -> list[_FileResult]:
    args = [_file_args(p, params) for p in files]
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
    results: list[_FileResult],
) -> dict[str, Any]:
    """Joins the per-file ``results`` (in the order of ``files``) into the cache; returns its meta."""
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
    # The vocabulary: the IDs of the benign training windows' nodes, after the split, so that no
    # label of a validation or test window (a random share of the training files when there is no
    # test file) decides which IDs it holds, nor its size, which sizes the models' embeddings.
    vocab = CanIdVocab.build([graphs.node_can_id[node_rows]])
    # the columns normalised here; the payload columns already measure against each ID's own
    # profile (bounded units), and a recording's first windows spread these mostly-zero columns
    # ~0, which would blow them up: they are stored raw (mean 0, std 1 in the meta)
    raw_from = len(VI_NODE_FEATURES) if params.features == "payload" else graphs.x.shape[1]
    # the per-file results' arrays become the cache's: normalised in place, block by block
    x = graphs.x
    if params.features == "paper":
        x[:, 0] = vocab.index(graphs.node_can_id)  # vehicle-independent features: column 0 stays 0
    node_mean, node_std = _moments(x[node_rows, 1:])
    edge_mean, edge_std = _moments(graphs.edge_attr[edge_rows])
    cols = x[:, 1:raw_from]
    if params.calibration_windows:
        # per-recording calibration: each file by its own first K windows (unlabelled)
        first_of_file = np.concatenate([[0], np.cumsum(per_file)[:-1]]).astype(np.int64)
        rank = np.arange(len(file_index), dtype=np.int64) - first_of_file[file_index]
        k = params.calibration_windows
        calibrate_rows(
            cols, np.repeat(file_index, nodes_per_graph), np.repeat(rank, nodes_per_graph), k, out=cols
        )
        edge_attr = calibrate_rows(
            graphs.edge_attr,
            np.repeat(file_index, edges_per_graph),
            np.repeat(rank, edges_per_graph),
            k,
            out=graphs.edge_attr,
        )
    else:
        standardise(cols, node_mean[: raw_from - 1], node_std[: raw_from - 1], out=cols)
        edge_attr = standardise(graphs.edge_attr, edge_mean, edge_std, out=graphs.edge_attr)
    if params.features == "payload":
        node_mean[raw_from - 1 :], node_std[raw_from - 1 :] = 0.0, 1.0

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
        "window_times": torch.from_numpy(
            np.concatenate([r.times for r in results]) if results else np.zeros((0, 4), np.float64)
        ),
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
        "feature_names": {
            "node": list(node_feature_names(params.features)),
            "edge": list(EDGE_FEATURES if params.features == "paper" else VI_EDGE_FEATURES),
        },
    }
    write_json(cache / META_FILE, meta)
    return meta
