"""Payload-semantics features (kdgat.data.features_payload) against a slow pure-Python reference on
hand-made and random streams, and: no label enters them."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from torch_geometric.data import Batch

from kdgat.config import build_config
from kdgat.data import (
    GraphParams,
    build_window_graphs,
    features_vi,
    load_graphs,
    preprocess_dataset,
    read_can_file,
    write_synthetic_dataset,
)
from kdgat.data import graphs as graphs_module
from kdgat.data.build import list_sources
from kdgat.data.features_payload import (
    CATEGORICAL_VALUES,
    PAYLOAD_NODE_FEATURES,
    payload_features,
    payload_profile,
)
from kdgat.data.features_vi import VI_NODE_FEATURES, previous_occurrence, vehicle_independent_features
from kdgat.data.graphs import build_window_graphs_indexed
from kdgat.data.params import node_feature_count
from kdgat.models import build_model


def _prev(ids: list[int], m: int) -> int | None:
    for j in range(m - 1, -1, -1):
        if ids[j] == ids[m]:
            return j
    return None


def _next(ids: list[int], m: int) -> int | None:
    for j in range(m + 1, len(ids)):
        if ids[j] == ids[m]:
            return j
    return None


def _extra_near(ids: list[int], t: list[float], m: int, period: float) -> float | None:
    """``near(m)`` when ``m`` is an extra message (module docstring), else None."""
    p, n = _prev(ids, m), _next(ids, m)
    if p is None and n is None:
        return None

    def off(x: int | None, y: int | None) -> float:
        return math.inf if x is None or y is None else abs((t[y] - t[x]) / period - 1)

    back = t[m] - t[p] if p is not None else math.inf
    ahead = t[n] - t[m] if n is not None else math.inf
    if back <= ahead:
        assert p is not None
        other = off(_prev(ids, p), m)
    else:
        assert n is not None
        other = off(m, _next(ids, n))
    return min(back, ahead) if off(p, n) <= other else None


def reference_profile(ids, payload, t):  # type: ignore[no-untyped-def]
    """ID -> jump_max, low, high, period, masks, values, straight from the module docstring."""
    prof = {}
    for v in sorted(set(ids)):
        ms = [m for m in range(len(ids)) if ids[m] == v]
        with_prev = [(m, p) for m in ms if (p := _prev(ids, m)) is not None]
        if not with_prev:
            continue
        deltas = [[abs(payload[m][k] - payload[p][k]) for k in range(8)] for m, p in with_prev]
        prof[v] = {
            "jump_max": [max(d[k] for d in deltas) for k in range(8)],
            "low": [min(payload[m][k] for m in ms) for k in range(8)],
            "high": [max(payload[m][k] for m in ms) for k in range(8)],
            "period": (period := sorted(t[m] - t[p] for m, p in with_prev)[(len(with_prev) - 1) // 2]),
            "periodic": all(t[m] - t[p] >= period / 2 for m, p in with_prev),
            "masks": {sum(1 << k for k in range(8) if d[k] > 0) for d in deltas},
            "values": [{payload[m][k] for m in ms} for k in range(8)],
        }
    return prof


def reference_payload(ids, payload, t, prof, w, s):  # type: ignore[no-untyped-def]
    """The six payload columns of every node of every window, node order = ascending ID."""
    out = []
    for start in range(0, len(ids) - w + 1, s):
        win = range(start, start + w)
        for v in sorted({ids[m] for m in win}):
            if v not in prof:
                out.append([0.0] * 6)
                continue
            pv = prof[v]
            ms = [m for m in win if ids[m] == v]
            d_set = [(m, p) for m in ms if (p := _prev(ids, m)) is not None]
            delta = {m: [abs(payload[m][k] - payload[p][k]) for k in range(8)] for m, p in d_set}
            rng = max(
                max(0, pv["low"][k] - payload[m][k], payload[m][k] - pv["high"][k]) / 255
                for m in ms
                for k in range(8)
            )
            novel_value = sum(
                any(
                    len(pv["values"][k]) <= CATEGORICAL_VALUES and payload[m][k] not in pv["values"][k]
                    for k in range(8)
                )
                for m in ms
            ) / len(ms)
            # the extra messages of the window, each at its nearer neighbour's distance
            near = [d for m in ms if (d := _extra_near(ids, t, m, pv["period"])) is not None] * pv["periodic"]
            period = min(0.0, math.log2(max(2 * min(near) / pv["period"], 2.0**-10))) if near else 0.0
            if not d_set:
                out.append([0.0, 0.0, rng, period, 0.0, novel_value])
                continue
            jm = pv["jump_max"]
            masks = [sum(1 << k for k in range(8) if delta[m][k] > 0) for m, _ in d_set]
            out.append(
                [
                    max(max(0, delta[m][k] - jm[k]) for m, _ in d_set for k in range(8)) / 255,
                    sum(any(delta[m][k] > jm[k] for k in range(8)) for m, _ in d_set) / len(d_set),
                    rng,
                    period,
                    sum(mask not in pv["masks"] for mask in masks) / len(d_set),
                    novel_value,
                ]
            )
    return out


def _stream(seed: int, n: int = 240):  # type: ignore[no-untyped-def]
    """Five IDs: a counter, a slow signal, a constant, a periodic one (every 5th message) with three
    extra messages after the profile, and one that appears only late (unprofiled); messages about
    1 ms apart, with jitter."""
    rng = np.random.default_rng(seed)
    ids = rng.choice([0x100, 0x200, 0x300], size=n, p=[0.4, 0.4, 0.2]).astype(np.uint32)
    ids[::5] = 0x500
    ids[[131, 176, 219]] = 0x500  # 1 ms after a periodic one (two), 1 ms before one
    ids[n * 2 // 3 :: 7] = 0x400
    payload = np.zeros((n, 8), np.uint8)
    counter = 0
    value = 40
    for m in range(n):
        if ids[m] == 0x100:
            counter = (counter + 1) % 16
            payload[m, 0] = counter
            payload[m, 7] = (counter * 3) % 256
        elif ids[m] == 0x200:
            value = int(np.clip(value + rng.integers(-2, 3), 0, 255))
            payload[m, 2:4] = [value, value // 2]
        elif ids[m] == 0x300:
            payload[m, 1] = 7
        elif ids[m] == 0x500:
            payload[m, 4] = m % 7
        else:
            payload[m] = rng.integers(0, 256, 8)
    # the attacks after the profile: a spoofed value, a fuzzed byte
    for m in np.flatnonzero(ids == 0x200)[-12::3]:
        payload[m, 2:4] = [250, 3]
    payload[np.flatnonzero(ids == 0x300)[-3], 5] = 99
    t = np.cumsum(rng.uniform(0.5e-3, 1.5e-3, n))
    return ids, payload, t


def _vi(ids, payload, t, label, w, s):  # type: ignore[no-untyped-def]
    g = build_window_graphs(ids, payload, label, w, s)
    dlc = np.full(len(ids), 8, np.uint8)
    return vehicle_independent_features(g, timestamp=t, can_id=ids, dlc=dlc, payload=payload, window_size=w)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_column_matches_the_reference(seed: int) -> None:
    ids, payload, t = _stream(seed)
    w, s, profile_n = 20, 15, 80
    vi = _vi(ids, payload, t, np.zeros(len(ids), np.uint8), w, s)
    prof = payload_profile(ids[:profile_n], payload[:profile_n], t[:profile_n])
    got = payload_features(vi, prof, can_id=ids, payload=payload, timestamp=t, window_size=w)
    assert got.x.shape[1] == len(PAYLOAD_NODE_FEATURES) == len(VI_NODE_FEATURES) + 6
    np.testing.assert_array_equal(got.x[:, : len(VI_NODE_FEATURES)], vi.x)
    assert got.edge_attr is vi.edge_attr

    ref_prof = reference_profile(
        ids[:profile_n].tolist(), payload[:profile_n].tolist(), t[:profile_n].tolist()
    )
    assert prof.ids.tolist() == sorted(ref_prof)
    for i, v in enumerate(prof.ids.tolist()):
        assert prof.jump_max[i].tolist() == ref_prof[v]["jump_max"]
        assert prof.low[i].tolist() == ref_prof[v]["low"]
        assert prof.high[i].tolist() == ref_prof[v]["high"]
        assert prof.period[i] == pytest.approx(ref_prof[v]["period"])
        assert prof.periodic[i] == ref_prof[v]["periodic"]
        assert prof.categorical[i].tolist() == [
            len(vals) <= CATEGORICAL_VALUES for vals in ref_prof[v]["values"]
        ]
    ref = np.array(reference_payload(ids.tolist(), payload.tolist(), t.tolist(), ref_prof, w, s))
    np.testing.assert_allclose(got.x[:, len(VI_NODE_FEATURES) :], ref, rtol=1e-5, atol=1e-6)
    assert (ref[:, [0, 2, 5]].max(axis=0) > 0).all()  # the attacks show
    assert ref[:, 3].min() < 0
    # only the periodic ID's extra messages mark: the others have gaps under half their median
    assert set(got.node_can_id[got.x[:, 14] < 0].tolist()) == {0x500}


def test_hand_made_spoofing_window() -> None:
    # ID 0x10 carries a speed that rises by 1 per message every 10 ms, its byte 1 a 4-step counter;
    # the attacker sends 200 between true values (2.5 ms after them) with the counter left at 9
    true = [10, 11, 12, 13, 14, 15, 16, 17]
    ids = np.full(16, 0x10, np.uint32)
    payload = np.zeros((16, 8), np.uint8)
    payload[:8, 0] = true
    payload[:8, 1] = [0, 1, 2, 3] * 2
    payload[8:, 0] = [18, 19, 200, 20, 200, 21, 200, 22]
    payload[8:, 1] = [0, 1, 9, 2, 9, 3, 9, 0]
    t = np.array([0.01 * i for i in range(10)] + [0.0925, 0.10, 0.1025, 0.11, 0.1125, 0.12])
    vi = _vi(ids, payload, t, np.zeros(16, np.uint8), 8, 8)
    prof = payload_profile(ids[:8], payload[:8], t[:8])  # learned from the benign first window
    assert prof.jump_max[0, :2].tolist() == [1, 3] and (prof.low[0, 0], prof.high[0, 0]) == (10, 17)
    assert prof.period[0] == pytest.approx(0.01) and prof.categorical[0].all()
    x = payload_features(vi, prof, can_id=ids, payload=payload, timestamp=t, window_size=8).x[:, 11:]
    benign, attack = x[0], x[1]
    np.testing.assert_allclose(benign, [0, 0, 0, 0, 0, 0], atol=1e-6)
    # window 2: 17->18, 18->19, 19->200 (181), 200->20 (180), 20->200, 200->21, 21->200, 200->22
    assert attack[0] == pytest.approx((181 - 1) / 255)
    assert attack[1] == pytest.approx(6 / 8)
    assert attack[2] == pytest.approx((200 - 17) / 255)
    assert attack[3] == pytest.approx(-1.0, rel=1e-4)  # 2.5 ms after the last: a quarter period
    # every change is of bytes 0 and 1 together, a known mask; byte 0 (8 values in the profile: a
    # categorical byte here) takes new values 18..22 and 200 in all 8 messages
    assert attack[4] == 0.0
    assert attack[5] == pytest.approx(8 / 8)


def _period_column_of_one_id(t: list[float]) -> list[float]:
    """``period_ratio`` of the windows (8 messages each) of one ID sent at times ``t``, profiled
    from its first window."""
    n = len(t)
    ids = np.full(n, 0x10, np.uint32)
    payload = np.zeros((n, 8), np.uint8)
    ts = np.array(t)
    vi = _vi(ids, payload, ts, np.zeros(n, np.uint8), 8, 8)
    prof = payload_profile(ids[:8], payload[:8], ts[:8])
    x = payload_features(vi, prof, can_id=ids, payload=payload, timestamp=ts, window_size=8).x
    return x[:, 14].tolist()


@pytest.mark.parametrize(
    ("t", "marked"),
    [
        # late: an injected copy 9 ms after the true 0.14 ends window 2, the true 0.15 (1 ms after
        # it) opens window 3; taking 0.149 out leaves 0.14 -> 0.15, one period, taking 0.15 out
        # leaves 0.149 -> 0.16, 1.1 periods: window 2 is marked (it waits for the ID's next
        # messages), window 3 is not
        ([0.01 * i for i in range(15)] + [0.149] + [0.01 * i for i in range(15, 23)], 1),
        # early, the mirror case: the true 0.15 ends window 2, an injected copy 1 ms after it opens
        # window 3; only window 3 holds the extra message
        ([0.01 * i for i in range(16)] + [0.151] + [0.01 * i for i in range(16, 23)], 2),
    ],
    ids=["late", "early"],
)
def test_an_injected_message_marks_its_own_window_only(t: list[float], marked: int) -> None:
    expected = [0.0, 0.0, 0.0]
    expected[marked] = math.log2(2 * 0.1)  # 1 ms from its neighbour: a tenth of the period
    assert _period_column_of_one_id(t) == pytest.approx(expected, rel=1e-4, abs=1e-6)


def test_an_id_without_a_period_marks_nothing() -> None:
    # two IDs, alternating: 0x10 every 10 ms, 0x20 at random (exponential gaps, an event-driven ID);
    # in the profile 0x20 has gaps under half its median, so it is not periodic and never marks a
    # window, however close its messages come; 0x10 still marks the window of its extra message
    rng = np.random.default_rng(0)
    n = 400
    t10 = 0.01 * np.arange(n // 2)
    t10[150] = t10[149] + 0.001  # an extra 0x10 message 1 ms after its true one
    t20 = np.cumsum(rng.exponential(0.01, n // 2))
    t = np.concatenate([t10, t20])
    ids = np.concatenate([np.full(n // 2, 0x10), np.full(n // 2, 0x20)]).astype(np.uint32)
    order = np.argsort(t, kind="stable")
    t, ids = t[order], ids[order]
    payload = np.zeros((n, 8), np.uint8)
    prof = payload_profile(ids[:100], payload[:100], t[:100])
    assert prof.ids.tolist() == [0x10, 0x20] and prof.periodic.tolist() == [True, False]
    vi = _vi(ids, payload, t, np.zeros(n, np.uint8), 20, 20)
    x = payload_features(vi, prof, can_id=ids, payload=payload, timestamp=t, window_size=20).x
    marked = x[:, 14] < 0
    assert (vi.node_can_id[marked] == 0x10).all() and marked.sum() == 1
    gaps = np.diff(t[ids == 0x20])
    assert (gaps < prof.period[1] / 2).sum() > 20  # 0x20 did come close, often


def test_labels_enter_nothing() -> None:
    """Shuffling every label changes no feature value and no fitted profile."""
    ids, payload, t = _stream(3)
    rng = np.random.default_rng(0)
    values = []
    for label in (np.zeros(len(ids), np.uint8), rng.permutation(np.arange(len(ids)) % 2).astype(np.uint8)):
        vi = _vi(ids, payload, t, label, 20, 20)
        prof = payload_profile(ids[:80], payload[:80], t[:80])
        x = payload_features(vi, prof, can_id=ids, payload=payload, timestamp=t, window_size=20).x
        values.append((x, prof))
    np.testing.assert_array_equal(values[0][0], values[1][0])
    for field in ("ids", "jump_max", "low", "high", "period", "periodic", "masks", "categorical", "values"):
        np.testing.assert_array_equal(getattr(values[0][1], field), getattr(values[1][1], field))


def test_cache_with_payload_features_keeps_the_payload_columns_raw(tmp_path: Path) -> None:
    """``data.features = payload``: the cache holds the 17 columns; 1-10 calibrated as the
    vehicle-independent set's, 11-16 exactly ``payload_features`` of each recording against its
    own first ``profile_windows`` windows; the models are built for 17."""
    raw = write_synthetic_dataset(tmp_path / "raw" / "syn", n_messages=12_000, seed=5)
    params = GraphParams(features="payload", calibration_windows=4, profile_windows=3)
    preprocess_dataset("syn", params, raw=raw, cache=tmp_path / "cache")
    splits = load_graphs("syn", params, cache=tmp_path / "cache")
    assert splits.meta["feature_names"]["node"] == list(PAYLOAD_NODE_FEATURES)
    assert splits.num_node_features == len(PAYLOAD_NODE_FEATURES) == node_feature_count("payload")
    store = splits.train.store
    vi_only = load_graphs(
        "syn",
        GraphParams(features="vehicle_independent", calibration_windows=4),
        cache=_cache_of(raw, tmp_path / "cache-vi", "vehicle_independent"),
    ).train.store
    n = len(VI_NODE_FEATURES)
    assert torch.equal(store["x"][:, :n], vi_only["x"])
    # the payload columns: recomputed from the first file by hand, stored as they are
    first_file = list_sources(raw)[0]
    msgs, _ = read_can_file(first_file)
    g = build_window_graphs(msgs.can_id, msgs.payload, msgs.label, 100, 100)
    vi = vehicle_independent_features(
        g, timestamp=msgs.timestamp, can_id=msgs.can_id, dlc=msgs.dlc, payload=msgs.payload, window_size=100
    )
    head = 3 * 100
    prof = payload_profile(msgs.can_id[:head], msgs.payload[:head], msgs.timestamp[:head])
    want = payload_features(
        vi, prof, can_id=msgs.can_id, payload=msgs.payload, timestamp=msgs.timestamp, window_size=100
    )
    rows = int(store["node_ptr"][int((store["file_index"] == 0).sum())])
    np.testing.assert_allclose(store["x"][:rows, n:].numpy(), want.x[:rows, n:].astype(np.float32))
    assert float(store["x"][:, n:].abs().sum()) > 0  # the synthetic attacks move some of them
    cfg = build_config("small", {"data.features": "payload"})
    net = build_model("gat", cfg, vocab_size=splits.vocab_size)
    batch = Batch.from_data_list([splits.test[i] for i in range(4)])
    assert net(batch.x, batch.edge_index, batch.edge_attr, batch.batch).shape == (4, 2)
    # profile_windows keys the cache of the payload features only
    assert (
        GraphParams(features="payload", profile_windows=4).digest()
        != GraphParams(features="payload").digest()
    )
    assert GraphParams(features="paper", profile_windows=4).digest() == GraphParams(features="paper").digest()


def _cache_of(raw: Path, cache: Path, features: str) -> Path:
    preprocess_dataset("syn", GraphParams(features=features, calibration_windows=4), raw=raw, cache=cache)
    return cache


@pytest.mark.parametrize("seed", [0, 1])
def test_the_build_path_matches_the_reference_in_chunks(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The preprocessing's path (the graphs' index, one previous-occurrence pass, the 17 columns
    filled in place, several chunks of windows) gives the reference's values and, bit for bit,
    those of the plain calls."""
    ids, payload, t = _stream(seed)
    w, s, profile_n = 20, 15, 80
    label = np.zeros(len(ids), np.uint8)
    dlc = np.full(len(ids), 8, np.uint8)
    monkeypatch.setattr(features_vi, "CHUNK_MESSAGES", 2 * w)
    monkeypatch.setattr(graphs_module, "CHUNK_WINDOW_MESSAGES", 3 * w)
    g, index = build_window_graphs_indexed(ids, payload, label, w, s)
    prev = previous_occurrence(ids)
    vi = vehicle_independent_features(
        g,
        timestamp=t,
        can_id=ids,
        dlc=dlc,
        payload=payload,
        window_size=w,
        index=index,
        previous=prev,
        extra_columns=len(PAYLOAD_NODE_FEATURES) - len(VI_NODE_FEATURES),
    )
    prof = payload_profile(ids[:profile_n], payload[:profile_n], t[:profile_n])
    got = payload_features(
        vi, prof, can_id=ids, payload=payload, timestamp=t, window_size=w, index=index, previous=prev
    )
    plain_vi = _vi(ids, payload, t, label, w, s)
    plain = payload_features(plain_vi, prof, can_id=ids, payload=payload, timestamp=t, window_size=w)
    np.testing.assert_array_equal(got.x, plain.x)
    np.testing.assert_array_equal(got.edge_attr, plain.edge_attr)
    ref_prof = reference_profile(
        ids[:profile_n].tolist(), payload[:profile_n].tolist(), t[:profile_n].tolist()
    )
    ref = np.array(reference_payload(ids.tolist(), payload.tolist(), t.tolist(), ref_prof, w, s))
    np.testing.assert_allclose(got.x[:, len(VI_NODE_FEATURES) :], ref, rtol=1e-5, atol=1e-6)
    assert (ref[:, [0, 2, 3, 5]] != 0).any(axis=0).all()  # the columns that the attacks move do move
