"""Verdict times (kdgat.data.verdict): the last message a window's features read, against a slow
pure-Python reference of each feature's reads on hand-made and random streams; and, what a user
relies on, that no message after a window's verdict message changes any of its features (the
features of the stream cut just after it are the full stream's), while a message it reads does."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from kdgat.data import GraphParams, load_graphs, preprocess_dataset, read_can_file, write_synthetic_dataset
from kdgat.data.build import list_sources
from kdgat.data.calibration import calibrate_rows
from kdgat.data.features_payload import PAYLOAD_NODE_FEATURES, payload_features, payload_profile
from kdgat.data.features_vi import VI_NODE_FEATURES, vehicle_independent_features
from kdgat.data.graphs import build_window_graphs
from kdgat.data.verdict import profile_head, verdict_messages, verdict_times


def _prev(ids: list[int], m: int) -> int | None:
    return next((j for j in range(m - 1, -1, -1) if ids[j] == ids[m]), None)


def _next(ids: list[int], m: int) -> int | None:
    return next((j for j in range(m + 1, len(ids)) if ids[j] == ids[m]), None)


def _periodic_ids(ids: list[int], t: list[float], head: int) -> set[int]:
    """The IDs of the first ``head`` messages with a period (median gap) and no gap under half of it."""
    out = set()
    for v in set(ids[:head]):
        gaps = sorted(
            t[m] - t[p] for m in range(head) if ids[m] == v and (p := _prev(ids[:head], m)) is not None
        )
        if gaps and gaps[0] >= gaps[(len(gaps) - 1) // 2] / 2:
            out.add(v)
    return out


def reference_verdicts(  # type: ignore[no-untyped-def]
    ids: list[int], t: list[float], w: int, s: int, features: str, calib: int, head: int
):
    """Per window: the largest message index any of its features reads, straight from the feature
    modules' definitions."""
    starts = list(range(0, len(ids) - w + 1, s))
    periodic = _periodic_ids(ids, t, head) if features == "payload" else set()
    out = []
    for start in starts:
        reads = list(range(start, start + w))  # every feature reads the window's own messages
        if features == "payload":
            reads.append(head - 1)  # the profile: the recording's first `head` messages
            for m in range(start, start + w):
                if ids[m] not in periodic:
                    continue  # period_ratio reads periodic profiled IDs only
                n = _next(ids, m)
                if n is None:
                    continue
                reads.append(n)  # off(prev(m), next(m))
                p = _prev(ids, m)
                back = t[m] - t[p] if p is not None else math.inf
                if t[n] - t[m] < back and (nn := _next(ids, n)) is not None:
                    reads.append(nn)  # next(m) is the partner: off(m, next(next(m)))
        if calib:
            reads.append(starts[min(calib, len(starts)) - 1] + w - 1)  # the first K windows
        out.append(max(reads))
    return out


def _stream(
    seed: int, n: int = 400
) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.uint8], npt.NDArray[np.float64]]:
    """A periodic ID every 10 ms, a second every 25 ms, an event-driven one, extra messages of the
    first (injected, close to a true one) after the first 120 messages; random payloads."""
    rng = np.random.default_rng(seed)
    parts = [
        (0x100, 0.01 * np.arange(1, 200) + rng.normal(0, 3e-4, 199)),
        (0x200, 0.025 * np.arange(1, 80) + rng.normal(0, 3e-4, 79)),
        (0x300, np.cumsum(rng.exponential(0.01, 150))),
        (0x100, rng.uniform(0.6, 1.9, 12)),  # injected
    ]
    ids = np.concatenate([np.full(len(ts), v, np.uint32) for v, ts in parts])
    t = np.concatenate([ts for _, ts in parts])
    order = np.argsort(t, kind="stable")[:n]
    payload = rng.integers(0, 256, (len(order), 8)).astype(np.uint8)
    return ids[order], payload, t[order]


