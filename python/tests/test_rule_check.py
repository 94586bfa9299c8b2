"""The timing rule checked against the models per recording (kdgat.scoring.rules), on hand-made
windows; and its leave-one-recording-out validation against fits made fold by fold."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kdgat.scoring import Scorer, fit_scorer
from kdgat.scoring.rules import rule_by_recording, rule_validation

# the models: the GAT at 0.5; the VGAE never novel (bars far above its scores); the rule: timing > 0
SCORER = Scorer("novelty_timing", vgae_threshold=1e9, max_threshold=1e9)


def _windows(rec: list[int], y: list[int], gat: list[float], timing: list[float]):  # type: ignore[no-untyped-def]
    """Windows of 1 s each, back to back within a recording."""
    r = np.array(rec)
    window = np.concatenate([np.arange((r == k).sum()) for k in dict.fromkeys(rec)])
    return {
        "recording": r,
        "window": window,
        "y": np.array(y),
        "t_first": window.astype(float),
        "t_last": window + 1.0,
        "gat_prob": torch.tensor(gat, dtype=torch.float64),
        "vgae_score": torch.zeros(len(rec), 2),
        "timing": torch.tensor(timing, dtype=torch.float64),
    }


def test_false_alarms_of_the_models_of_the_rule_and_of_the_rule_alone_per_recording() -> None:
    w = _windows(
        rec=[0, 0, 0, 0, 0, 0, 1, 1, 1],
        y=[0, 0, 0, 0, 1, 0, 0, 1, 1],
        gat=[0.9, 0, 0, 0.9, 0.9, 0, 0, 0, 0.9],
        timing=[0, 1, 1, 1, 1, 0, 1, 1, 0],
    )
    by = rule_by_recording(SCORER, **w, after=1)  # each recording's window 0: its profile's
    # recording 0, benign windows 1, 2, 3, 5 (4 s): the GAT flags 3, the rule 1, 2, 3, only it 1, 2
    assert by[0] == {
        "benign_windows": 4,
        "benign_hours": pytest.approx(4 / 3600),
        "models_false_alarms_per_hour": pytest.approx(900.0),
        "rule_false_alarms_per_hour": pytest.approx(2700.0),
        "rule_only_false_alarms_per_hour": pytest.approx(1800.0),
        "attack_windows": 1,
        "rule_only_attack_windows": 0,  # window 4: the GAT flags it too
    }
    # recording 1: its one benign window is its profile's; the rule alone finds attack window 1
    assert by[1] == {
        "benign_windows": 0,
        "benign_hours": 0.0,
        "attack_windows": 2,
        "rule_only_attack_windows": 1,
    }


def test_validation_fits_the_models_on_the_other_recordings() -> None:
    rng = np.random.default_rng(0)
    n = 90
    rec = np.repeat([0, 1, 2], n // 3)
    y = torch.from_numpy((rng.random(n) < 0.3).astype(np.int64))
    w = _windows(
        rec=rec.tolist(),
        y=y.tolist(),
        gat=np.clip(y.numpy() * 0.5 + rng.normal(0.3, 0.2, n), 0, 1).tolist(),
        timing=(rng.random(n) < 0.1).astype(float).tolist(),
    )
    w["vgae_score"] = torch.from_numpy(rng.normal(1, 0.3, (n, 2)) + y.numpy()[:, None])
    got = rule_validation(**{**w, "y": y}, after=2)
    assert sorted(got) == [0, 1, 2]
    for r in (0, 1, 2):
        held, rest = rec == r, torch.from_numpy(rec != r)
        scorer = fit_scorer(
            "novelty_timing", y[rest], gat_prob=w["gat_prob"][rest], vgae_score=w["vgae_score"][rest]
        )
        part = {
            k: (v[torch.from_numpy(held)] if isinstance(v, torch.Tensor) else v[held]) for k, v in w.items()
        }
        assert got[r] == rule_by_recording(scorer, **part, after=2)[r]
