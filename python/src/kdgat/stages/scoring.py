"""Evaluation scores: overall and per attack type (torchmetrics), a classifier's evaluation on a split,
the event figures of its verdicts (episodes detected, delay to the verdict time, false alarms per
hour of benign traffic, per recording too) and the VGAE's anomaly score per window."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torch_geometric.data import Batch
from torch_geometric.loader import DataLoader
from torchmetrics.functional.classification import (
    binary_accuracy,
    binary_auroc,
    binary_f1_score,
    binary_matthews_corrcoef,
    binary_precision,
    binary_recall,
    binary_specificity,
)

from kdgat.data import GraphSet
from kdgat.models import GATWithJK, GraphAutoencoderNeighborhood
from kdgat.scoring.events import event_figures, false_alarms_by_recording
from kdgat.scoring.outputs import window_ranks


def binary_scores(prob: Tensor, y: Tensor) -> dict[str, float]:
    y = y.long()
    out = {
        "accuracy": binary_accuracy(prob, y),
        "precision": binary_precision(prob, y),
        "recall": binary_recall(prob, y),
        "f1": binary_f1_score(prob, y),
        "specificity": binary_specificity(prob, y),
        "mcc": binary_matthews_corrcoef(prob, y),
    }
    scores = {k: round(float(v), 4) for k, v in out.items()}
    # AUROC is undefined with one class present.
    scores["auroc"] = round(float(binary_auroc(prob, y)), 4) if 0 < int(y.sum()) < len(y) else float("nan")
    scores["n"] = len(y)
    return scores


def scores_by_attack(
    prob: Tensor, y: Tensor, attack: Tensor, names: tuple[str, ...]
) -> dict[str, dict[str, float]]:
    """Each attack type against the benign windows (attack type 0)."""
    out: dict[str, dict[str, float]] = {}
    benign = attack == 0
    for k, name in enumerate(names):
        if k == 0 or not bool((attack == k).any()):
            continue
        mask = benign | (attack == k)
        out[name] = binary_scores(prob[mask], y[mask])
    return out


def event_metrics(pred: Tensor, data: GraphSet, files: list[str]) -> dict[str, Any]:
    """The event figures of the 0/1 verdicts ``pred`` on the windows of ``data``
    (:mod:`kdgat.scoring.events`; a delay ends at the window's verdict time, the last message its
    features read: :mod:`kdgat.data.verdict`) under ``events``, and under
    ``false_alarms_by_recording`` each recording's flagged benign windows per hour of its benign
    traffic, by its path (``files``: the cache's files in order). Nothing without window times
    (a store that is not a graph cache)."""
    if "window_times" not in data.store or len(data) == 0:
        return {}
    times = data.window_times.double().numpy()
    rec, y, flag = data.file_index.numpy(), data.y.view(-1).numpy(), pred.view(-1).long().numpy()
    by = false_alarms_by_recording(recording=rec, y=y, pred=flag, t_first=times[:, 0], t_last=times[:, 1])
    ev = event_figures(
        recording=rec,
        window=window_ranks(data).numpy(),
        y=y,
        pred=flag,
        t_first=times[:, 0],
        t_last=times[:, 1],
        t_attack=times[:, 2],
        t_verdict=times[:, 3],
    )
    return {
        "events": ev.to_json(),
        "false_alarms_by_recording": {
            (files[r] if r < len(files) else str(r)): figures for r, figures in by.items()
        },
    }


@torch.no_grad()
def majority_baseline(y: Tensor) -> dict[str, float]:
    """Scores of always answering the training majority class (the trivial baseline)."""
    return binary_scores(torch.zeros_like(y, dtype=torch.float), y)


@torch.no_grad()
def anomaly_scores(vgae: GraphAutoencoderNeighborhood, data: GraphSet, pool: str = "mean") -> torch.Tensor:
    """The VGAE's anomaly score of each window ``[len(data)]``, its node losses pooled by ``pool``
    (:meth:`GraphAutoencoderNeighborhood.anomaly_score`)."""
    loader = DataLoader(data, batch_size=256, shuffle=False)  # type: ignore[arg-type]
    out = [vgae.anomaly_score(b.x, b.edge_index, b.edge_attr, b.batch, pool) for b in loader]
    return torch.cat(out) if out else torch.zeros(0)


@torch.no_grad()
def evaluate(net: GATWithJK, data: GraphSet, names: tuple[str, ...]) -> dict[str, Any]:
    net.eval()
    loader = DataLoader(data, batch_size=256, shuffle=False)  # type: ignore[arg-type]
    probs = []
    for b in loader:
        assert isinstance(b, Batch)
        probs.append(torch.softmax(net(b.x, b.edge_index, b.edge_attr, b.batch), -1)[:, 1])
    prob = torch.cat(probs)
    y, attack = data.y.view(-1), data.attack_type.view(-1)
    return {
        "pred": (prob >= 0.5).long(),
        "overall": binary_scores(prob, y),
        "by_attack": scores_by_attack(prob, y, attack, names),
        "baseline": majority_baseline(y),
    }
