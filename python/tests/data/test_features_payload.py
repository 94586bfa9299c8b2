"""Payload-semantics features (kdgat.data.features_payload) against a slow pure-Python reference on
hand-made and random streams, and: no label enters them."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kdgat.data import build_window_graphs
from kdgat.data.features_payload import PAYLOAD_NODE_FEATURES, payload_features, payload_profile
from kdgat.data.features_vi import VI_NODE_FEATURES, vehicle_independent_features


def _prev(ids: list[int], m: int) -> int | None:
    for j in range(m - 1, -1, -1):
        if ids[j] == ids[m]:
            return j
    return None


def reference_profile(ids: list[int], payload: list[list[int]]) -> dict[int, dict[str, object]]:
    """ID -> jump_max, low, high, mean_change, masks, straight from the module docstring."""
    prof: dict[int, dict[str, object]] = {}
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
            "mean_change": sum(sum(d) for d in deltas) / len(deltas),
            "masks": {sum(1 << k for k in range(8) if d[k] > 0) for d in deltas},
        }
    return prof


def reference_payload(ids, payload, prof, w, s):  # type: ignore[no-untyped-def]
    """The six payload columns of every node of every window, node order = ascending ID."""
    out = []
    n = len(ids)
    for start in range(0, n - w + 1, s):
        win = range(start, start + w)
        rows = []
        for v in sorted({ids[m] for m in win}):
            ms = [m for m in win if ids[m] == v]
            d_set = [(m, p) for m in ms if (p := _prev(ids, m)) is not None]
            delta = {m: [abs(payload[m][k] - payload[p][k]) for k in range(8)] for m, p in d_set}
            reversals = 0
            for m, p in d_set:
                pp = _prev(ids, p)
                if pp is not None and payload[m] == payload[pp] and payload[m] != payload[p]:
                    reversals += 1
            reversal = reversals / len(d_set) if d_set else 0.0
            if v not in prof or not d_set:
                rng = 0.0
                if v in prof:
                    pv = prof[v]
                    rng = max(
                        max(0, pv["low"][k] - payload[m][k], payload[m][k] - pv["high"][k]) / 255
                        for m in ms
                        for k in range(8)
                    )
                rows.append([0.0, 0.0, rng, 0.0, 0.0, reversal])
                continue
            pv = prof[v]
            jm = pv["jump_max"]
            rows.append(
                [
                    max(max(0, delta[m][k] - jm[k]) for m, _ in d_set for k in range(8)) / 255,
                    sum(any(delta[m][k] > jm[k] for k in range(8)) for m, _ in d_set) / len(d_set),
                    max(
                        max(0, pv["low"][k] - payload[m][k], payload[m][k] - pv["high"][k]) / 255
                        for m in ms
                        for k in range(8)
                    ),
                    math.log2(
                        (sum(sum(delta[m]) for m, _ in d_set) / len(d_set) + 1) / (pv["mean_change"] + 1)
                    ),
                    sum(sum(1 << k for k in range(8) if delta[m][k] > 0) not in pv["masks"] for m, _ in d_set)
                    / len(d_set),
                    reversal,
                ]
            )
        out.append(rows)
    return out


def _stream(seed: int, n: int = 240):  # type: ignore[no-untyped-def]
    """Four IDs: a counter, a slow signal, a constant, and one that appears only late (unprofiled)."""
    rng = np.random.default_rng(seed)
    ids = rng.choice([0x100, 0x200, 0x300], size=n, p=[0.4, 0.4, 0.2]).astype(np.uint32)
    ids[n * 2 // 3 :: 7] = 0x400
    payload = np.zeros((n, 8), np.uint8)
    counter = {0x100: 0}
    value = 40
    for m in range(n):
        if ids[m] == 0x100:
            counter[0x100] = (counter[0x100] + 1) % 16
            payload[m, 0] = counter[0x100]
            payload[m, 7] = (counter[0x100] * 3) % 256
        elif ids[m] == 0x200:
            value = int(np.clip(value + rng.integers(-2, 3), 0, 255))
            payload[m, 2:4] = [value, value // 2]
        elif ids[m] == 0x300:
            payload[m, 1] = 7
        else:
            payload[m] = rng.integers(0, 256, 8)
    # the attacks after the profile: a spoofed value (A B A), a fuzzed byte, a jump
    for m in np.flatnonzero(ids == 0x200)[-12::3]:
        payload[m, 2:4] = [250, 3]
    payload[np.flatnonzero(ids == 0x300)[-3], 5] = 99
    return ids, payload


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_column_matches_the_reference(seed: int) -> None:
    ids, payload = _stream(seed)
    w, s, profile_n = 20, 15, 80
    label = np.zeros(len(ids), np.uint8)
    g = build_window_graphs(ids, payload, label, w, s)
    vi = vehicle_independent_features(
        g,
        timestamp=np.arange(len(ids)) * 1e-3,
        can_id=ids,
        dlc=np.full(len(ids), 8, np.uint8),
        payload=payload,
        window_size=w,
    )
    prof = payload_profile(ids[:profile_n], payload[:profile_n])
    got = payload_features(vi, prof, can_id=ids, payload=payload, window_size=w)
    assert got.x.shape[1] == len(PAYLOAD_NODE_FEATURES) == len(VI_NODE_FEATURES) + 6
    np.testing.assert_array_equal(got.x[:, : len(VI_NODE_FEATURES)], vi.x)
    assert got.edge_attr is vi.edge_attr

    ref_prof = reference_profile(ids[:profile_n].tolist(), payload[:profile_n].tolist())
    assert prof.ids.tolist() == sorted(ref_prof)
    for i, v in enumerate(prof.ids.tolist()):
        assert prof.jump_max[i].tolist() == ref_prof[v]["jump_max"]
        assert prof.low[i].tolist() == ref_prof[v]["low"]
        assert prof.high[i].tolist() == ref_prof[v]["high"]
        assert prof.mean_change[i] == pytest.approx(ref_prof[v]["mean_change"])
    ref = reference_payload(ids.tolist(), payload.tolist(), ref_prof, w, s)
    flat = np.array([row for window in ref for row in window])
    np.testing.assert_allclose(got.x[:, len(VI_NODE_FEATURES) :], flat, rtol=1e-6, atol=1e-6)
    assert flat[:, [0, 2, 5]].max() > 0  # the attacks show


def test_hand_made_spoofing_window() -> None:
    # ID 0x10 carries a speed that rises by 1 per message; the attacker sends 200 between true values
    true = [10, 11, 12, 13, 14, 15, 16, 17]
    spoofed = [10, 11, 12, 200, 13, 200, 14, 200]
    ids = np.full(16, 0x10, np.uint32)
    payload = np.zeros((16, 8), np.uint8)
    payload[:8, 0] = true
    payload[8:, 0] = spoofed
    g = build_window_graphs(ids, payload, np.zeros(16, np.uint8), 8, 8)
    vi = vehicle_independent_features(
        g, timestamp=np.arange(16.0), can_id=ids, dlc=np.full(16, 8, np.uint8), payload=payload, window_size=8
    )
    prof = payload_profile(ids[:8], payload[:8])  # learned from the benign first window
    assert prof.jump_max[0, 0] == 1 and (prof.low[0, 0], prof.high[0, 0]) == (10, 17)
    x = payload_features(vi, prof, can_id=ids, payload=payload, window_size=8).x[:, 11:]
    benign, attack = x[0], x[1]
    np.testing.assert_allclose(benign, [0, 0, 0, 0, 0, 0], atol=1e-7)
    # window 2 jumps: 17->10 (7), 10->11, 11->12, 12->200 (188), 200->13 (187), 13->200, 200->14, 14->200
    assert attack[0] == pytest.approx((188 - 1) / 255)
    assert attack[1] == pytest.approx(6 / 8)  # 17->10 and five jumps through 200 exceed 1
    assert attack[2] == pytest.approx((200 - 17) / 255)
    # A, B, A: the second and third 200 (each after a true value that followed a 200); a true value
    # never returns, since the speed rises
    assert attack[5] == pytest.approx(2 / 8)


def test_labels_enter_nothing() -> None:
    """Shuffling (here: flipping) every label changes no feature value and no fitted profile."""
    ids, payload = _stream(3)
    rng = np.random.default_rng(0)
    values = []
    for label in (np.zeros(len(ids), np.uint8), rng.permutation(np.arange(len(ids)) % 2).astype(np.uint8)):
        g = build_window_graphs(ids, payload, label, 20, 20)
        vi = vehicle_independent_features(
            g,
            timestamp=np.arange(len(ids)) * 1e-3,
            can_id=ids,
            dlc=np.full(len(ids), 8, np.uint8),
            payload=payload,
            window_size=20,
        )
        prof = payload_profile(ids[:80], payload[:80])
        values.append((payload_features(vi, prof, can_id=ids, payload=payload, window_size=20).x, prof))
    np.testing.assert_array_equal(values[0][0], values[1][0])
    for field in ("ids", "jump_max", "low", "high", "mean_change", "masks"):
        np.testing.assert_array_equal(getattr(values[0][1], field), getattr(values[1][1], field))
