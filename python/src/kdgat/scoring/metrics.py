"""Window F1: the one implementation the scoring, its threshold searches and the benches use.

F1 = 2 TP / (2 TP + FP + FN), and 0 where there is nothing to count (no attack window and none
flagged: 2 TP + FP + FN = 0). Predictions and labels are 0/1 per window (1: attack).
"""

from __future__ import annotations

import torch
from torch import Tensor


def f1_from_counts(tp: Tensor | int, fp: Tensor | int, fn: Tensor | int) -> Tensor:
    """F1 of true-positive, false-positive and false-negative counts, elementwise (float64): one
    value for int counts, one per cut for the counts of every cut of a ranking (as
    :func:`kdgat.scoring.best_f1_threshold` does); 0 where ``2 tp + fp + fn`` is 0."""
    tp_ = torch.as_tensor(tp, dtype=torch.float64)
    return 2 * tp_ / (2 * tp_ + fp + fn).clamp(min=1)


def binary_counts(pred: Tensor, y: Tensor) -> tuple[int, int, int, int]:
    """``(tp, fp, fn, tn)`` of 0/1 (or bool) window predictions against 0/1 labels."""
    pred, y = pred.flatten(), y.flatten()
    if pred.shape != y.shape:
        raise ValueError(
            f"predictions have {len(pred)} windows and labels {len(y)}: expected the same windows"
        )
    for name, t in (("predictions", pred), ("labels", y)):
        if t.dtype != torch.bool and bool(((t != 0) & (t != 1)).any()):
            bad = t[(t != 0) & (t != 1)][0].item()
            raise ValueError(f"{name} hold {bad!r}: expected 0 or 1 per window")
    pred, y = pred.bool(), y.bool()
    tp = int((pred & y).sum())
    fp = int((pred & ~y).sum())
    fn = int((~pred & y).sum())
    return tp, fp, fn, len(y) - tp - fp - fn


def f1_score(pred: Tensor, y: Tensor) -> float:
    """Window F1 of 0/1 predictions against 0/1 labels; 0.0 when neither has a 1."""
    tp, fp, fn, _ = binary_counts(pred, y)
    return float(f1_from_counts(tp, fp, fn))
