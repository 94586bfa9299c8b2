"""The real-data bench's selection (bench/real-data/valselect.py) reads no test window: given the
outer test windows' labels shuffled and their model outputs replaced, it makes the same choices,
while the test figures it reports afterwards do change; and the bench's scoring of saved outputs
(run.py's score_modes) reports delays to the verdict time and false alarms per hour per recording."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "real-data"


@pytest.fixture(scope="module")
def bench() -> tuple[ModuleType, ModuleType]:
    """(valselect, run): the bench's modules, imported from their folder."""
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location("bench_real_data_valselect_sel", BENCH / "valselect.py")
        assert spec is not None and spec.loader is not None
        valselect = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(valselect)
        run = sys.modules.pop("run")  # valselect imports the bench's run.py beside it
    finally:
        sys.path.remove(str(BENCH))
    return valselect, run


def _outputs(seed: int, sharp: float) -> dict[str, np.ndarray]:
    """Saved outputs of one run (run.py --scores): three training recordings' validation windows,
    two test recordings; ``sharp``: how well the GAT's probability separates the validation windows."""
    rng = np.random.default_rng(seed)

    def part(n: int, recordings: list[int], attack_share: float) -> dict[str, np.ndarray]:
        y = (rng.random(n) < attack_share).astype(np.int64)
        rec = np.sort(rng.choice(recordings, n))
        window = np.concatenate([np.arange((rec == r).sum()) for r in recordings])
        t_first = window * 0.1 + rec * 1000.0
        return {
            "y": y,
            "gat": np.clip(y * sharp + rng.normal(0.25, 0.2, n), 0, 1).astype(np.float32),
            "vgae_mean": (rng.normal(1, 0.3, n) + y).astype(np.float32),
            "vgae_max": (rng.normal(2, 0.5, n) + y).astype(np.float32),
            "timing": np.where(rng.random(n) < 0.05, 1.0, 0.0),
            "recording": rec,
            "window": window,
            "t_first": t_first,
            "t_last": t_first + 0.099,
        }

    val, test = part(300, [0, 1, 2], 0.3), part(400, [3, 4], 0.2)
    out = {f"val_{k}": v for k, v in val.items()}
    out |= {f"test_{k}": v for k, v in test.items()}
    out["test_t_attack"] = np.where(test["y"] == 1, test["t_first"] + 0.05, np.nan)
    out["test_t_verdict"] = test["t_last"] + rng.uniform(0, 0.02, len(test["y"]))
    out["recording_names"] = np.array(["r0", "r1", "r2", "t3", "t4"])
    return out


def _save(folder: Path, runs: dict[str, dict[str, np.ndarray]]) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    for name, arrays in runs.items():
        np.savez(folder / f"{name}.npz", **arrays)  # type: ignore[arg-type]
    return {name: folder / f"{name}.npz" for name in runs}


def _scramble_tests(arrays: dict[str, np.ndarray], seed: int) -> dict[str, np.ndarray]:
    """The outer test windows' labels shuffled and every model output of theirs replaced."""
    rng = np.random.default_rng(seed)
    out = dict(arrays)
    out["test_y"] = rng.permutation(arrays["test_y"])
    out["test_t_attack"] = np.where(out["test_y"] == 1, arrays["test_t_first"] + 0.05, np.nan)
    for k in ("test_gat", "test_vgae_mean", "test_vgae_max", "test_timing"):
        out[k] = rng.permutation(arrays[k])[::-1].copy()
    return out


