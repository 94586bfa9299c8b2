"""Evaluation scores: overall and per attack type (torchmetrics)."""

from __future__ import annotations

import torch
from torch import Tensor
from torchmetrics.functional.classification import (
    binary_accuracy,
    binary_auroc,
    binary_f1_score,
    binary_matthews_corrcoef,
    binary_precision,
    binary_recall,
    binary_specificity,
)


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
