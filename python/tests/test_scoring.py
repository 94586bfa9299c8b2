"""Scoring modes (kdgat.scoring): thresholds and fusions fitted on validation windows only."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kdgat.data import GraphSet
from kdgat.data.features_payload import PAYLOAD_NODE_FEATURES
from kdgat.scoring import (
    SCORING_MODES,
    Scorer,
    best_f1_threshold,
    fit_scorer,
    gat_threshold,
    needs_timing,
    novelty_bar,
    timing_scores,
    vgae_pools,
    window_ranks,
)


def _f1(pred: torch.Tensor, y: torch.Tensor) -> float:
    tp = int(((pred == 1) & (y == 1)).sum())
    return 2 * tp / max(1, int(pred.sum()) + int(y.sum()))


def test_best_f1_threshold_is_the_best_cut_by_brute_force() -> None:
    g = torch.Generator().manual_seed(0)
    for _ in range(20):
        n = int(torch.randint(2, 40, (1,), generator=g))
        score = torch.randint(0, 8, (n,), generator=g).double() / 7  # ties on purpose
        y = (torch.rand(n, generator=g) < 0.4).long()
        if int(y.sum()) == 0:
            continue
        t = best_f1_threshold(score, y)
        got = _f1((score >= t).long(), y)
        best = max(_f1((score >= c).long(), y) for c in [*score.tolist(), 2.0])
        assert got == pytest.approx(best)
    assert best_f1_threshold(torch.tensor([0.1, 0.9]), torch.tensor([0, 0])) == 0.5


def test_gat_threshold_is_the_lowest_best_cut_at_or_above_one_half_by_brute_force() -> None:
    g = torch.Generator().manual_seed(3)
    raised = 0
    for _ in range(200):
        n = int(torch.randint(2, 40, (1,), generator=g))
        prob = torch.randint(0, 11, (n,), generator=g).double() / 10  # ties and 0.5 itself on purpose
        y = (torch.rand(n, generator=g) < 0.4).long()
        t = gat_threshold(prob, y)
        # the slow reference: every threshold 0.5 and every probability above it, F1 of each
        candidates = [0.5, *sorted({p for p in prob.tolist() if p > 0.5})]
        f1 = {c: _f1((prob >= c).long(), y) for c in candidates}
        if int(y.sum()) == 0:
            assert t == 0.5
            continue
        assert t >= 0.5
        got = _f1((prob >= t).long(), y)
        assert got == pytest.approx(max(f1.values()))
        # of equal F1s the lowest: no candidate below t does as well
        lower = [c for c in candidates if c < t and int((prob >= c).sum()) != int((prob >= t).sum())]
        assert all(f1[c] < got - 1e-12 for c in lower)
        raised += t > 0.5
    assert raised > 10  # the draws did reach the raised case
    # nothing reaches 0.5, or no attack window: the classifier's own 0.5
    assert gat_threshold(torch.tensor([0.1, 0.4]), torch.tensor([1, 0])) == 0.5
    assert gat_threshold(torch.tensor([0.9, 0.8]), torch.tensor([0, 0])) == 0.5


def test_novelty_modes_raise_the_gats_bar_only_when_validation_shows_benign_windows_above_it() -> None:
    y, gat, vgae = _val()
    both = torch.stack([vgae, vgae], dim=1)
    # a GAT that is clean on validation keeps the published 0.5 in every novelty mode
    for mode in ("fusion_novelty", "novelty_mean_or_max", "novelty_timing"):
        assert fit_scorer(mode, y, gat, both if mode != "fusion_novelty" else vgae).gat_threshold == 0.5
    # 30 benign validation windows at 0.7: the bar rises above them, below the attacks' 0.95
    noisy = gat.clone()
    noisy[100:130] = 0.7
    s = fit_scorer("novelty_timing", y, noisy, both)
    assert s.gat_threshold == pytest.approx((0.95 + 0.7) / 2)
    assert s == fit_scorer("novelty_timing", y, noisy, both)  # deterministic
    quiet = torch.zeros(4).double()
    low = torch.full((4,), -5.0).double()
    new_gat = torch.tensor([0.7, 0.8, 0.9, 0.95]).double()
    assert s.predict(new_gat, torch.stack([low, low], 1), quiet).tolist() == [0, 0, 1, 1]
    assert s.by_gat(new_gat).tolist() == [False, False, True, True]
    # the decision stays "score >= 0.5", and the other parts still flag on their own
    high = torch.full((4,), 1e3).double()
    assert s.predict(new_gat, torch.stack([high, low], 1), quiet).tolist() == [1, 1, 1, 1]
    assert s.predict(new_gat, torch.stack([low, low], 1), torch.ones(4).double()).tolist() == [1, 1, 1, 1]
    # the published classifier and fusion_max keep 0.5
    assert fit_scorer("gat", y, noisy).predict(new_gat, None).tolist() == [1, 1, 1, 1]
    assert fit_scorer("fusion_max", y, noisy, vgae).gat_threshold == 0.5


def _val() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    # 200 validation windows: the GAT knows attack type A (first 20 attacks), the VGAE sees all
    g = torch.Generator().manual_seed(1)
    y = torch.zeros(200, dtype=torch.long)
    y[:40] = 1
    gat = torch.full((200,), 0.05).double()
    gat[:20] = 0.95
    vgae = torch.randn(200, generator=g).double()
    vgae[:40] += 6
    return y, gat, vgae


def test_each_mode_separates_what_its_models_see() -> None:
    y, gat, vgae = _val()
    inputs = {m: torch.stack([vgae, vgae], dim=1) if len(vgae_pools(m)) == 2 else vgae for m in SCORING_MODES}
    got = {m: fit_scorer(m, y, gat_prob=gat, vgae_score=inputs[m]) for m in SCORING_MODES}
    assert got["gat"] == Scorer("gat")  # the published decision: probability >= 0.5
    assert _f1(got["gat"].predict(gat, vgae), y) == pytest.approx(2 * 20 / 60)
    quiet = torch.zeros(len(y)).double()  # no window's timing flagged
    for mode in SCORING_MODES[1:]:
        assert _f1(got[mode].predict(gat, inputs[mode], quiet), y) == pytest.approx(1.0), mode
    # the VGAE is standardised by the benign windows: centre = their median
    assert got["vgae"].vgae_centre == pytest.approx(float(vgae[40:].median()))


def test_fusion_max_flags_what_either_model_flags() -> None:
    y, gat, vgae = _val()
    s = fit_scorer("fusion_max", y, gat_prob=gat, vgae_score=vgae)
    v = fit_scorer("vgae", y, gat_prob=gat, vgae_score=vgae)
    new_gat = torch.tensor([0.9, 0.1, 0.1, 0.9]).double()
    new_vgae = torch.tensor([-5.0, 20.0, -5.0, 20.0]).double()
    assert s.predict(new_gat, new_vgae).tolist() == [1, 1, 0, 1]
    assert v.predict(None, new_vgae).tolist() == [0, 1, 0, 1]


def test_decision_score_puts_the_threshold_at_one_half_and_keeps_the_order() -> None:
    s = Scorer("vgae", threshold=0.8, vgae_centre=0.0, vgae_scale=1.0)
    raw = torch.linspace(-6, 6, 50).double()
    d = s.decision_score(None, raw)
    assert torch.equal((d >= 0.5).long(), s.predict(None, raw))
    assert bool((d[1:] >= d[:-1]).all()) and float(d.min()) >= 0 and float(d.max()) <= 1


def test_fitting_needs_the_models_the_mode_names() -> None:
    y, gat, _ = _val()
    with pytest.raises(ValueError, match="scoring mode 'best' is unknown"):
        fit_scorer("best", y, gat_prob=gat)
    for mode in ("vgae", "fusion_learned", "fusion_weighted", "fusion_max", "fusion_novelty"):
        with pytest.raises(ValueError, match="VGAE's anomaly scores"):
            fit_scorer(mode, y, gat_prob=gat)
    for mode in ("fusion_learned", "fusion_weighted", "fusion_max", "fusion_novelty"):
        with pytest.raises(ValueError, match="GAT's probabilities"):
            fit_scorer(mode, y, vgae_score=torch.zeros(200).double())


def _tail_bar(benign: torch.Tensor) -> float:
    """The slow reference of the novelty bar, in the scores' own units: the highest benign score
    plus its distance to the tenth highest (the bar is unchanged by the standardisation)."""
    ranked = sorted(benign.tolist(), reverse=True)
    return ranked[0] + (ranked[0] - ranked[min(10, len(ranked)) - 1])


def test_novelty_bar_is_the_highest_plus_its_distance_to_the_tenth() -> None:
    z = torch.tensor([1.0, 9.0, 2.0, 8.0, 3.0, 7.0, 4.0, 6.0, 5.0, 0.5, 0.0, -1.0]).double()
    assert novelty_bar(z) == 9.0 + (9.0 - 0.5)  # the tenth highest of 12 is 0.5
    assert novelty_bar(z, rank=1) == 9.0  # rank 1: the highest itself, the old bar
    assert novelty_bar(z[:3]) == 9.0 + (9.0 - 1.0)  # fewer than ten: the lowest
    assert novelty_bar(torch.tensor([2.5])) == 2.5
    g = torch.Generator().manual_seed(4)
    for _ in range(20):
        x = torch.randn(int(torch.randint(1, 60, (1,), generator=g)), generator=g).double()
        assert novelty_bar(x) == pytest.approx(_tail_bar(x))
    with pytest.raises(ValueError, match="at least one benign"):
        novelty_bar(torch.tensor([]))
    with pytest.raises(ValueError, match="rank 0 is invalid"):
        novelty_bar(z, rank=0)


def test_fusion_novelty_adds_only_windows_beyond_the_benign_validation_tail() -> None:
    y, gat, vgae = _val()
    s = fit_scorer("fusion_novelty", y, gat_prob=gat, vgae_score=vgae)
    bar = _tail_bar(vgae[y == 0])
    assert bar > float(vgae[y == 0].max())
    # every benign validation window stays benign; the VGAE's part is beyond the tail's bar
    assert int(s.predict(gat, vgae)[y == 0].sum()) == 0
    new_gat = torch.tensor([0.9, 0.1, 0.1, 0.1, 0.1]).double()
    top = float(vgae[y == 0].max())
    new_vgae = torch.tensor([-5.0, top + 1e-3, bar - 1e-3, bar + 1e-3, -5.0]).double()
    assert s.predict(new_gat, new_vgae).tolist() == [1, 0, 0, 1, 0]
    # the threshold reads the benign windows only: the VGAE's scores of attack windows do not move it
    vgae2 = vgae.clone()
    vgae2[:40] = 100.0
    moved = fit_scorer("fusion_novelty", y, gat_prob=gat, vgae_score=vgae2)
    assert moved.vgae_threshold == s.vgae_threshold


def test_novelty_mean_or_max_adds_windows_novel_by_either_pooled_score() -> None:
    y, gat, mean = _val()
    top = torch.randn(200, generator=torch.Generator().manual_seed(2)).double() * 3 + 10
    s = fit_scorer("novelty_mean_or_max", y, gat_prob=gat, vgae_score=torch.stack([mean, top], dim=1))
    # each column's threshold is fusion_novelty's on that column alone: beyond its benign tail
    assert s.vgae_threshold == fit_scorer("fusion_novelty", y, gat, mean).vgae_threshold
    assert s.max_threshold == fit_scorer("fusion_novelty", y, gat, top).vgae_threshold
    assert int(s.predict(gat, torch.stack([mean, top], dim=1))[y == 0].sum()) == 0
    m, t = _tail_bar(mean[y == 0]), _tail_bar(top[y == 0])
    new_gat = torch.tensor([0.9, 0.1, 0.1, 0.1, 0.1]).double()
    new_vgae = torch.tensor(
        [[-5.0, 0.0], [m + 1e-3, 0.0], [-5.0, t + 1e-3], [m - 1e-6, t - 1e-6], [-5.0, 0.0]],
        dtype=torch.float64,
    )
    assert s.predict(new_gat, new_vgae).tolist() == [1, 1, 1, 0, 0]
    with pytest.raises(ValueError, match=r"\[N, 2\] VGAE scores"):
        fit_scorer("novelty_mean_or_max", y, gat_prob=gat, vgae_score=mean)


def test_novelty_timing_adds_the_windows_of_the_declared_timing_rule() -> None:
    y, gat, mean = _val()
    top = torch.randn(200, generator=torch.Generator().manual_seed(2)).double() * 3 + 10
    vgae = torch.stack([mean, top], dim=1)
    s = fit_scorer("novelty_timing", y, gat_prob=gat, vgae_score=vgae)
    # the VGAE's parts are novelty_mean_or_max's; the timing threshold is declared, not fitted
    assert {**s.to_json(), "mode": ""} == {
        **fit_scorer("novelty_mean_or_max", y, gat, vgae).to_json(),
        "mode": "",
    }
    assert (
        s.timing_threshold == 0.0
        and needs_timing("novelty_timing")
        and not needs_timing("novelty_mean_or_max")
    )
    m = _tail_bar(mean[y == 0])
    new_gat = torch.tensor([0.9, 0.1, 0.1, 0.1]).double()
    new_vgae = torch.tensor([[-5.0, 0.0], [m + 1e-3, 0.0], [-5.0, 0.0], [-5.0, 0.0]], dtype=torch.float64)
    timing = torch.tensor([0.0, 0.0, 0.5, 0.0]).double()  # window 2: two messages a third of a period apart
    assert s.predict(new_gat, new_vgae, timing).tolist() == [1, 1, 1, 0]
    # the rule's false alarms on benign windows: 1 of the 3 benign ones here; none without benign
    assert s.timed_benign_share(timing, torch.tensor([1, 0, 0, 0])) == pytest.approx(1 / 3)
    assert s.timed_benign_share(timing, torch.ones(4)) == 0.0
    assert fit_scorer("novelty_mean_or_max", y, gat, vgae).predict(new_gat, new_vgae).tolist() == [1, 1, 0, 0]
    with pytest.raises(AssertionError, match="timing scores"):
        s.predict(new_gat, new_vgae)


def test_timing_scores_are_the_negated_smallest_period_column_of_each_window() -> None:
    rng = np.random.default_rng(0)
    nodes = rng.integers(1, 6, size=30)
    ptr = torch.from_numpy(np.concatenate([[0], np.cumsum(nodes)]))
    x = torch.zeros(int(ptr[-1]), len(PAYLOAD_NODE_FEATURES))
    col = PAYLOAD_NODE_FEATURES.index("period_ratio")
    x[:, col] = torch.from_numpy(np.minimum(0.0, rng.normal(-0.5, 1.0, int(ptr[-1])))).float()
    store = {"x": x, "node_ptr": ptr}
    idx = torch.tensor([3, 0, 29, 7])
    got = timing_scores(GraphSet(store, idx))
    want = [-min(0.0, *(float(v) for v in x[int(ptr[g]) : int(ptr[g + 1]), col])) for g in idx.tolist()]
    assert got.tolist() == pytest.approx(want)
    with pytest.raises(ValueError, match=r"data\.features payload"):
        timing_scores(
            GraphSet({"x": torch.zeros(4, 11), "node_ptr": torch.tensor([0, 4])}, torch.tensor([0]))
        )


def test_the_warm_up_gives_a_recordings_first_windows_no_verdict_in_every_mode_but_gat() -> None:
    y, gat, mean = _val()
    vgae = torch.stack([mean, mean], dim=1)
    # four test windows: the first two of a recording, then its 20th and 21st (positions 0, 1, 19, 20)
    rank = torch.tensor([0, 1, 19, 20])
    loud = torch.ones(4).double()  # every part of every mode says attack
    for mode in SCORING_MODES:
        v = vgae if vgae_pools(mode) == ("mean", "max") else mean
        s = fit_scorer(mode, y, gat_prob=gat, vgae_score=v, warmup_windows=20)
        t = loud if needs_timing(mode) else None
        v_test = torch.full((4, 2) if v.dim() == 2 else (4,), 1e6).double()
        if mode == "gat":  # the published classifier judges every window
            assert s.warmup_windows == 0 and s.predict(loud, None, None, rank).tolist() == [1, 1, 1, 1]
            continue
        assert s.warmup_windows == 20, mode
        assert s.predict(loud, v_test, t, rank).tolist() == [0, 0, 0, 1], mode
        assert s.decision_score(loud, v_test, t, rank)[:3].tolist() == [0.0, 0.0, 0.0], mode
        # the rest of the fit is the one without a warm-up
        assert {**s.to_json(), "warmup_windows": 0} == fit_scorer(mode, y, gat, v).to_json(), mode
        with pytest.raises(ValueError, match="position in its recording"):
            s.predict(loud, v_test, t)
    assert fit_scorer("fusion_max", y, gat, mean).predict(loud, torch.full((4,), 1e6).double()).sum() == 4
    with pytest.raises(ValueError, match="warmup_windows -1"):
        fit_scorer("fusion_max", y, gat, mean, warmup_windows=-1)


def test_window_ranks_count_each_windows_position_in_its_own_recording() -> None:
    # three recordings of 3, 1 and 4 windows, stored together in stream order
    store = {"file_index": torch.tensor([0, 0, 0, 1, 2, 2, 2, 2])}
    assert window_ranks(GraphSet(store, torch.arange(8))).tolist() == [0, 1, 2, 0, 0, 1, 2, 3]
    assert window_ranks(GraphSet(store, torch.tensor([7, 3, 1]))).tolist() == [3, 0, 1]
