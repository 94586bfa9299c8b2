"""Event-level detection figures: what a security engineer asks of a detector beside window F1.

How a window is labelled (the rule of :func:`kdgat.data.graphs.build_window_graphs`): a window of
``W`` messages is an *attack window* (``y = 1``) when it holds **at least one** injected message
(label 1); one injected message among 99 benign ones makes an attack window. Rare attacks (a
spoofed RPM value: 28 injected messages in 166,162) therefore make few attack windows, each almost
all benign traffic.

Definitions, per recording, over its windows in stream order (``window`` = its index in the
recording, so windows that are not scored — another split's — break runs):

- **episode**: a maximal run of consecutive attack windows (window indices ``i, i+1, ..., j``,
  every one ``y = 1``). With ``merge_gap_s > 0``, attack windows at most that many seconds apart
  are one episode even with benign windows between them (default 0: any benign window ends it).
- **detected**: at least one window of the episode is flagged (``pred = 1``).
- **delay** of a detected episode: from its start (the timestamp of the first injected message
  of its first window) to the *verdict time* of its first flagged window, in seconds, at least 0:
  the time by which every message the window's features read has arrived
  (:mod:`kdgat.data.verdict`) — the window's last message, or later when a feature looks past the
  window (the payload features' ``period_ratio`` waits for the ID's next messages; the payload
  profile and per-recording calibration for the recording's first windows).
- **false alarm**: a flagged benign window (``y = 0``, ``pred = 1``); a run of consecutive
  flagged benign windows is one *alarm* (``false_alarm_events``); both are given per hour of
  benign traffic = the summed durations (last message - first message, at least 0) of the benign
  windows scored; :func:`false_alarms_by_recording` gives them per recording.

Nothing here is fitted: the figures read the predictions, the labels and the timestamps only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt


@dataclass(frozen=True)
class EventFigures:
    """Episode and false-alarm figures of one set of scored windows (see the module docstring)."""

    episodes: int
    detected: int
    median_delay_s: float | None  # over detected episodes; None when none was detected
    p90_delay_s: float | None
    false_alarm_windows: int
    false_alarm_events: int
    benign_hours: float

    @property
    def detected_share(self) -> float | None:
        return self.detected / self.episodes if self.episodes else None

    @property
    def false_alarms_per_hour(self) -> float | None:
        return self.false_alarm_windows / self.benign_hours if self.benign_hours > 0 else None

    @property
    def false_alarm_events_per_hour(self) -> float | None:
        return self.false_alarm_events / self.benign_hours if self.benign_hours > 0 else None

    def to_json(self) -> dict[str, Any]:
        return {
            "episodes": self.episodes,
            "detected": self.detected,
            "detected_share": self.detected_share,
            "median_delay_s": self.median_delay_s,
            "p90_delay_s": self.p90_delay_s,
            "false_alarm_windows": self.false_alarm_windows,
            "false_alarm_events": self.false_alarm_events,
            "benign_hours": self.benign_hours,
            "false_alarms_per_hour": self.false_alarms_per_hour,
            "false_alarm_events_per_hour": self.false_alarm_events_per_hour,
        }


def _run_ids(new: npt.NDArray[np.bool_]) -> npt.NDArray[np.int64]:
    """Run number of each row, a row with ``new`` starting the next run."""
    return np.cumsum(new) - 1 if len(new) else np.zeros(0, np.int64)


def event_figures(
    *,
    recording: npt.ArrayLike,
    window: npt.ArrayLike,
    y: npt.ArrayLike,
    pred: npt.ArrayLike,
    t_first: npt.ArrayLike,
    t_last: npt.ArrayLike,
    t_attack: npt.ArrayLike,
    t_verdict: npt.ArrayLike,
    merge_gap_s: float = 0.0,
) -> EventFigures:
    """Episodes detected, delays and false alarms of scored windows.

    Args (one entry per scored window, any order):
        recording: the window's recording (any integer id; episodes never span two recordings)
        window: its index within the recording (stream order)
        y, pred: label and prediction (0/1)
        t_first, t_last: timestamps (s) of its first and last message
        t_attack: timestamp of its first injected message (read only where ``y = 1``)
        t_verdict: its verdict time (:func:`kdgat.data.verdict.verdict_times`), the delays' end
        merge_gap_s: attack windows of a recording at most this many seconds apart (last message
            of one to first of the next) are one episode even with benign windows between them
            (0: only adjacent windows); the benign windows between stay benign windows
    """
    if merge_gap_s < 0:
        raise ValueError(f"merge_gap_s {merge_gap_s} is invalid: expected >= 0")
    rec = np.asarray(recording, np.int64)
    win = np.asarray(window, np.int64)
    lab = np.asarray(y).astype(bool)
    flag = np.asarray(pred).astype(bool)
    tf, tl, ta, tv = (np.asarray(a, np.float64) for a in (t_first, t_last, t_attack, t_verdict))
    if not len(rec) == len(win) == len(lab) == len(flag) == len(tf) == len(tl) == len(ta) == len(tv):
        raise ValueError("recording, window, y, pred, t_first, t_last, t_attack, t_verdict differ in length")
    if bool((tv < tl).any()):
        raise ValueError("a window's verdict time is before its last message: expected t_verdict >= t_last")
    order = np.lexsort((win, rec))
    rec, win, lab, flag = rec[order], win[order], lab[order], flag[order]
    tf, tl, ta, tv = tf[order], tl[order], ta[order], tv[order]

    # episodes: attack windows in stream order; a new one at a new recording or after a gap
    a = np.flatnonzero(lab)
    new = np.ones(len(a), bool)
    if len(a) > 1:
        same_rec = rec[a[1:]] == rec[a[:-1]]
        adjacent = win[a[1:]] == win[a[:-1]] + 1
        close = (tf[a[1:]] - tl[a[:-1]]) <= merge_gap_s if merge_gap_s > 0 else np.zeros(len(a) - 1, bool)
        new[1:] = ~(same_rec & (adjacent | close))
    episode = _run_ids(new)
    n_episodes = int(episode[-1]) + 1 if len(a) else 0
    start = np.full(n_episodes, np.inf)
    np.minimum.at(start, episode, ta[a])
    hit = flag[a]
    # rows are in stream order: an episode's first flagged row is its first in the flagged subset
    hit_episode, first = np.unique(episode[hit], return_index=True)
    delays = np.maximum(0.0, tv[a[hit]][first] - start[hit_episode])

    # false alarms: flagged benign windows; adjacent ones of a recording are one alarm event
    f = np.flatnonzero(~lab & flag)
    fa_new = np.ones(len(f), bool)
    if len(f) > 1:
        fa_new[1:] = ~((rec[f[1:]] == rec[f[:-1]]) & (win[f[1:]] == win[f[:-1]] + 1))
    benign_seconds = float(np.maximum(0.0, tl[~lab] - tf[~lab]).sum())
    return EventFigures(
        episodes=n_episodes,
        detected=len(hit_episode),
        median_delay_s=float(np.median(delays)) if len(delays) else None,
        p90_delay_s=float(np.quantile(delays, 0.9)) if len(delays) else None,
        false_alarm_windows=len(f),
        false_alarm_events=int(fa_new.sum()),
        benign_hours=benign_seconds / 3600.0,
    )


def false_alarms_by_recording(
    *,
    recording: npt.ArrayLike,
    y: npt.ArrayLike,
    pred: npt.ArrayLike,
    t_first: npt.ArrayLike,
    t_last: npt.ArrayLike,
) -> dict[int, dict[str, Any]]:
    """Per recording with a scored benign window: its flagged benign windows, its hours of benign
    traffic (summed as :func:`event_figures` sums them) and their ratio (``None`` without benign
    time). Arguments as :func:`event_figures`'s, one entry per scored window."""
    rec = np.asarray(recording, np.int64)
    benign = ~np.asarray(y).astype(bool)
    flag = np.asarray(pred).astype(bool)
    seconds = np.maximum(0.0, np.asarray(t_last, np.float64) - np.asarray(t_first, np.float64))
    out: dict[int, dict[str, Any]] = {}
    for r in np.unique(rec[benign]).tolist():
        mine = benign & (rec == r)
        hours = float(seconds[mine].sum()) / 3600.0
        alarms = int((mine & flag).sum())
        out[int(r)] = {
            "benign_windows": int(mine.sum()),
            "false_alarm_windows": alarms,
            "benign_hours": hours,
            "false_alarms_per_hour": alarms / hours if hours > 0 else None,
        }
    return out


def window_times(
    timestamp: npt.NDArray[np.float64],
    label: npt.NDArray[np.integer],
    window_start: npt.NDArray[np.int64],
    window_size: int,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Per window of one recording: timestamps of its first message, its last message, and its
    first injected message (``nan`` in a window without one) — the inputs of :func:`event_figures`."""
    msg = window_start[:, None] + np.arange(window_size)
    injected = np.asarray(label)[msg] != 0
    first_injected = msg[np.arange(len(msg)), np.argmax(injected, axis=1)] if len(msg) else window_start
    t_attack = np.where(injected.any(axis=1), timestamp[first_injected], np.nan)
    return timestamp[window_start], timestamp[window_start + window_size - 1], t_attack