def window_features(  # type: ignore[no-untyped-def]
    ids, payload, t, w: int, s: int, features: str, calib: int, head: int
) -> list[tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]]:
    """Each window's node and edge rows as the cache stores them (the build's normalisation: the
    recording by its first ``calib`` windows, the payload columns raw)."""
    label = np.zeros(len(ids), np.uint8)
    g = build_window_graphs(ids, payload, label, w, s)
    if features != "paper":
        dlc = np.full(len(ids), 8, np.uint8)
        g = vehicle_independent_features(g, timestamp=t, can_id=ids, dlc=dlc, payload=payload, window_size=w)
    if features == "payload":
        prof = payload_profile(ids[:head], payload[:head], t[:head])
        g = payload_features(g, prof, can_id=ids, payload=payload, timestamp=t, window_size=w)
    x = g.x.astype(np.float64)
    e = g.edge_attr.astype(np.float64)
    if calib:
        raw_from = len(VI_NODE_FEATURES) if features == "payload" else x.shape[1]
        npg, epg = np.diff(g.node_ptr), np.diff(g.edge_ptr)
        rank = np.arange(g.num_graphs)
        x[:, 1:raw_from] = calibrate_rows(
            x[:, 1:raw_from], np.zeros(len(x), np.int64), np.repeat(rank, npg), calib
        )
        e = calibrate_rows(e, np.zeros(len(e), np.int64), np.repeat(rank, epg), calib)
    return [
        (x[g.node_ptr[j] : g.node_ptr[j + 1]], e[g.edge_ptr[j] : g.edge_ptr[j + 1]])
        for j in range(g.num_graphs)
    ]


def _verdicts(ids, t, w: int, s: int, features: str, calib: int, head: int, payload=None):  # type: ignore[no-untyped-def]
    starts = np.arange(0, len(ids) - w + 1, s, dtype=np.int64)
    prof = None
    if features == "payload":
        pl = np.zeros((len(ids), 8), np.uint8) if payload is None else payload
        prof = payload_profile(ids[:head], pl[:head], t[:head])
    return verdict_messages(
        can_id=ids,
        timestamp=t,
        window_start=starts,
        window_size=w,
        features=features,
        calibration_windows=calib,
        profile=prof,
        profile_messages=head,
    )


CASES = [
    ("paper", 0),
    ("paper", 3),
    ("vehicle_independent", 0),
    ("vehicle_independent", 4),
    ("payload", 0),
    ("payload", 4),
]


@pytest.mark.parametrize(("features", "calib"), CASES)
@pytest.mark.parametrize("seed", [0, 1])
def test_verdicts_match_the_reference(features: str, calib: int, seed: int) -> None:
    ids, payload, t = _stream(seed)
    w, s, head = 20, 15, profile_head(5, 15, 20, len(ids))
    got = _verdicts(ids, t, w, s, features, calib, head, payload)
    ref = reference_verdicts(ids.tolist(), t.tolist(), w, s, features, calib, head)
    assert got.tolist() == ref
    ends = np.arange(0, len(ids) - w + 1, s) + w - 1
    assert (got >= ends).all()
    if features == "payload":
        assert (got > np.maximum(ends, head - 1)).sum() > 5  # period_ratio does look ahead


def _other_future(ids, payload, t, after: int, seed: int):  # type: ignore[no-untyped-def]
    """The stream with every message after ``after`` replaced: other IDs (of the same ones),
    payloads and gaps."""
    rng = np.random.default_rng(seed)
    ids, payload, t = ids.copy(), payload.copy(), t.copy()
    k = len(ids) - after - 1
    ids[after + 1 :] = rng.choice(np.unique(ids), k)
    payload[after + 1 :] = rng.integers(0, 256, (k, 8))
    t[after + 1 :] = t[after] + np.cumsum(rng.uniform(1e-4, 8e-3, k))
    return ids, payload, t


@pytest.mark.parametrize(("features", "calib"), CASES)
def test_no_message_after_the_verdict_changes_the_window(features: str, calib: int) -> None:
    """Any other messages after a window's verdict message (or none: the stream cut there) give
    that window the features the stream gives it: a detector judging it then judges what the
    bench scores (that the payload features do read past the window:
    ``test_an_injected_message_waits_for_the_ids_next_two_messages``)."""
    ids, payload, t = _stream(2, n=300)
    w, s, head = 20, 20, profile_head(5, 20, 20, 300)
    full = window_features(ids, payload, t, w, s, features, calib, head)
    verdict = _verdicts(ids, t, w, s, features, calib, head, payload)
    for j, v in enumerate(verdict.tolist()):
        cut = window_features(ids[: v + 1], payload[: v + 1], t[: v + 1], w, s, features, calib, head)
        other = window_features(*_other_future(ids, payload, t, v, j), w, s, features, calib, head)
        for got in (cut[j], other[j]):
            np.testing.assert_array_equal(got[0], full[j][0])
            np.testing.assert_array_equal(got[1], full[j][1])


