"""Vehicle-independent features against a slow, obviously-correct pure-Python reference, and the
cache option around them (digest, columns, calibration)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Hashable
from pathlib import Path

import numpy as np
import pytest

from kdgat.data import (
    GraphParams,
    build_window_graphs,
    features_vi,
    load_graphs,
    preprocess_dataset,
    write_synthetic_dataset,
)
from kdgat.data import graphs as graphs_module
from kdgat.data.calibration import calibrate_rows, robust_moments
from kdgat.data.features_vi import (
    DEFAULT_HISTORY,
    VI_EDGE_FEATURES,
    VI_NODE_FEATURES,
    previous_occurrence,
    transition_codes,
    vehicle_independent_features,
    window_index,
)
from kdgat.data.graphs import WindowGraphs, build_window_graphs_indexed


def _nov(pos: int, prev: int | None, h: int) -> float:
    # no earlier occurrence: at least pos + 1 messages back (the stream starts at 0)
    d = pos + 1 if prev is None else pos - prev
    return min(1.0, math.log1p(d) / math.log1p(h))


def reference_vi(t, ids, dlc, payload, w, s, h):  # type: ignore[no-untyped-def]
    """One (x, edge_attr) per window straight from the definitions in kdgat.data.features_vi."""
    n = len(ids)

    def prev(m: int) -> int | None:
        for j in range(m - 1, -1, -1):
            if ids[j] == ids[m]:
                return j
        return None

    def prev_pair(q: int) -> int | None:
        for j in range(q - 1, -1, -1):
            if (ids[j], ids[j + 1]) == (ids[q], ids[q + 1]):
                return j
        return None

    def body(m: int) -> tuple[int, tuple[int, ...]]:
        return dlc[m], tuple(payload[m][: dlc[m]])

    out = []
    for start in range(0, n - w + 1, s):
        win = list(range(start, start + w))
        nodes = sorted({ids[m] for m in win})
        x = []
        for rank, v in enumerate(nodes):
            ms = [m for m in win if ids[m] == v]
            gaps = [t[m] - t[p] for m in ms if (p := prev(m)) is not None]
            c = len(ms)
            mean = statistics.fmean(gaps) if gaps else 0.0
            cv = statistics.pstdev(gaps) / mean if len(gaps) >= 2 and mean > 0 else 0.0
            data = [b for m in ms for b in payload[m][: dlc[m]]]
            ent = 0.0
            for val in set(data):
                p = data.count(val) / len(data)
                ent -= p * math.log2(p)
            with_prev = [m for m in ms if prev(m) is not None]
            change = (
                sum(body(m) != body(prev(m)) for m in with_prev) / len(with_prev)  # type: ignore[arg-type]
                if with_prev
                else 0.0
            )
            first_prev = prev(ms[0])
            x.append(
                [
                    0.0,
                    c / w,
                    # no gap: the one message is its ID's first, at least t[m] - t[0] after one
                    math.log10(max(mean if gaps else t[ms[0]] - t[0], 1e-6)) + 6,
                    cv,
                    ent / 8,
                    change,
                    len({body(m) for m in ms}) / c,
                    sum(all(b == 0 for b in payload[m][: dlc[m]]) for m in ms) / c,
                    sum(dlc[m] for m in ms) / c / 8,
                    _nov(ms[0], first_prev, h),
                    rank / max(1, len(nodes) - 1),
                ]
            )
        steps = [(ids[start + p], ids[start + p + 1], p) for p in range(w - 1)]
        index = {v: i for i, v in enumerate(nodes)}
        pairs = sorted({(a, b) for a, b, _ in steps}, key=lambda ab: (index[ab[0]], index[ab[1]]))
        win_dt = abs(t[start + w - 1] - t[start]) / (w - 1)
        e = []
        for a, b in pairs:
            at = [p for a_, b_, p in steps if (a_, b_) == (a, b)]
            fp = prev_pair(start + at[0])
            dts = [abs(t[start + p + 1] - t[start + p]) for p in at]
            e.append(
                [
                    _nov(start + at[0], fp, h),
                    math.log10((statistics.fmean(dts) + 1e-6) / (win_dt + 1e-6)),
                ]
            )
        out.append((np.array(x), np.array(e)))
    return out


@pytest.mark.parametrize(
    ("n", "w", "s", "n_ids", "h", "seed"),
    [
        (400, 100, 100, 12, 50, 0),  # default windows, a short novelty horizon
        (230, 20, 7, 5, 1000, 1),  # overlapping windows, few IDs (repeats, self-loops)
        (150, 10, 25, 30, 3, 2),  # gaps between windows, mostly new IDs
        (64, 2, 1, 3, 10, 3),  # the smallest window
    ],
)
def test_vehicle_independent_features_match_the_reference(
    n: int, w: int, s: int, n_ids: int, h: int, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    pool = rng.choice(0x800, n_ids, replace=False).astype(np.uint32)
    ids = pool[rng.integers(0, n_ids, n)]
    dlc = rng.integers(0, 9, n).astype(np.uint8)
    # few distinct payload values, so repeats and unchanged payloads happen
    payload = (rng.integers(0, 3, (n, 8)) * 85).astype(np.uint8)
    payload[np.arange(8)[None, :] >= dlc[:, None]] = 0
    t = np.cumsum(rng.exponential(1e-3, n))
    t[n // 3] = t[n // 3 - 1] - 1e-4  # one non-monotonic timestamp, as in some public files
    g = build_window_graphs(ids, payload, np.zeros(n, np.uint8), w, s)
    got = vehicle_independent_features(
        g, timestamp=t, can_id=ids, dlc=dlc, payload=payload, window_size=w, history=h
    )
    want = reference_vi(t.tolist(), ids.tolist(), dlc.tolist(), payload.tolist(), w, s, h)
    assert got.num_graphs == len(want) > 0
    assert got.x.shape[1] == len(VI_NODE_FEATURES) == 11
    assert got.edge_attr.shape[1] == len(VI_EDGE_FEATURES) == 11
    np.testing.assert_array_equal(got.edge_index, g.edge_index)
    for k, (x, e) in enumerate(want):
        a, b = got.node_ptr[k], got.node_ptr[k + 1]
        c, d = got.edge_ptr[k], got.edge_ptr[k + 1]
        np.testing.assert_allclose(got.x[a:b], x, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(got.edge_attr[c:d, 9:], e, rtol=1e-5, atol=1e-5)
        # the kept positional edge columns are the paper's
        np.testing.assert_array_equal(
            got.edge_attr[c:d, :9], g.edge_attr[c:d][:, [0, 1, 2, 3, 4, 7, 8, 9, 10]]
        )


def test_a_hand_made_dos_window() -> None:
    # a flooding ID 0x000 (every other message, all-zero payload, 0.1 ms apart) among a 10 ms ID
    w = 10
    ids = np.array([0x300, 0, 0x300, 0, 0x300, 0, 0x300, 0, 0x300, 0], np.uint32)
    t = np.array([0.0, 1e-4, 0.01, 0.0101, 0.02, 0.0201, 0.03, 0.0301, 0.04, 0.0401])
    dlc = np.full(w, 8, np.uint8)
    payload = np.zeros((w, 8), np.uint8)
    payload[ids == 0x300] = np.arange(1, 9, dtype=np.uint8)  # constant, 8 distinct bytes
    g = build_window_graphs(ids, payload, np.zeros(w, np.uint8), w, w)
    vi = vehicle_independent_features(g, timestamp=t, can_id=ids, dlc=dlc, payload=payload, window_size=w)
    x = dict(zip(VI_NODE_FEATURES, vi.x.T, strict=True))
    # nodes: 0x000, 0x300
    np.testing.assert_allclose(x["rate"], [0.5, 0.5])
    np.testing.assert_allclose(x["log_period"], [math.log10(0.01) + 6] * 2, rtol=1e-5)
    np.testing.assert_allclose(x["payload_entropy"], [0.0, 3 / 8], atol=1e-6)  # 8 equiprobable bytes
    np.testing.assert_allclose(x["zero_payload"], [1.0, 0.0])
    np.testing.assert_allclose(x["payload_change"], [0.0, 0.0])
    # both IDs' first occurrence in the stream (0x300 at message 0, 0x000 at 1): at least 1 and 2
    # messages from an earlier one, so nov(1) and nov(2) with the default history of 1000 messages
    np.testing.assert_allclose(x["novelty"], [math.log(3) / math.log(1001), math.log(2) / math.log(1001)])
    np.testing.assert_allclose(x["id_rank"], [0.0, 1.0])


def test_calibration_normalises_each_recording_by_its_first_windows() -> None:
    values = np.array([[1.0], [3.0], [5.0], [100.0], [10.0], [10.0], [12.0], [14.0]])
    file = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    rank = np.array([0, 1, 2, 3, 0, 1, 2, 3])
    out = calibrate_rows(values, file, rank, 3)
    # file 0 by (1, 3, 5): median 3, std sqrt(8/3); file 1 by (10, 10, 12): median 10; the 4th
    # window of each (100, 14) is normalised but not used for the statistics
    np.testing.assert_allclose(out[:4, 0], (values[:4, 0] - 3) / np.std([1.0, 3.0, 5.0]))
    np.testing.assert_allclose(out[4:, 0], (values[4:, 0] - 10) / np.std([10.0, 10.0, 12.0]))
    centre, scale = robust_moments(np.array([[7.0], [7.0]]))
    assert (centre[0], scale[0]) == (7.0, 1.0)  # constant: scale 1
    with pytest.raises(ValueError, match="calibration windows 0 is invalid"):
        calibrate_rows(values, file, rank, 0)


def test_paper_digest_is_unchanged_and_new_options_key_the_cache() -> None:
    paper = GraphParams(features="paper", calibration_windows=0)
    assert "features" not in paper.to_json() and "calibration_windows" not in paper.to_json()
    vi = GraphParams(features="vehicle_independent", calibration_windows=0)
    digests = {
        paper.digest(),
        vi.digest(),
        GraphParams(features="vehicle_independent", calibration_windows=0, novelty_history=50).digest(),
        GraphParams(features="paper", calibration_windows=5).digest(),
    }
    assert len(digests) == 4
    with pytest.raises(ValueError, match="features is 'vocab'; expected one of paper, vehicle_independent"):
        GraphParams(features="vocab")
    with pytest.raises(ValueError, match="calibration_windows is -1"):
        GraphParams(calibration_windows=-1)


def test_cache_with_vehicle_independent_features_and_calibration(tmp_path: Path) -> None:
    raw = write_synthetic_dataset(tmp_path / "raw" / "syn", n_messages=12_000, seed=5)
    params = GraphParams(features="vehicle_independent", calibration_windows=4)
    info = preprocess_dataset("syn", params, raw=raw, cache=tmp_path / "cache")
    assert not info.hit
    splits = load_graphs("syn", params, cache=tmp_path / "cache")
    assert splits.meta["feature_names"]["node"] == list(VI_NODE_FEATURES)
    x = splits.train.store["x"]
    assert x.shape[1] == 11 and bool((x[:, 0] == 0).all())  # no vocabulary index
    # calibrated: each file's first 4 windows are centred on their median
    store = splits.train.store
    first = store["file_index"] == 0
    g0 = int(first.nonzero()[0])
    a, b = int(store["node_ptr"][g0]), int(store["node_ptr"][g0 + 4])
    np.testing.assert_allclose(np.median(x[a:b, 1:].numpy(), axis=0), 0.0, atol=1e-5)
    with pytest.raises(Exception, match="preprocess"):
        load_graphs(
            "syn",
            GraphParams(features="vehicle_independent", calibration_windows=0),
            cache=tmp_path / "cache",
        )


def _by_id_and_window(g: WindowGraphs, column: np.ndarray) -> dict[tuple[int, int], float]:
    """One node column as ``{(CAN ID, window): value}``."""
    return {
        (int(g.node_can_id[k]), int(np.searchsorted(g.node_ptr, k, side="right") - 1)): float(column[k])
        for k in range(len(column))
    }


def test_a_new_id_is_novel_once_the_history_is_full_and_not_before() -> None:
    # IDs 0x100 and 0x200 alternate; 0x300 appears first at message 5 (the stream's start) and 0x400
    # at message 250, after more than the 100-message history: only 0x400 is known to be new
    n, w, h = 300, 50, 100
    ids = np.where(np.arange(n) % 2 == 0, 0x100, 0x200).astype(np.uint32)
    ids[5], ids[250] = 0x300, 0x400
    t = np.arange(n) * 1e-3
    dlc = np.full(n, 8, np.uint8)
    payload = np.zeros((n, 8), np.uint8)
    g = build_window_graphs(ids, payload, np.zeros(n, np.uint8), w, w)
    vi = vehicle_independent_features(
        g, timestamp=t, can_id=ids, dlc=dlc, payload=payload, window_size=w, history=h
    )
    first = _by_id_and_window(g, vi.x[:, VI_NODE_FEATURES.index("novelty")])
    assert first[(0x300, 0)] == pytest.approx(math.log(7) / math.log(101))  # nov(6): 6 messages back at least
    assert first[(0x400, 5)] == 1.0
    assert first[(0x100, 0)] == pytest.approx(math.log(2) / math.log(101))  # message 0: nov(1)


def test_an_ids_first_message_takes_the_least_possible_gap_as_its_period() -> None:
    # 0x100 every 10 ms; a slow ID 0x300 first seen 0.3 s into the stream, and an ID 0x400 first
    # seen at 2.5 s: neither has an earlier message, so each is at least its time since the stream's
    # first message from one (version 2 gave both 0, the value of nothing ever seen)
    n, w = 300, 50
    ids = np.full(n, 0x100, np.uint32)
    ids[30], ids[250] = 0x300, 0x400
    t = np.arange(n) * 0.01
    dlc = np.full(n, 8, np.uint8)
    payload = np.zeros((n, 8), np.uint8)
    g = build_window_graphs(ids, payload, np.zeros(n, np.uint8), w, w)
    vi = vehicle_independent_features(g, timestamp=t, can_id=ids, dlc=dlc, payload=payload, window_size=w)
    by = _by_id_and_window(g, vi.x[:, VI_NODE_FEATURES.index("log_period")])
    assert by[(0x300, 0)] == pytest.approx(math.log10(0.3) + 6, rel=1e-5)
    assert by[(0x400, 5)] == pytest.approx(math.log10(2.5) + 6, rel=1e-5)
    assert by[(0x100, 1)] == pytest.approx(math.log10(0.01) + 6, rel=1e-5)  # a gap: the mean gap


def _random_stream(n: int, n_ids: int, seed: int, id_space: int = 0x800):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(seed)
    pool = rng.choice(id_space, n_ids, replace=False).astype(np.uint32)
    ids = pool[rng.integers(0, n_ids, n)]
    dlc = rng.integers(0, 9, n).astype(np.uint8)
    payload = (rng.integers(0, 3, (n, 8)) * 85).astype(np.uint8)
    payload[np.arange(8)[None, :] >= dlc[:, None]] = 0
    t = np.cumsum(rng.exponential(1e-3, n))
    return ids, dlc, payload, t


@pytest.mark.parametrize(
    ("n", "w", "s", "n_ids", "id_space"),
    [
        (400, 100, 100, 12, 0x800),  # default windows
        (230, 20, 7, 5, 0x800),  # overlapping windows
        (150, 10, 25, 30, 0x800),  # gaps between windows
        (300, 30, 30, 40, 1 << 29),  # 29-bit IDs (no dense ID table)
    ],
)
def test_the_index_of_the_graphs_is_the_one_found_from_them(
    n: int, w: int, s: int, n_ids: int, id_space: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``build_window_graphs_indexed`` says where every message and transition went (what the
    feature sets otherwise find again from the graphs), in several chunks as in one."""
    ids, dlc, payload, t = _random_stream(n, n_ids, 7, id_space)
    label = np.zeros(n, np.uint8)
    for chunk in (1 << 18, 3 * w):  # one chunk; several (of the graphs and of the features)
        monkeypatch.setattr(graphs_module, "CHUNK_WINDOW_MESSAGES", chunk)
        monkeypatch.setattr(features_vi, "CHUNK_MESSAGES", chunk)
        g, index = build_window_graphs_indexed(ids, payload, label, w, s)
        plain = build_window_graphs(ids, payload, label, w, s)
        for field in ("x", "edge_attr", "edge_index", "node_ptr", "edge_ptr", "node_can_id", "window_start"):
            np.testing.assert_array_equal(getattr(g, field), getattr(plain, field))
        found = window_index(g, ids, w)
        for field in ("message", "node", "edge", "node_first", "edge_first"):
            np.testing.assert_array_equal(getattr(index, field), getattr(found, field), err_msg=field)
        # and the features from the index are those found without it, bit for bit
        with_index = vehicle_independent_features(
            g,
            timestamp=t,
            can_id=ids,
            dlc=dlc,
            payload=payload,
            window_size=w,
            index=index,
            previous=previous_occurrence(ids),
        )
        without = vehicle_independent_features(
            g, timestamp=t, can_id=ids, dlc=dlc, payload=payload, window_size=w
        )
        np.testing.assert_array_equal(with_index.x, without.x)
        np.testing.assert_array_equal(with_index.edge_attr, without.edge_attr)
        want = reference_vi(t.tolist(), ids.tolist(), dlc.tolist(), payload.tolist(), w, s, DEFAULT_HISTORY)
        for k, (x, e) in enumerate(want):
            a, b = with_index.node_ptr[k], with_index.node_ptr[k + 1]
            c, d = with_index.edge_ptr[k], with_index.edge_ptr[k + 1]
            np.testing.assert_allclose(with_index.x[a:b], x, rtol=1e-5, atol=1e-5)
            np.testing.assert_allclose(with_index.edge_attr[c:d, 9:], e, rtol=1e-5, atol=1e-5)


