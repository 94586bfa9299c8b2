"""Event-level figures (kdgat.scoring.events) on hand-made windows, and the window-labelling rule."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kdgat.data import build_window_graphs
from kdgat.scoring.events import event_figures, false_alarms_by_recording, window_times


def _windows(y: list[int], pred: list[int], rec: list[int] | None = None, seconds: float = 1.0):  # type: ignore[no-untyped-def]
    """Windows of 1 s each, back to back; the first injected message 0.25 s into an attack window."""
    n = len(y)
    rec = rec or [0] * n
    window = np.arange(n) - np.searchsorted(rec, rec)  # index within its recording
    tf = np.arange(n) * seconds
    return {
        "recording": rec,
        "window": window,
        "y": y,
        "pred": pred,
        "t_first": tf,
        "t_last": tf + seconds,
        "t_attack": np.where(np.array(y) == 1, tf + 0.25, np.nan),
        "t_verdict": tf + seconds,  # features that read nothing past the window
    }


def test_two_episodes_one_detected_late_one_missed_and_a_false_alarm_run() -> None:
    #      windows: 0  1  2  3  4  5  6  7  8  9
    y = [0, 1, 1, 1, 0, 0, 1, 1, 0, 0]
    pred = [1, 0, 0, 1, 0, 0, 0, 0, 1, 1]
    ev = event_figures(**_windows(y, pred))
    assert ev.episodes == 2  # windows 1-3 and 6-7
    assert ev.detected == 1
    assert ev.detected_share == 0.5
    # episode 1 starts at 1.25 s (first injected message of window 1), first flagged window 3 ends at 4 s
    assert ev.median_delay_s == pytest.approx(2.75)
    assert ev.false_alarm_windows == 3  # windows 0, 8, 9
    assert ev.false_alarm_events == 2  # {0} and {8, 9}
    assert ev.benign_hours == pytest.approx(5 / 3600)
    assert ev.false_alarms_per_hour == pytest.approx(3 / (5 / 3600))


def test_the_delay_runs_to_the_verdict_time_of_the_first_flagged_window() -> None:
    # windows 1-3 attack, window 2 flagged first; its features read messages 0.4 s past its end
    w = _windows([0, 1, 1, 1], [0, 0, 1, 1])
    w["t_verdict"] = w["t_last"] + np.array([0.0, 0.0, 0.4, 0.0])
    ev = event_figures(**w)
    assert ev.median_delay_s == pytest.approx(3.4 - 1.25)
    w["t_verdict"] = w["t_last"] - 0.1
    with pytest.raises(ValueError, match="verdict time is before its last message"):
        event_figures(**w)


def test_false_alarms_per_hour_of_each_recording() -> None:
    y = [0, 0, 1, 0, 0, 0]
    pred = [1, 0, 1, 0, 0, 0]
    w = _windows(y, pred, [0, 0, 0, 1, 1, 1])
    by = false_alarms_by_recording(**{k: w[k] for k in ("recording", "y", "pred", "t_first", "t_last")})
    assert by[0] == {
        "benign_windows": 2,
        "false_alarm_windows": 1,
        "benign_hours": pytest.approx(2 / 3600),
        "false_alarms_per_hour": pytest.approx(1800.0),
    }
    assert by[1]["false_alarm_windows"] == 0 and by[1]["false_alarms_per_hour"] == 0.0
    total = event_figures(**w)
    assert sum(r["false_alarm_windows"] for r in by.values()) == total.false_alarm_windows
    assert sum(r["benign_hours"] for r in by.values()) == pytest.approx(total.benign_hours)


def test_episodes_do_not_span_recordings_and_input_order_does_not_matter() -> None:
    y = [0, 1, 1, 1, 1, 0]
    pred = [0, 0, 1, 1, 0, 0]
    rec = [0, 0, 0, 1, 1, 1]  # windows 1-2 of recording 0, windows 0-1 of recording 1
    w = _windows(y, pred, rec)
    ev = event_figures(**w)
    assert ev.episodes == 2 and ev.detected == 2
    perm = np.random.default_rng(0).permutation(len(y))
    shuffled = {k: np.asarray(v)[perm] for k, v in w.items()}
    assert event_figures(**shuffled) == ev


def test_a_window_not_scored_breaks_an_episode_unless_merged_by_time() -> None:
    w = _windows([1, 1, 1, 0], [0, 1, 0, 0])
    keep = np.array([0, 2, 3])  # window 1 belongs to another split: 0 and 2 are not adjacent
    part = {k: np.asarray(v)[keep] for k, v in w.items()}
    assert event_figures(**part).episodes == 2
    assert event_figures(**part, merge_gap_s=1.5).episodes == 1


def test_merge_gap_joins_episodes_but_benign_windows_between_stay_benign() -> None:
    y = [1, 0, 1, 0, 0, 0, 1]
    pred = [0, 1, 1, 0, 0, 0, 0]
    ev = event_figures(**_windows(y, pred), merge_gap_s=1.0)  # gaps: 1 s (joined), 3 s (not)
    assert ev.episodes == 2 and ev.detected == 1
    assert ev.median_delay_s == pytest.approx(3.0 - 0.25)
    assert ev.false_alarm_windows == 1


def test_nothing_to_find() -> None:
    ev = event_figures(**_windows([0, 0], [0, 0]))
    assert (ev.episodes, ev.detected, ev.detected_share, ev.median_delay_s) == (0, 0, None, None)
    assert ev.false_alarms_per_hour == 0.0
    assert event_figures(**_windows([1], [0])).false_alarms_per_hour is None  # no benign time


def test_one_injected_message_makes_an_attack_window_and_window_times_find_it() -> None:
    # 3 windows of 4 messages; message 6 alone is injected
    can_id = np.array([1, 2, 1, 2] * 3, np.uint32)
    payload = np.zeros((12, 8), np.uint8)
    label = np.zeros(12, np.uint8)
    label[6] = 1
    g = build_window_graphs(can_id, payload, label, 4, 4)
    assert g.y.tolist() == [0, 1, 0]
    ts = np.arange(12) * 0.5
    tf, tl, ta = window_times(ts, label, g.window_start, 4)
    assert tf.tolist() == [0.0, 2.0, 4.0] and tl.tolist() == [1.5, 3.5, 5.5]
    assert math.isnan(ta[0]) and ta[1] == 3.0 and math.isnan(ta[2])
