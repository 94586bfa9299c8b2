"""The vectorised window graphs against a slow, obviously-correct pure-Python reference."""

from __future__ import annotations

import dataclasses
import statistics

import numpy as np
import pytest

from kdgat.data import EDGE_FEATURES, NODE_FEATURES, build_window_graphs, graphs


def reference_graphs(ids: list[int], payload: list[list[int]], labels: list[int], w: int, s: int):
    """One dict per window, straight from the definitions in kdgat.data.graphs."""
    out = []
    for start in range(0, len(ids) - w + 1, s):
        win = ids[start : start + w]
        nodes = sorted(set(win))
        index = {v: i for i, v in enumerate(nodes)}
        x = []
        for v in nodes:
            at = [p for p in range(w) if win[p] == v]
            means = [sum(payload[start + p][k] for p in at) / len(at) / 255 for k in range(8)]
            x.append([0.0, *means, float(len(at)), at[-1] / (w - 1)])
        steps = [(win[p], win[p + 1], p) for p in range(w - 1)]
        pairs = sorted({(a, b) for a, b, _ in steps}, key=lambda ab: (index[ab[0]], index[ab[1]]))
        degree = {v: sum(a == v for a, _, _ in steps) + sum(b == v for _, b, _ in steps) for v in nodes}
        edges, attrs = [], []
        for a, b in pairs:
            at = [p for x_, y_, p in steps if (x_, y_) == (a, b)]
            c = len(at)
            gaps = [at[i + 1] - at[i] for i in range(c - 1)]
            mean = statistics.fmean(gaps) if c >= 2 else 0.0
            std = statistics.pstdev(gaps) if c >= 2 else 0.0
            edges.append((index[a], index[b]))
            attrs.append(
                [
                    c,
                    c / w,
                    mean,
                    std,
                    1 / (1 + std) if c >= 2 else 0.0,
                    at[0] / w,
                    at[-1] / w,
                    (at[-1] - at[0]) / w,
                    float((b, a) in pairs),
                    degree[a] * degree[b],
                    degree[a] / degree[b],
                ]
            )
        out.append(
            {
                "can_ids": nodes,
                "x": np.array(x),
                "edge_index": np.array(edges).T.reshape(2, -1),
                "edge_attr": np.array(attrs).reshape(-1, 11),
                "y": int(any(labels[start : start + w])),
            }
        )
    return out


