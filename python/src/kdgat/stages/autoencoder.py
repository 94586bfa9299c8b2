"""autoencoder: the VGAE on benign training windows; its anomaly score per window."""

from __future__ import annotations

from typing import Any

import torch

from kdgat.models import GraphAutoencoderNeighborhood, build_model
from kdgat.stages.common import graph_cache_record, load_splits, samples, save_model, vgae_loss, write_metrics
from kdgat.stages.context import StageContext
from kdgat.stages.scoring import anomaly_scores, binary_scores
from kdgat.training.fit import choose_batch_size, fit
from kdgat.training.modules import VGAEModule


def run(ctx: StageContext) -> dict[str, Any]:
    cfg = ctx.cfg
    if ctx.model != "vgae":
        raise ValueError("the autoencoder stage trains the VGAE: use --model vgae")
    splits = load_splits(ctx.dataset, cfg)
    benign = splits.train.subset(torch.nonzero(splits.train.y == 0).view(-1))
    val_benign = splits.val.subset(torch.nonzero(splits.val.y == 0).view(-1))
    net = build_model("vgae", cfg, vocab_size=splits.vocab_size)
    assert isinstance(net, GraphAutoencoderNeighborhood)
    batch = choose_batch_size(cfg, net, samples(benign), vgae_loss)
    result = fit(
        VGAEModule(net, cfg.training.lr),
        cfg=cfg,
        run_dir=ctx.run_dir,
        train=benign,
        val=val_benign,
        batch=batch,
    )
    save_model(ctx.run_dir, net, model_name="vgae", scale=ctx.scale, cfg=cfg, vocab_size=splits.vocab_size)
    scores = anomaly_scores(net.eval(), splits.test)
    y = splits.test.y.float()
    auroc = binary_scores(torch.sigmoid((scores - scores.mean()) / (scores.std() + 1e-6)), y)["auroc"]
    write_metrics(
        ctx.run_dir,
        ctx.identity(),
        result,
        scores={"anomaly_auroc": auroc},
        graph_cache=graph_cache_record(splits.meta),
    )
    return {"anomaly_auroc": auroc}
