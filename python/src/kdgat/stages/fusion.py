"""Evaluation with a selectable scoring mode (``evaluation.scoring``): the GAT alone, the VGAE's
anomaly score, or a fusion of both fitted on the validation windows (:mod:`kdgat.scoring`)."""

from __future__ import annotations

from typing import Any

import torch

from kdgat.data import GraphSet, GraphSplits
from kdgat.models import GATWithJK, GraphAutoencoderNeighborhood
from kdgat.scoring import (
    fit_scorer,
    gat_probabilities,
    needs_timing,
    timing_scores,
    vgae_pools,
    window_ranks,
)
from kdgat.stages.common import load_model, require_model
from kdgat.stages.context import StageContext
from kdgat.stages.scoring import anomaly_scores, binary_scores, majority_baseline, scores_by_attack


def evaluate_scored(ctx: StageContext, net: GATWithJK, splits: GraphSplits) -> dict[str, Any]:
    """Scores of the test windows under ``ctx.cfg.evaluation.scoring``; the scorer (weights,
    threshold) is fitted on the validation windows and returned under ``scorer``."""
    mode = ctx.cfg.evaluation.scoring
    pv, pt = gat_probabilities(net, splits.val), gat_probabilities(net, splits.test)
    sv = st = None
    vgae_path = None
    if mode != "gat":
        vgae_path = require_model(
            ctx.run_root,
            ctx.dataset,
            "vgae",
            (ctx.scale, "large", "small"),
            "autoencoder",
            f"evaluation.scoring={mode}",
        )
        vgae = load_model(vgae_path)
        assert isinstance(vgae, GraphAutoencoderNeighborhood)
        sv, st = (_vgae_scores(vgae, data, vgae_pools(mode)) for data in (splits.val, splits.test))
    scorer = fit_scorer(
        mode, splits.val.y, gat_prob=pv, vgae_score=sv, warmup_windows=ctx.cfg.evaluation.warmup_windows
    )
    rank = window_ranks(splits.test)
    warm = scorer.in_warmup(rank, len(rank))
    checks: dict[str, float] = {}
    tt = None
    if needs_timing(mode):
        tt = timing_scores(splits.test)
        share = scorer.timed_benign_share(timing_scores(splits.val), splits.val.y)
        checks["timing_val_benign_flagged"] = round(share, 6)
    prob = scorer.decision_score(pt, st, tt, rank)
    y, attack = splits.test.y.view(-1), splits.test.attack_type.view(-1)
    return {
        "pred": (prob >= 0.5).long(),
        "overall": binary_scores(prob, y),
        "by_attack": scores_by_attack(prob, y, attack, splits.attack_types),
        "baseline": majority_baseline(y),
        # the test windows the warm-up gave no verdict, and of them attack windows (missed by design)
        "warmup": {"test_windows": int(warm.sum()), "test_attack_windows": int((warm & (y == 1)).sum())},
        "scorer": {
            **scorer.to_json(),
            **checks,
            "vgae_model": None if vgae_path is None else str(vgae_path),
        },
    }


def _vgae_scores(vgae: GraphAutoencoderNeighborhood, data: GraphSet, pools: tuple[str, ...]) -> torch.Tensor:
    """``[N]`` for one pooled score, ``[N, len(pools)]`` for several (the scorer's column order)."""
    scores = [anomaly_scores(vgae, data, pool) for pool in pools]
    return scores[0] if len(scores) == 1 else torch.stack(scores, dim=1)
