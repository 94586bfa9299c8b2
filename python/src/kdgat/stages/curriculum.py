"""curriculum: the GAT classifier trained easy -> hard, difficulty from the VGAE's anomaly score."""

from __future__ import annotations

from typing import Any

import torch

from kdgat.models import GATWithJK, GraphAutoencoderNeighborhood, build_model
from kdgat.stages.common import (
    class_weight,
    classifier_loss,
    graph_cache_record,
    load_model,
    load_splits,
    require_model,
    samples,
    save_model,
    write_metrics,
)
from kdgat.stages.context import StageContext
from kdgat.stages.scoring import anomaly_scores, evaluate
from kdgat.training.fit import choose_batch_size, fit
from kdgat.training.modules import CurriculumModule


def run(ctx: StageContext) -> dict[str, Any]:
    cfg, dataset, scale = ctx.cfg, ctx.dataset, ctx.scale
    if ctx.model != "gat":
        raise ValueError("the curriculum stage trains the GAT classifier: use --model gat")
    vgae_path = require_model(
        ctx.run_root, dataset, "vgae", (scale, "large", "small"), "autoencoder", "curriculum"
    )
    vgae = load_model(vgae_path)
    assert isinstance(vgae, GraphAutoencoderNeighborhood)
    splits = load_splits(dataset, cfg)
    scores = anomaly_scores(vgae, splits.train)
    z = (scores - scores.median()) / (scores.std() + 1e-6)
    y = splits.train.y.float()
    difficulty = torch.where(y == 1, -z, z)  # attacks should score high, benign low
    order = torch.argsort(difficulty)
    net = build_model("gat", cfg, vocab_size=splits.vocab_size)
    assert isinstance(net, GATWithJK)
    module = CurriculumModule(
        net,
        cfg.training.lr,
        train=splits.train,
        order=order,
        cfg=cfg,
        class_weight=class_weight(splits.train.y),
    )
    batch = choose_batch_size(cfg, net, samples(splits.train), classifier_loss)
    result = fit(module, cfg=cfg, run_dir=ctx.run_dir, train=None, val=splits.val, batch=batch)
    save_model(ctx.run_dir, net, model_name="gat", scale=scale, cfg=cfg, vocab_size=splits.vocab_size)
    scores_out = evaluate(net, splits.test, splits.attack_types)
    write_metrics(
        ctx.run_dir,
        ctx.identity(),
        result,
        scores=scores_out["overall"],
        graph_cache=graph_cache_record(splits.meta),
    )
    return scores_out["overall"]
