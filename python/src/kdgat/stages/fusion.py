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
from kdgat.scoring.rules import rule_by_recording, rule_validation
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
    rule: dict[str, Any] = {}
    if needs_timing(mode):
        tt, tv = timing_scores(splits.test), timing_scores(splits.val)
        share = scorer.timed_benign_share(tv, splits.val.y)
        checks["timing_val_benign_flagged"] = round(share, 6)
        assert st is not None and sv is not None
        rule = _timing_rule(ctx, splits, scorer, (pv, sv, tv), (pt, st, tt), rank)
    prob = scorer.decision_score(pt, st, tt, rank)
    y, attack = splits.test.y.view(-1), splits.test.attack_type.view(-1)
    return {
        **({"timing_rule": rule} if rule else {}),
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


def _timing_rule(
    ctx: StageContext,
    splits: GraphSplits,
    scorer: Any,
    val: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    test: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    rank: torch.Tensor,
) -> dict[str, Any]:
    """``novelty_timing``'s rule against the models per recording (:mod:`kdgat.scoring.rules`), on
    each recording's benign windows after its profile windows: ``test`` (the fitted scorer on the
    test recordings) and ``validation`` (each training recording's validation windows, the models'
    bars fitted on the other training recordings'). By recording path; nothing without window times."""
    if "window_times" not in splits.test.store:
        return {}
    files = [f["path"] for f in splits.meta.get("files", [])]
    after = ctx.cfg.data.profile_windows

    def named(by: dict[int, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        return {(files[r] if r < len(files) else str(r)): f for r, f in by.items()}

    def windows(data: GraphSet) -> dict[str, Any]:
        times = data.window_times.numpy()
        return {
            "recording": data.file_index.numpy(),
            "window": window_ranks(data).numpy(),
            "t_first": times[:, 0],
            "t_last": times[:, 1],
        }

    pt, st, tt = test
    on_test = rule_by_recording(
        scorer,
        **windows(splits.test),
        y=splits.test.y.view(-1).numpy(),
        gat_prob=pt,
        vgae_score=st,
        timing=tt,
        rank=rank,
        after=after,
    )
    pv, sv, tv = val
    on_val = rule_validation(
        **windows(splits.val), y=splits.val.y, gat_prob=pv, vgae_score=sv, timing=tv, after=after
    )
    return {"after_windows": after, "test": named(on_test), "validation": named(on_val)}


def _vgae_scores(vgae: GraphAutoencoderNeighborhood, data: GraphSet, pools: tuple[str, ...]) -> torch.Tensor:
    """``[N]`` for one pooled score, ``[N, len(pools)]`` for several (the scorer's column order)."""
    scores = [anomaly_scores(vgae, data, pool) for pool in pools]
    return scores[0] if len(scores) == 1 else torch.stack(scores, dim=1)
