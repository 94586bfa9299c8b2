"""evaluation: accuracy, precision, recall, F1, AUROC of the GAT classifier, overall and per attack
type, against the majority baseline, and the event figures of its verdicts (episodes detected,
delays to each window's verdict time, false alarms per hour of benign traffic, overall and per
recording) -> metrics.json."""

from __future__ import annotations

from typing import Any

from kdgat.models import GATWithJK
from kdgat.stages.common import graph_cache_record, load_model, load_splits, require_model, write_metrics
from kdgat.stages.context import StageContext
from kdgat.stages.fusion import evaluate_scored
from kdgat.stages.scoring import evaluate, event_metrics


def run(ctx: StageContext) -> dict[str, Any]:
    if ctx.model != "gat":
        raise ValueError("evaluation scores the GAT classifier: use --model gat")
    source = "distillation" if ctx.scale == "small" else "curriculum"
    path = require_model(ctx.run_root, ctx.dataset, "gat", (ctx.scale,), source, "evaluation")
    net = load_model(path)
    assert isinstance(net, GATWithJK)
    splits = load_splits(ctx.dataset, ctx.cfg)
    # evaluation.scoring (gat, vgae, fusion_*): kdgat.stages.fusion; gat alone is the published path
    out = (
        evaluate(net, splits.test, splits.attack_types)
        if ctx.cfg.evaluation.scoring == "gat"
        else evaluate_scored(ctx, net, splits)
    )
    write_metrics(
        ctx.run_dir,
        ctx.identity(),
        None,
        scores=out["overall"],
        scores_by_attack=out["by_attack"],
        baseline_majority=out["baseline"],
        scoring=out.get("scorer", {"mode": "gat", "threshold": 0.5}),
        warmup=out.get("warmup", {"test_windows": 0, "test_attack_windows": 0}),
        evaluated_model=str(path),
        graph_cache=graph_cache_record(splits.meta),
        **event_metrics(out["pred"], splits.test, [f["path"] for f in splits.meta.get("files", [])]),
        **({"timing_rule": out["timing_rule"]} if "timing_rule" in out else {}),
    )
    return out["overall"]