def _slow_previous(key: list[Hashable]) -> list[int]:
    last: dict[Hashable, int] = {}
    out = []
    for m, k in enumerate(key):
        out.append(last.get(k, -1))
        last[k] = m
    return out


def test_previous_occurrence_and_transition_codes_against_a_dictionary() -> None:
    rng = np.random.default_rng(3)
    for keys in (
        rng.integers(0, 50, 1000).astype(np.uint32),  # a packed sort
        rng.integers(0, 1 << 29, 1000).astype(np.uint32),
        (rng.integers(0, 3, 500).astype(np.uint64) << np.uint64(40)) | np.uint64(7),  # beyond 32 bits
        np.zeros(1, np.uint32),
        np.zeros(0, np.uint32),
    ):
        assert previous_occurrence(keys).tolist() == _slow_previous(keys.tolist())
    for ids in (
        rng.integers(0, 0x800, 2000).astype(np.uint32),  # dense ID table
        rng.choice(1 << 29, 20, replace=False).astype(np.uint32)[rng.integers(0, 20, 2000)],  # searchsorted
        rng.permutation(70_000).astype(np.uint32),  # >= 2^16 distinct IDs: the pair itself
    ):
        codes = transition_codes(ids)
        pairs = list(zip(ids[:-1].tolist(), ids[1:].tolist(), strict=True))
        # equal codes exactly for equal pairs
        assert (
            len(set(zip(codes.tolist(), pairs, strict=True))) == len(set(pairs)) == len(set(codes.tolist()))
        )
        assert previous_occurrence(codes).tolist() == _slow_previous(list(pairs))