@pytest.mark.parametrize("folds", ["recordings", "halvings"])
def test_the_selection_makes_the_same_choices_given_shuffled_test_labels(
    bench: tuple[ModuleType, ModuleType], tmp_path: Path, folds: str
) -> None:
    valselect, _ = bench
    # scenario s1: run A's GAT separates the validation windows better; s2: run B's
    a = {"s1__payload+calib": _outputs(0, 0.6), "s2__payload+calib": _outputs(1, 0.1)}
    b = {"s1__payload+calib": _outputs(0, 0.1), "s2__payload+calib": _outputs(1, 0.6)}
    mode = "novelty_timing"
    picks = valselect.pick(_save(tmp_path / "a", a), _save(tmp_path / "b", b), mode, 4, 7, folds)
    assert [p["higher"] for p in picks.values()] == ["A", "B"]  # the validation windows decide
    assert {p["folds"] for p in picks.values()} == {folds}
    for seed in (1, 2):
        a2 = {k: _scramble_tests(v, seed) for k, v in a.items()}
        b2 = {k: _scramble_tests(v, seed + 10) for k, v in b.items()}
        again = valselect.pick(
            _save(tmp_path / f"a{seed}", a2), _save(tmp_path / f"b{seed}", b2), mode, 4, 7, folds
        )
        assert again == picks  # out-of-fold F1s compared exactly
        # the figures reported after the picks do read the test windows
        before = valselect.test_figures(tmp_path / "a" / "s1__payload+calib.npz", mode, 2.0)
        after = valselect.test_figures(tmp_path / f"a{seed}" / "s1__payload+calib.npz", mode, 2.0)
        assert before["f1"] != after["f1"]


def test_recordings_folds_fit_on_the_other_training_recordings(
    bench: tuple[ModuleType, ModuleType], tmp_path: Path
) -> None:
    """Leave one training recording out: the out-of-fold F1 is that of each recording's validation
    windows scored by the mode fitted on the other recordings' (computed here fold by fold)."""
    valselect, _ = bench
    import torch

    from kdgat.scoring import f1_score, fit_scorer

    arrays = _outputs(3, 0.4)
    path = _save(tmp_path, {"s__v": arrays})["s__v"]
    got, n, na, how = valselect.crossfit_f1(path, "fusion_max", 4, 7, "recordings")
    assert (n, na, how) == (300, int(arrays["val_y"].sum()), "recordings")
    y = torch.from_numpy(arrays["val_y"])
    pred = torch.zeros_like(y)
    for r in (0, 1, 2):
        fit = torch.from_numpy(arrays["val_recording"] != r)
        gat, vgae = torch.from_numpy(arrays["val_gat"]), torch.from_numpy(arrays["val_vgae_mean"])
        scorer = fit_scorer("fusion_max", y[fit], gat_prob=gat[fit], vgae_score=vgae[fit])
        pred[~fit] = scorer.predict(gat[~fit], vgae[~fit])
    assert got == f1_score(pred, y)


def test_the_bench_reports_delays_to_the_verdict_and_false_alarms_per_recording(
    bench: tuple[ModuleType, ModuleType],
) -> None:
    _, run = bench
    o = _outputs(4, 0.5)
    out: dict[str, Any] = run.score_modes(o, vgae_pool="mean", merge_gap_s=0.0, warmup=0)
    timed = out["novelty_timing"]
    assert timed["delay_end"] == "verdict"
    assert set(timed["false_alarms_by_recording"]) == {"t3", "t4"}
    assert (
        sum(f["false_alarm_windows"] for f in timed["false_alarms_by_recording"].values())
        == (timed["events"]["false_alarm_windows"])
    )
    # the timing rule per test recording and per training recording (validation, leave one out)
    assert set(timed["timing_rule_test"]) == {"t3", "t4"}
    assert set(timed["timing_rule_validation"]) == {"r0", "r1", "r2"}
    row = timed["timing_rule_validation"]["r0"]
    assert {
        "models_false_alarms_per_hour",
        "rule_false_alarms_per_hour",
        "rule_only_false_alarms_per_hour",
    } <= set(row)
    # the same outputs with every verdict at the window's end: no later delay, none earlier
    at_end = run.score_modes(
        {**o, "test_t_verdict": o["test_t_last"]}, vgae_pool="mean", merge_gap_s=0.0, warmup=0
    )
    assert at_end["gat"]["events"]["median_delay_s"] <= out["gat"]["events"]["median_delay_s"]
    # outputs saved before the verdict times: no delay is reported rather than a wrong one
    old = {k: v for k, v in o.items() if k != "test_t_verdict"}
    legacy = run.score_modes(old, vgae_pool="mean", merge_gap_s=0.0, warmup=0)
    assert legacy["gat"]["events"]["median_delay_s"] is None and legacy["gat"]["delay_end"] is None
