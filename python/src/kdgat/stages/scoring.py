"""Evaluation scores: overall and per attack type (torchmetrics), a classifier's evaluation on a split
and the VGAE's anomaly score per window."""

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
        "overall": binary_scores(prob, y),
        "by_attack": scores_by_attack(prob, y, attack, names),
        "baseline": majority_baseline(y),
    }