def test_calibration_in_place_and_in_runs_is_the_masked_one() -> None:
    """Files in runs of rows (the cache's layout) take slices, in place into float32 or not; the
    result is, bit for bit, that of a mask per file, rounded once; interleaved files still work."""
    rng = np.random.default_rng(4)
    values = rng.normal(3.0, 2.0, (50_000, 5)).astype(np.float32)
    file = np.repeat(np.arange(3), [20_000, 5, 29_995])
    rank = np.concatenate([np.arange(20_000) // 7, np.arange(5), np.arange(29_995) // 3])
    want = np.empty(values.shape, np.float64)
    for k in range(3):
        rows = file == k
        centre, scale = robust_moments(values[rows & (rank < 4)])
        want[rows] = (values[rows] - centre) / scale
    np.testing.assert_array_equal(calibrate_rows(values, file, rank, 4), want)
    inplace = values.copy()
    assert calibrate_rows(inplace, file, rank, 4, out=inplace) is inplace
    np.testing.assert_array_equal(inplace, want.astype(np.float32))
    swap = np.concatenate([np.arange(20_000, 50_000), np.arange(20_000)])  # file 0 last: no runs
    np.testing.assert_allclose(
        calibrate_rows(values[swap], file[swap], rank[swap], 4), want[swap], rtol=1e-12
    )
