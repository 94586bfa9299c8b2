"""When a window's verdict can be given: the last message that any of its features read.

A window of ``W`` messages ends with its message ``s + W - 1``, but a detector cannot judge it then
when a feature of the window reads later messages. The delays of :mod:`kdgat.scoring.events` are
measured to the *verdict time* of a window: the time by which every message its features read has
arrived. Per feature set (``GraphParams.features``), what a window ``[s, s + W)`` reads:

- ``paper`` (:mod:`kdgat.data.graphs`): its own messages only. The CAN-ID vocabulary and the
  default normalisation are fitted on training windows, not on the window's recording stream.
- ``vehicle_independent`` (:mod:`kdgat.data.features_vi`): its own messages and earlier ones
  (``prev(m)``, the stream's first timestamp, earlier transitions): nothing after ``s + W - 1``.
- ``payload`` (:mod:`kdgat.data.features_payload`): the vehicle-independent columns; the payload
  profile, learned from the recording's first ``profile_messages`` messages (``profile_head``), so
  every window waits for message ``profile_messages - 1``; and ``period_ratio``, which for a
  message ``m`` of a *periodic* profiled ID (the only IDs it reads) looks at ``next(m)``, the ID's
  next message, and, when that is the nearer neighbour (``t[next(m)] - t[m] < t[m] - t[prev(m)]``),
  at ``next(next(m))`` too. The other payload columns read ``m`` and ``prev(m)`` only.
- per-recording calibration (``calibration_windows = K > 0``, :mod:`kdgat.data.calibration`):
  every window of a recording is normalised by the recording's first ``K`` windows, so it waits
  for the last message the normalised columns of those windows read. The normalised columns are
  the vehicle-independent (or paper) ones and the edges, which read nothing after their window
  (the payload columns are stored raw), so that is the end of the recording's ``K``-th window.

The verdict message of a window is the largest stream index of all of these (messages arrive in
stream order: once message ``v`` is there, so is every earlier one), and its verdict time the
latest timestamp among messages ``0 .. v`` (:func:`verdict_times`; ``t[v]`` when the timestamps
rise). A message that does not exist (an ID's last message has no ``next``) is not waited for: at
the end of a stream the verdict comes with the last message. Nothing here reads a label.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from kdgat.data.features_payload import PayloadProfile
from kdgat.data.features_vi import previous_occurrence


def profile_head(profile_windows: int, stride: int, window_size: int, messages: int) -> int:
    """How many of a recording's first messages its payload profile is learned from: those of its
    first ``profile_windows`` windows (all of them when the recording is shorter)."""
    return min(messages, (profile_windows - 1) * stride + window_size)


def period_ratio_reads(
    can_id: npt.NDArray[np.uint32],
    timestamp: npt.NDArray[np.float64],
    profile: PayloadProfile,
    previous: npt.NDArray[np.int64] | None = None,
) -> npt.NDArray[np.int64]:
    """Per message ``m`` of the stream: the last message ``period_ratio`` reads for it (``m``
    itself when it reads nothing later: an ID that is not periodic or not profiled, or no later
    message of the ID)."""
    n = len(can_id)
    prev = previous_occurrence(can_id) if previous is None else previous
    nxt = np.full(n, -1, np.int64)
    nxt[prev[prev >= 0]] = np.flatnonzero(prev >= 0)
    row = np.searchsorted(profile.ids, can_id)
    known = row < len(profile.ids)
    known[known] = profile.ids[row[known]] == can_id[known]
    read = known & profile.periodic[np.where(known, row, 0)] if len(profile.ids) else np.zeros(n, bool)
    out = np.arange(n, dtype=np.int64)
    has_next = read & (nxt >= 0)
    out[has_next] = nxt[has_next]
    m = np.flatnonzero(has_next)
    back = np.where(prev[m] >= 0, timestamp[m] - timestamp[np.maximum(prev[m], 0)], np.inf)
    ahead = timestamp[nxt[m]] - timestamp[m]
    # the next message is the nearer neighbour: the spacing without it reads the one after it
    m2 = m[(ahead < back) & (nxt[nxt[m]] >= 0)]
    out[m2] = nxt[nxt[m2]]
    return out


def verdict_messages(
    *,
    can_id: npt.NDArray[np.uint32],
    timestamp: npt.NDArray[np.float64],
    window_start: npt.NDArray[np.int64],
    window_size: int,
    features: str,
    calibration_windows: int = 0,
    profile: PayloadProfile | None = None,
    profile_messages: int = 0,
    previous: npt.NDArray[np.int64] | None = None,
) -> npt.NDArray[np.int64]:
    """Per window of one recording (``window_start``: its windows in stream order, as
    :func:`~kdgat.data.graphs.build_window_graphs` made them): the stream index of the last message
    its features read (module docstring). ``profile`` and ``profile_messages``: the payload
    profile the windows' payload columns were computed with and how many first messages it was
    learned from (``features="payload"`` only); ``previous``: ``previous_occurrence(can_id)``
    when the caller has it."""
    if features not in ("paper", "vehicle_independent", "payload"):
        raise ValueError(f"features is {features!r}; expected paper, vehicle_independent or payload")
    g, w = len(window_start), window_size
    out = window_start.astype(np.int64) + (w - 1)
    if g == 0:
        return out
    if features == "payload":
        if profile is None:
            raise ValueError(
                "the payload features' verdict needs the payload profile they were computed with"
            )
        reads = period_ratio_reads(can_id, timestamp, profile, previous)
        msg = window_start[:, None] + np.arange(w)
        out = np.maximum(out, reads[msg].max(axis=1))
        out = np.maximum(out, profile_messages - 1)
    if calibration_windows > 0:
        # the calibrated columns of the recording's first K windows read nothing after them
        out = np.maximum(out, int(window_start[min(calibration_windows, g) - 1]) + w - 1)
    return out


def verdict_times(
    timestamp: npt.NDArray[np.float64], verdict_message: npt.NDArray[np.int64]
) -> npt.NDArray[np.float64]:
    """Per window: the latest timestamp of the messages up to its verdict message (by then all of
    them have arrived): ``timestamp[verdict_message]`` when the timestamps rise."""
    if len(verdict_message) == 0:
        return np.zeros(0, np.float64)
    return np.maximum.accumulate(np.asarray(timestamp, np.float64))[verdict_message]
