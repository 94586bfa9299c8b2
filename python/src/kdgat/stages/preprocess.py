"""preprocess: raw CAN files -> the data set's graph cache (:func:`kdgat.data.preprocess_dataset`)."""

from __future__ import annotations

from typing import Any

from kdgat.config import default_num_workers
from kdgat.data import preprocess_dataset
from kdgat.stages.common import graph_params, write_metrics
from kdgat.stages.context import StageContext


def run(ctx: StageContext) -> dict[str, Any]:
    cfg, d = ctx.cfg, ctx.cfg.data
    workers = default_num_workers() if d.num_workers is None else d.num_workers
    info = preprocess_dataset(ctx.dataset, graph_params(cfg), workers=max(1, workers))
    print(info.summary())
    write_metrics(
        ctx.run_dir,
        ctx.identity(),
        None,
        cache_hit=info.hit,
        cache=str(info.path),
        graph_cache={
            "params_digest": info.params_digest,
            "source_digest": info.source_digest,
            "params": graph_params(cfg).to_json(),
        },
        graphs=info.graphs,
        messages=info.messages,
        malformed_rows=sum(int(f.get("malformed", 0)) for f in info.files),
        timings={"preprocess_seconds": round(info.seconds, 2)},
    )
    return {"cache_hit": info.hit}
