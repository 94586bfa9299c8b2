"""preprocess: raw CAN files -> the data set's graph cache (:func:`kdgat.data.preprocess_dataset`).

Sharded (the run contract's ``shards``): array task ``i`` of ``N`` has ``SHARD_INDEX_ENV=i`` and
``SHARD_COUNT_ENV=N`` and builds its shard (:func:`kdgat.data.shards.build_shard`); the join job
has ``SHARD_COUNT_ENV=N`` alone and builds the cache from the shards.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from kdgat import paths
from kdgat.config import default_num_workers
from kdgat.contract import SHARD_COUNT_ENV, SHARD_INDEX_ENV
from kdgat.data import preprocess_dataset
from kdgat.data.shards import build_shard, shard_store
from kdgat.stages.common import graph_params, write_metrics
from kdgat.stages.context import StageContext


def shard_env(environ: Mapping[str, str] | None = None) -> tuple[int | None, int | None]:
    """``(index, count)`` from the job's environment: ``(i, N)`` in array task i of N, ``(None, N)``
    in the join job, ``(None, None)`` in an ordinary run. Raises ValueError naming the variable
    when one is not an integer in range, or the index comes without a count."""
    env = os.environ if environ is None else environ
    raw_index, raw_count = env.get(SHARD_INDEX_ENV, "").strip(), env.get(SHARD_COUNT_ENV, "").strip()
    count = None
    if raw_count:
        count = _int_env(SHARD_COUNT_ENV, raw_count)
        if count < 1:
            raise ValueError(f"{SHARD_COUNT_ENV}={raw_count!r}: expected the number of shards, >= 1")
    if not raw_index:
        return None, count
    if count is None:
        raise ValueError(
            f"{SHARD_INDEX_ENV}={raw_index!r} is set but {SHARD_COUNT_ENV} is not: an array task "
            "needs both (the job script exports them)"
        )
    index = _int_env(SHARD_INDEX_ENV, raw_index)
    if not 0 <= index < count:
        raise ValueError(f"{SHARD_INDEX_ENV}={raw_index!r}: expected 0 <= index < {SHARD_COUNT_ENV}={count}")
    return index, count


def _int_env(name: str, value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{name}={value!r} is not an integer") from None


def run(ctx: StageContext) -> dict[str, Any]:
    index, count = shard_env()
    if index is not None and count is not None:
        return _run_shard(ctx, index, count)
    cfg, d = ctx.cfg, ctx.cfg.data
    workers = default_num_workers() if d.num_workers is None else d.num_workers
    params = graph_params(cfg)
    info = preprocess_dataset(ctx.dataset, params, workers=max(1, workers), from_shards=count is not None)
    print(info.summary())
    shards = {} if count is None else {"shards": count}
    write_metrics(
        ctx.run_dir,
        ctx.identity(),
        None,
        cache_hit=info.hit,
        cache=str(info.path),
        graph_cache={
            "params_digest": info.params_digest,
            "source_digest": info.source_digest,
            "params": params.to_json(),
        },
        graphs=info.graphs,
        messages=info.messages,
        malformed_rows=sum(int(f.get("malformed", 0)) for f in info.files),
        timings={"preprocess_seconds": round(info.seconds, 2)},
        **shards,
    )
    return {"cache_hit": info.hit, **shards}


def _run_shard(ctx: StageContext, index: int, count: int) -> dict[str, Any]:
    """Array task ``index`` of ``count``: its shard into the store; the metrics in its own run dir."""
    params = graph_params(ctx.cfg)
    report = build_shard(ctx.dataset, params, index, count)
    print(report.summary())
    write_metrics(
        ctx.run_dir,
        ctx.identity(),
        None,
        shard={"index": index, "count": count},
        shard_store=str(shard_store(paths.cache_dir(ctx.dataset), params)),
        shard_files={
            "built": len(report.built),
            "skipped": len(report.skipped),
            "failed": len(report.failed),
        },
        built=list(report.built),
        skipped=list(report.skipped),
        messages=report.messages,
        timings={"preprocess_seconds": round(report.seconds, 2)},
    )
    return {"shard_index": index, "shard_count": count, "built": len(report.built)}