@pytest.mark.parametrize(
    ("n", "w", "s", "n_ids", "seed"),
    [
        (400, 100, 100, 12, 0),  # the default non-overlapping windows
        (230, 20, 7, 5, 1),  # overlapping windows, few IDs (many self-loops and repeats)
        (150, 10, 25, 30, 2),  # gaps between windows, mostly distinct IDs
        (64, 2, 1, 3, 3),  # the smallest window
        (99, 100, 100, 4, 4),  # shorter than one window: no graph
        (700, 300, 200, 40, 5),  # windows too long for the 16-bit byte-sum lanes
    ],
)
def test_vectorised_graphs_match_the_reference(n: int, w: int, s: int, n_ids: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    pool = rng.choice(0x800, n_ids, replace=False).astype(np.uint32)
    ids = pool[rng.integers(0, n_ids, n)]
    payload = rng.integers(0, 256, (n, 8)).astype(np.uint8)
    labels = (rng.random(n) < 0.02).astype(np.uint8)

    got = build_window_graphs(ids, payload, labels, w, s)
    want = reference_graphs(ids.tolist(), payload.tolist(), labels.tolist(), w, s)

    assert got.num_graphs == len(want)
    assert got.window_start.tolist() == [i * s for i in range(len(want))]
    for g, ref in enumerate(want):
        a, b = got.node_ptr[g], got.node_ptr[g + 1]
        c, d = got.edge_ptr[g], got.edge_ptr[g + 1]
        assert got.node_can_id[a:b].tolist() == ref["can_ids"]
        np.testing.assert_allclose(got.x[a:b], ref["x"], rtol=1e-6, atol=1e-6)
        assert got.edge_index[:, c:d].tolist() == ref["edge_index"].tolist()
        np.testing.assert_allclose(got.edge_attr[c:d], ref["edge_attr"], rtol=1e-5, atol=1e-5)
        assert got.y[g] == ref["y"]


def test_a_hand_computed_window() -> None:
    # IDs A B A A C B (W=6): transitions A>B@0, B>A@1, A>A@2, A>C@3, C>B@4
    a, b, c = 0x100, 0x200, 0x300
    ids = np.array([a, b, a, a, c, b], np.uint32)
    payload = np.zeros((6, 8), np.uint8)
    payload[[0, 2, 3], 0] = [255, 0, 255]  # A's byte 0 mean = 2/3
    g = build_window_graphs(ids, payload, np.array([0, 0, 0, 0, 0, 1], np.uint8), 6, 6)
    assert g.y.tolist() == [1]
    assert g.node_can_id.tolist() == [a, b, c]
    np.testing.assert_allclose(g.x[:, 1], [2 / 3, 0, 0], atol=1e-6)
    np.testing.assert_allclose(g.x[:, 9], [3, 2, 1])
    np.testing.assert_allclose(g.x[:, 10], [3 / 5, 5 / 5, 4 / 5])
    # edges sorted by (source, target): A>A, A>B, A>C, B>A, C>B
    assert g.edge_index.T.tolist() == [[0, 0], [0, 1], [0, 2], [1, 0], [2, 1]]
    deg_a, deg_b, deg_c = 5, 3, 2  # A: out 3 + in 2; B: out 1 + in 2; C: 1 + 1
    attr = dict(zip(EDGE_FEATURES, g.edge_attr.T, strict=True))
    np.testing.assert_allclose(attr["bidirectional"], [1, 1, 0, 1, 0])
    np.testing.assert_allclose(
        attr["degree_product"],
        [deg_a * deg_a, deg_a * deg_b, deg_a * deg_c, deg_b * deg_a, deg_c * deg_b],
    )
    np.testing.assert_allclose(
        attr["degree_ratio"],
        [1, deg_a / deg_b, deg_a / deg_c, deg_b / deg_a, deg_c / deg_b],
        rtol=1e-6,
    )
    np.testing.assert_allclose(attr["first_position"], [2 / 6, 0, 3 / 6, 1 / 6, 4 / 6], rtol=1e-6)
    assert len(NODE_FEATURES) == 11 and len(EDGE_FEATURES) == 11


def test_interval_statistics_of_a_repeating_transition() -> None:
    # A>B at positions 0, 2, 6 in an A B A B x x A B window: gaps 2, 4
    ids = np.array([1, 2, 1, 2, 3, 4, 1, 2], np.uint32)
    g = build_window_graphs(ids, np.zeros((8, 8), np.uint8), np.zeros(8, np.uint8), 8, 8)
    ab = next(i for i, (s, t) in enumerate(g.edge_index.T.tolist()) if (s, t) == (0, 1))
    count, freq, mean, std, reg, first, last, span = g.edge_attr[ab, :8]
    assert (count, mean, std) == (3, 3.0, 1.0)
    assert reg == pytest.approx(0.5)
    assert (first, last, span) == pytest.approx((0, 6 / 8, 6 / 8))
    assert freq == pytest.approx(3 / 8)


def test_invalid_window_parameters_are_named() -> None:
    one = np.zeros(4, np.uint32)
    with pytest.raises(ValueError, match="window_size 1 is too small"):
        build_window_graphs(one, np.zeros((4, 8), np.uint8), np.zeros(4, np.uint8), 1, 1)
    with pytest.raises(ValueError, match="stride 0 is invalid"):
        build_window_graphs(one, np.zeros((4, 8), np.uint8), np.zeros(4, np.uint8), 2, 0)


@pytest.mark.parametrize(("w", "s"), [(100, 100), (20, 7), (10, 25), (2, 1)])
@pytest.mark.parametrize("chunk", [1, 150, 1000])
def test_graphs_built_in_chunks_of_windows_are_the_same_arrays(
    w: int, s: int, chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(w + s)
    n = 3000
    ids = rng.choice(0x800, 25, replace=False).astype(np.uint32)[rng.integers(0, 25, n)]
    payload = rng.integers(0, 256, (n, 8)).astype(np.uint8)
    labels = (rng.random(n) < 0.01).astype(np.uint8)
    whole = build_window_graphs(ids, payload, labels, w, s)
    monkeypatch.setattr(graphs, "CHUNK_WINDOW_MESSAGES", chunk)
    chunked = build_window_graphs(ids, payload, labels, w, s)
    for field in dataclasses.fields(whole):
        a, b = getattr(whole, field.name), getattr(chunked, field.name)
        assert a.dtype == b.dtype and a.shape == b.shape, field.name
        assert a.tobytes() == b.tobytes(), field.name


@pytest.mark.parametrize("w", [2, 257, 258, 400])
def test_byte_means_of_full_bytes_do_not_overflow(w: int) -> None:
    # byte sums of a window of 0xff bytes: the 16-bit lanes hold up to 257 of them, larger
    # windows take the float path
    n = 2 * w
    ids = np.arange(n, dtype=np.uint32) % 3
    graphs_ = build_window_graphs(ids, np.full((n, 8), 255, np.uint8), np.zeros(n, np.uint8), w, w)
    assert graphs_.num_graphs == 2
    np.testing.assert_array_equal(graphs_.x[:, 1:9], 1.0)