def test_an_injected_message_waits_for_the_ids_next_two_messages() -> None:
    # one ID every 10 ms (the true 0.15 s message 0.5 ms late); an extra copy at 0.147 s ends
    # window 1 (messages 8-15, windows of 8): its nearer neighbour is the true 0.1505 (message 16),
    # so whether it is the extra one of that pair reads the true 0.16 (message 17) too
    t = [0.01 * i for i in range(15)] + [0.147, 0.1505] + [0.01 * i for i in range(16, 24)]
    ids = np.full(len(t), 0x10, np.uint32)
    ts = np.array(t)
    verdict = _verdicts(ids, ts, 8, 8, "payload", 0, 8)
    assert verdict.tolist() == reference_verdicts(ids.tolist(), t, 8, 8, "payload", 0, 8)
    assert verdict[1] == 17 and verdict[2] == 24  # window 2: the ID's next message, 0.23 s
    assert verdict_times(ts, verdict)[1] == pytest.approx(0.16)

    def period_column(times: list[float]) -> float:
        x = window_features(ids, np.zeros((len(ids), 8), np.uint8), np.array(times), 8, 8, "payload", 0, 8)
        return float(x[1][0][0, PAYLOAD_NODE_FEATURES.index("period_ratio")])

    assert period_column(t) < 0  # 0.147 is the extra message: its window is marked
    # message 17 read: 0.157 instead of 0.16 leaves 0.147 -> 0.157 a period, 0.14 -> 0.1505 not:
    # then 0.1505 is the extra one (window 2's), and window 1 is no longer marked
    moved = list(t)
    moved[17] = 0.157
    assert period_column(moved) == 0.0


def test_calibration_and_profile_make_the_first_windows_wait() -> None:
    ids = np.arange(100, dtype=np.uint32)  # no ID repeats: none profiled, period_ratio reads nothing
    t = np.arange(100) * 0.001
    for features, calib, head, first in (
        ("vehicle_independent", 3, 0, 29),  # the first 3 windows of 10 messages
        ("payload", 0, 45, 44),  # the profile's 45 messages
        ("payload", 6, 45, 59),
    ):
        verdict = _verdicts(ids, t, 10, 10, features, calib, head)
        ends = np.arange(9, 100, 10)
        assert verdict.tolist() == np.maximum(ends, first).tolist()


def test_verdict_times_are_the_latest_timestamp_read() -> None:
    t = np.array([0.0, 0.2, 0.1, 0.3])  # message 2 was stamped before message 1
    assert verdict_times(t, np.array([2, 3, 0])).tolist() == [0.2, 0.3, 0.0]


def test_the_cache_holds_each_windows_verdict_time(tmp_path: Path) -> None:
    """The graph cache's ``window_times``: the verdict times of each recording's windows as
    :func:`verdict_messages` gives them for the cache's own features, profile and calibration, and
    the time of its first injected message (+inf in a benign window)."""
    raw = write_synthetic_dataset(tmp_path / "raw" / "syn", n_messages=12_000, seed=5)
    params = GraphParams(features="payload", calibration_windows=4, profile_windows=3)
    preprocess_dataset("syn", params, raw=raw, cache=tmp_path / "cache")
    store = load_graphs("syn", params, cache=tmp_path / "cache").train.store
    times = store["window_times"].numpy()
    for f, path in enumerate(list_sources(raw)):
        msgs, _ = read_can_file(path)
        rows = (store["file_index"] == f).numpy()
        starts = store["window_start"].numpy()[rows]
        head = profile_head(3, 100, 100, len(msgs))
        prof = payload_profile(msgs.can_id[:head], msgs.payload[:head], msgs.timestamp[:head])
        verdict = verdict_messages(
            can_id=msgs.can_id,
            timestamp=msgs.timestamp,
            window_start=starts,
            window_size=100,
            features="payload",
            calibration_windows=4,
            profile=prof,
            profile_messages=head,
        )
        assert verdict.tolist() == reference_verdicts(
            msgs.can_id.tolist(), msgs.timestamp.tolist(), 100, 100, "payload", 4, head
        )
        np.testing.assert_array_equal(times[rows, 3], verdict_times(msgs.timestamp, verdict))
        np.testing.assert_array_equal(times[rows, 1], msgs.timestamp[starts + 99])
        assert (times[rows, 3] >= times[rows, 1]).all()
        attack = store["y"].numpy()[rows] == 1
        assert np.isinf(times[rows, 2][~attack]).all() and np.isfinite(times[rows, 2][attack]).all()
