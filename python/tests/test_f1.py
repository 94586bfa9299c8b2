"""Window F1 (kdgat.scoring.metrics): the one implementation the scoring modes and the benches use,
against a slow pure-Python reference and hand-made labels."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

from kdgat.scoring import best_f1_threshold, binary_counts, f1_from_counts, f1_score

BENCH = Path(__file__).resolve().parents[2] / "bench" / "real-data"


def reference_f1(pred: list[int], y: list[int]) -> float:
    """Precision and recall one window at a time; 0 when there is no true positive."""
    tp = sum(1 for p, t in zip(pred, y, strict=True) if p == 1 and t == 1)
    flagged = sum(pred)
    attacks = sum(y)
    if tp == 0:
        return 0.0
    precision, recall = tp / flagged, tp / attacks
    return 2 * precision * recall / (precision + recall)


def f1(pred: list[int], y: list[int]) -> float:
    return f1_score(torch.tensor(pred), torch.tensor(y))


def test_hand_made_labels() -> None:
    #          tp fp fn tn
    pred = [1, 1, 0, 0, 1, 0]
    y = [1, 0, 1, 0, 1, 0]
    assert binary_counts(torch.tensor(pred), torch.tensor(y)) == (2, 1, 1, 2)
    assert f1(pred, y) == pytest.approx(2 * 2 / (2 * 2 + 1 + 1)) == pytest.approx(reference_f1(pred, y))
    assert f1([1, 1, 1], [1, 1, 1]) == 1.0
    assert f1([0, 0, 1], [1, 1, 0]) == 0.0  # every verdict wrong


def test_no_attack_window_or_none_flagged_scores_zero() -> None:
    # kept from the three copies this replaces: 2 tp / max(1, 2 tp + fp + fn)
    assert f1([0, 0, 0], [0, 0, 0]) == 0.0  # all negative, none flagged: nothing to count
    assert f1([1, 0, 0], [0, 0, 0]) == 0.0  # all negative, a false alarm
    assert f1([0, 0, 0], [1, 1, 0]) == 0.0  # attacks, none flagged
    assert f1([], []) == 0.0


def test_matches_the_reference_on_random_labels() -> None:
    g = torch.Generator().manual_seed(0)
    for _ in range(200):
        n = int(torch.randint(1, 30, (1,), generator=g))
        pred = (torch.rand(n, generator=g) < 0.5).long()
        y = (torch.rand(n, generator=g) < 0.3).long()
        assert f1_score(pred, y) == pytest.approx(reference_f1(pred.tolist(), y.tolist()))
        assert f1_score(pred.bool(), y) == f1_score(pred, y)


def test_counts_elementwise_as_the_threshold_search_uses_them() -> None:
    tp, fp, fn = torch.tensor([0, 1, 2, 0]), torch.tensor([0, 1, 0, 3]), torch.tensor([0, 1, 0, 1])
    got = f1_from_counts(tp, fp, fn)
    assert got.dtype == torch.float64
    assert got.tolist() == pytest.approx([0.0, 0.5, 1.0, 0.0])
    # the search's best cut has the F1 of the predictions it makes
    score = torch.tensor([0.9, 0.8, 0.8, 0.3, 0.1])
    y = torch.tensor([1, 1, 0, 1, 0])
    t = best_f1_threshold(score, y)
    assert f1_score(score >= t, y) == pytest.approx(
        max(reference_f1([int(s >= c) for s in score.tolist()], y.tolist()) for c in score.tolist())
    )


def test_bad_inputs_name_what_was_expected() -> None:
    with pytest.raises(ValueError, match="predictions have 2 windows and labels 3"):
        f1_score(torch.tensor([1, 0]), torch.tensor([1, 0, 0]))
    with pytest.raises(ValueError, match="labels hold 2: expected 0 or 1 per window"):
        f1_score(torch.tensor([1, 0]), torch.tensor([1, 2]))
    with pytest.raises(ValueError, match=r"predictions hold 0\.5: expected 0 or 1"):
        f1_score(torch.tensor([0.5, 0.0]), torch.tensor([1, 0]))


def test_the_benches_use_it() -> None:
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location("bench_real_data_valselect", BENCH / "valselect.py")
        assert spec is not None and spec.loader is not None
        valselect = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(valselect)
        run = sys.modules.pop("run")  # valselect imports the bench's run.py beside it
    finally:
        sys.path.remove(str(BENCH))
    assert valselect.f1_score is f1_score and not hasattr(valselect, "f1")
    pred, y = torch.tensor([1, 1, 0, 0, 1, 0]), torch.tensor([1, 0, 1, 0, 1, 0])
    figures = run.metrics(pred, y)
    assert figures["f1"] == f1_score(pred, y)
    assert (figures["precision"], figures["recall"], figures["accuracy"]) == pytest.approx(
        (2 / 3, 2 / 3, 4 / 6)
    )
