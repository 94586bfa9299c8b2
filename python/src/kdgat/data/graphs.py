"""Vectorised window-graph construction (numpy, no Python loop over messages or windows).

A message stream of ``n`` messages is cut into windows of ``W = window_size`` messages starting
every ``S = stride`` messages (``G = (n - W) // S + 1`` full windows; a trailing partial window is
dropped). Each window becomes one directed graph:

- nodes: the distinct CAN IDs of the window, ordered by ascending CAN ID;
- edges: one directed edge ``a -> b`` per distinct ordered pair of IDs that occur as consecutive
  messages (message ``p`` has ID ``a``, message ``p+1`` has ID ``b``, both inside the window). The
  ``W - 1`` transitions of a window are at positions ``p = 0 .. W-2``; edges are ordered by
  (source node, target node); a self-loop ``a -> a`` appears when an ID repeats back to back;
- label ``y = 1`` when any message of the window is an attack message.

Node features (``NODE_FEATURES``, 11 columns, raw = before normalisation):

====  =================  ===================================================================
col   name               meaning
====  =================  ===================================================================
0     can_id_index       CAN-ID vocabulary index (0 = out of vocabulary); filled in by the cache
1-8   byte{k}_mean       mean over the node's messages of payload byte k / 255 (bytes >= DLC = 0)
9     count              number of the window's messages with this ID
10    last_position      position of the node's last message in the window / (W - 1)
====  =================  ===================================================================

Edge features (``EDGE_FEATURES``, 11 columns) of edge ``a -> b`` with transition positions
``p_1 < ... < p_c`` (``c`` = count):

====  ===============  =====================================================================
0     count            c, the raw number of a -> b transitions
1     frequency        c / W
2     mean_interval    mean of p_{i+1} - p_i (0 when c < 2)
3     std_interval     population std of p_{i+1} - p_i (0 when c < 2)
4     regularity       1 / (1 + std_interval) when c >= 2, else 0
5     first_position   p_1 / W
6     last_position    p_c / W
7     span             (p_c - p_1) / W
8     bidirectional    1 when the window also has the edge b -> a (a self-loop counts), else 0
9     degree_product   deg(a) * deg(b)
10    degree_ratio     deg(a) / deg(b)
====  ===============  =====================================================================

where ``deg(v)`` is the number of the window's transitions that have ``v`` as source plus the
number that have it as target (with multiplicity; a self-loop adds 2). These follow the meaning of
the published KD-GAT preprocessing; normalisation to zero mean / unit variance over benign
training rows happens afterwards (:mod:`kdgat.data.build`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

NODE_FEATURES: tuple[str, ...] = (
    "can_id_index",
    *(f"byte{k}_mean" for k in range(8)),
    "count",
    "last_position",
)
EDGE_FEATURES: tuple[str, ...] = (
    "count",
    "frequency",
    "mean_interval",
    "std_interval",
    "regularity",
    "first_position",
    "last_position",
    "span",
    "bidirectional",
    "degree_product",
    "degree_ratio",
)
NUM_NODE_FEATURES = len(NODE_FEATURES)
NUM_EDGE_FEATURES = len(EDGE_FEATURES)


@dataclass(frozen=True)
class WindowGraphs:
    """``G`` window graphs of one message stream in collated form.

    - ``node_can_id``: uint32[N] raw CAN ID of every node
    - ``x``: float32[N, 11] node features (column 0 still 0: the vocabulary index comes later)
    - ``edge_index``: int64[2, E] source/target as node indices local to their graph
    - ``edge_attr``: float32[E, 11]
    - ``node_ptr`` / ``edge_ptr``: int64[G + 1]; graph g owns nodes ``node_ptr[g]:node_ptr[g+1]``
      and edges ``edge_ptr[g]:edge_ptr[g+1]``
    - ``y``: int64[G], 1 when the window holds an attack message
    - ``window_start``: int64[G], index of the window's first message in the stream
    """

    node_can_id: npt.NDArray[np.uint32]
    x: npt.NDArray[np.float32]
    edge_index: npt.NDArray[np.int64]
    edge_attr: npt.NDArray[np.float32]
    node_ptr: npt.NDArray[np.int64]
    edge_ptr: npt.NDArray[np.int64]
    y: npt.NDArray[np.int64]
    window_start: npt.NDArray[np.int64]

    @property
    def num_graphs(self) -> int:
        return len(self.y)

    @staticmethod
    def empty() -> WindowGraphs:
        return WindowGraphs(
            node_can_id=np.zeros(0, np.uint32),
            x=np.zeros((0, NUM_NODE_FEATURES), np.float32),
            edge_index=np.zeros((2, 0), np.int64),
            edge_attr=np.zeros((0, NUM_EDGE_FEATURES), np.float32),
            node_ptr=np.zeros(1, np.int64),
            edge_ptr=np.zeros(1, np.int64),
            y=np.zeros(0, np.int64),
            window_start=np.zeros(0, np.int64),
        )

    @staticmethod
    def concat(parts: list[WindowGraphs]) -> WindowGraphs:
        """Graphs of several streams, one after the other (pointers shifted)."""
        parts = [p for p in parts if p.num_graphs]
        if not parts:
            return WindowGraphs.empty()
        node_off = np.cumsum([0] + [len(p.x) for p in parts])
        edge_off = np.cumsum([0] + [p.edge_attr.shape[0] for p in parts])
        return WindowGraphs(
            node_can_id=np.concatenate([p.node_can_id for p in parts]),
            x=np.concatenate([p.x for p in parts]),
            edge_index=np.concatenate([p.edge_index for p in parts], axis=1),
            edge_attr=np.concatenate([p.edge_attr for p in parts]),
            node_ptr=np.concatenate(
                [np.zeros(1, np.int64)] + [p.node_ptr[1:] + o for p, o in zip(parts, node_off, strict=False)]
            ),
            edge_ptr=np.concatenate(
                [np.zeros(1, np.int64)] + [p.edge_ptr[1:] + o for p, o in zip(parts, edge_off, strict=False)]
            ),
            y=np.concatenate([p.y for p in parts]),
            window_start=np.concatenate([p.window_start for p in parts]),
        )


#: Largest window whose per-node payload byte sums fit the 16-bit lanes of ``_byte_sums``.
_MAX_LANE_WINDOW = 65535 // 255


def _byte_sums(
    payload: npt.NDArray[np.uint8], rows: npt.NDArray[np.int64], seg_start: npt.NDArray[np.int64], w: int
) -> npt.NDArray[np.float64]:
    """Sums of the payload bytes of ``payload[rows]`` over the runs starting at ``seg_start``:
    float64[k, 8], exact (integers)."""
    if w > _MAX_LANE_WINDOW:
        return np.add.reduceat(payload[rows].astype(np.float64), seg_start, axis=0)
    # Each message as one little-endian uint64; bytes 0, 2, 4, 6 and bytes 1, 3, 5, 7 spread
    # over four 16-bit lanes each, so one integer reduceat sums four bytes at a time (a lane holds
    # at most w * 255 <= 65535: no carry into the next lane).
    words = np.ascontiguousarray(payload).view("<u8").ravel()[rows]
    lane_mask = np.uint64(0x00FF00FF00FF00FF)
    even = np.add.reduceat(words & lane_mask, seg_start)
    odd = np.add.reduceat((words >> np.uint64(8)) & lane_mask, seg_start)
    sums = np.empty((len(seg_start), 8), np.float64)
    for lane in range(4):
        shift = np.uint64(16 * lane)
        sums[:, 2 * lane] = (even >> shift) & np.uint64(0xFFFF)
        sums[:, 2 * lane + 1] = (odd >> shift) & np.uint64(0xFFFF)
    return sums


def _runs(sorted_rows: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
    """Flat mask of the first element of every run of equal values within each row."""
    first = np.ones(sorted_rows.shape, bool)
    first[:, 1:] = sorted_rows[:, 1:] != sorted_rows[:, :-1]
    return first.ravel()


#: Window messages (windows x window size) per chunk of ``build_window_graphs``: small enough
#: that a chunk's arrays stay in the CPU caches, large enough that the per-chunk overhead is nil.
CHUNK_WINDOW_MESSAGES = 1 << 18


@dataclass(frozen=True)
class WindowIndex:
    """Where the messages and transitions of a stream went in its window graphs (built with them
    by :func:`build_window_graphs_indexed`), so the feature sets need not find them again:

    - ``message``: int64[G * W], stream index of every window message, window by window
    - ``node``: int64[G * W], the node (global index) of each of those messages
    - ``edge``: int64[G * (W - 1)], the edge of every window transition (message ``p`` -> ``p + 1``)
    - ``node_first``: int64[N], stream index of each node's first message in its window
    - ``edge_first``: int64[E], stream index of the source message of each edge's first transition
    """

    message: npt.NDArray[np.int64]
    node: npt.NDArray[np.int64]
    edge: npt.NDArray[np.int64]
    node_first: npt.NDArray[np.int64]
    edge_first: npt.NDArray[np.int64]


def build_window_graphs(
    can_id: npt.NDArray[np.uint32],
    payload: npt.NDArray[np.uint8],
    label: npt.NDArray[np.uint8],
    window_size: int = 100,
    stride: int = 100,
) -> WindowGraphs:
    """Window graphs of one stream: ``can_id`` uint32[n], ``payload`` uint8[n, 8], ``label`` [n]."""
    return _build(can_id, payload, label, window_size, stride, False)[0]


def build_window_graphs_indexed(
    can_id: npt.NDArray[np.uint32],
    payload: npt.NDArray[np.uint8],
    label: npt.NDArray[np.uint8],
    window_size: int = 100,
    stride: int = 100,
) -> tuple[WindowGraphs, WindowIndex]:
    """:func:`build_window_graphs` and the :class:`WindowIndex` of the graphs."""
    graphs, index = _build(can_id, payload, label, window_size, stride, True)
    assert index is not None
    return graphs, index


def _build(
    can_id: npt.NDArray[np.uint32],
    payload: npt.NDArray[np.uint8],
    label: npt.NDArray[np.uint8],
    window_size: int,
    stride: int,
    with_index: bool,
) -> tuple[WindowGraphs, WindowIndex | None]:
    if window_size < 2:
        raise ValueError(f"window_size {window_size} is too small: expected >= 2")
    if stride < 1:
        raise ValueError(f"stride {stride} is invalid: expected >= 1")
    n, w = len(can_id), window_size
    if n < w:
        empty = np.zeros(0, np.int64)
        return WindowGraphs.empty(), (WindowIndex(empty, empty, empty, empty, empty) if with_index else None)
    g = (n - w) // stride + 1
    # Every graph depends on its own window only, so chunks of windows are built one by one,
    # each copied into arrays of the most nodes and edges there can be (W and W - 1 per window):
    # their tails are never written, so never take memory, and the result is their heads (views)
    upper_n, upper_e = g * w, g * (w - 1)
    node_can_id = np.empty(upper_n, np.uint32)
    x = np.empty((upper_n, NUM_NODE_FEATURES), np.float32)
    src, dst = np.empty(upper_e, np.int64), np.empty(upper_e, np.int64)
    edge_attr = np.empty((upper_e, NUM_EDGE_FEATURES), np.float32)
    node_ptr, edge_ptr = np.empty(g + 1, np.int64), np.empty(g + 1, np.int64)
    y, window_start = np.empty(g, np.int64), np.empty(g, np.int64)
    if with_index:
        message, node = np.empty(upper_n, np.int64), np.empty(upper_n, np.int64)
        edge = np.empty(upper_e, np.int64)
        node_first, edge_first = np.empty(upper_n, np.int64), np.empty(upper_e, np.int64)
    per_chunk = max(1, CHUNK_WINDOW_MESSAGES // w)
    nn = ne = 0
    for first in range(0, g, per_chunk):
        last = min(first + per_chunk, g)
        a, b = first * stride, (last - 1) * stride + w
        part, index = _window_graphs(can_id[a:b], payload[a:b], label[a:b], w, stride, with_index)
        k, m = len(part.x), len(part.edge_attr)
        node_can_id[nn : nn + k] = part.node_can_id
        x[nn : nn + k] = part.x
        src[ne : ne + m], dst[ne : ne + m] = part.edge_index
        edge_attr[ne : ne + m] = part.edge_attr
        node_ptr[first:last] = part.node_ptr[:-1] + nn
        edge_ptr[first:last] = part.edge_ptr[:-1] + ne
        y[first:last] = part.y
        window_start[first:last] = part.window_start + a
        if index is not None:
            message[first * w : last * w] = index.message + a
            node[first * w : last * w] = index.node + nn
            edge[first * (w - 1) : last * (w - 1)] = index.edge + ne
            node_first[nn : nn + k] = index.node_first + a
            edge_first[ne : ne + m] = index.edge_first + a
        nn, ne = nn + k, ne + m
    node_ptr[g], edge_ptr[g] = nn, ne
    graphs = WindowGraphs(
        node_can_id=node_can_id[:nn],
        x=x[:nn],
        edge_index=np.stack([src[:ne], dst[:ne]]),
        edge_attr=edge_attr[:ne],
        node_ptr=node_ptr,
        edge_ptr=edge_ptr,
        y=y,
        window_start=window_start,
    )
    if not with_index:
        return graphs, None
    return graphs, WindowIndex(
        message=message, node=node, edge=edge, node_first=node_first[:nn], edge_first=edge_first[:ne]
    )


def _window_graphs(
    can_id: npt.NDArray[np.uint32],
    payload: npt.NDArray[np.uint8],
    label: npt.NDArray[np.uint8],
    w: int,
    stride: int,
    with_index: bool = False,
) -> tuple[WindowGraphs, WindowIndex | None]:
    """``build_window_graphs`` of a stream of at least ``w`` messages (and its index, stream
    positions relative to this stream, when ``with_index``)."""
    g = (len(can_id) - w) // stride + 1
    window_first = np.arange(g, dtype=np.int64) * w  # flat index of each window's first message
    if stride == w:
        msg = np.arange(g * w, dtype=np.int64)
    else:
        msg = ((np.arange(g, dtype=np.int64) * stride)[:, None] + np.arange(w)).ravel()

    # --- nodes: distinct CAN IDs per window. Sorting each window's (ID, position) keys groups the
    # messages of an ID with their positions ascending (as a stable sort by ID would), and a
    # plain row sort of int64 keys is much cheaper than one global sort or a stable argsort.
    node_key = np.sort(can_id[msg].astype(np.int64).reshape(g, w) * w + np.arange(w), axis=1)
    sorted_pos = node_key % w
    sorted_ids = node_key // w
    new_node = _runs(sorted_ids)
    order = (sorted_pos + window_first[:, None]).ravel()
    seg = np.concatenate([np.flatnonzero(new_node), [g * w]]).astype(np.int64)
    num_nodes = len(seg) - 1
    node_can_id = sorted_ids.ravel()[seg[:-1]].astype(np.uint32)
    count = np.diff(seg)
    node_of_msg = np.empty(g * w, np.int64)
    node_of_msg[order] = np.cumsum(new_node) - 1
    node_ptr = np.concatenate([[0], np.cumsum(new_node.reshape(g, w).sum(axis=1))]).astype(np.int64)

    x = np.zeros((num_nodes, len(NODE_FEATURES)), np.float32)
    x[:, 1:9] = _byte_sums(payload, msg[order], seg[:-1], w) / count[:, None] / 255.0
    x[:, 9] = count
    x[:, 10] = sorted_pos.ravel()[seg[1:] - 1] / (w - 1)

    # --- edges: distinct (source node, target node) over consecutive messages in a window.
    # Sorting (local source, local target, position) keys per window orders the edges by
    # (source, target) with the positions of each edge ascending; nodes are numbered window by
    # window, so this is also the global (source, target) order.
    nodes2d = node_of_msg.reshape(g, w)
    local = nodes2d - node_ptr[:-1, None]
    edge_key = np.sort((local[:, :-1] * w + local[:, 1:]) * (w - 1) + np.arange(w - 1), axis=1)
    tpos = edge_key % (w - 1)
    pair = edge_key // (w - 1)
    new_edge = _runs(pair)
    eseg = np.concatenate([np.flatnonzero(new_edge), [g * (w - 1)]]).astype(np.int64)
    num_edges = len(eseg) - 1
    ecount = np.diff(eseg)
    upair = pair.ravel()[eseg[:-1]]
    lsrc, ldst = upair // w, upair % w
    edge_ptr = np.concatenate([[0], np.cumsum(new_edge.reshape(g, w - 1).sum(axis=1))]).astype(np.int64)
    edge_graph = eseg[:-1] // (w - 1)
    tpos = tpos.ravel()
    first = tpos[eseg[:-1]]
    last = tpos[eseg[1:] - 1]

    # sum of squared gaps between an edge's consecutive positions (integers: exact)
    gaps = np.zeros(len(tpos), np.int64)
    gaps[1:] = np.diff(tpos)
    gaps[new_edge] = 0
    sumsq = np.add.reduceat(gaps * gaps, eseg[:-1]).astype(np.float64)
    multi = ecount >= 2
    denom = np.maximum(ecount - 1, 1)
    mean_int = np.where(multi, (last - first) / denom, 0.0)
    var = np.where(multi, sumsq / denom - mean_int * mean_int, 0.0)
    std_int = np.sqrt(np.maximum(var, 0.0))

    ukey = edge_graph * (w * w) + upair  # ascending: edges are in (window, source, target) order
    reverse = edge_graph * (w * w) + ldst * w + lsrc
    hit = np.searchsorted(ukey, reverse)
    bidir = (hit < num_edges) & (ukey[np.minimum(hit, num_edges - 1)] == reverse)

    # deg(v) = transitions from v + transitions into v: every message of v is both, except a
    # window's first message (no transition into it) and last message (none out of it)
    degree = 2 * count
    degree[nodes2d[:, 0]] -= 1
    degree[nodes2d[:, -1]] -= 1
    deg_src = degree[lsrc + node_ptr[edge_graph]].astype(np.float64)
    deg_dst = degree[ldst + node_ptr[edge_graph]].astype(np.float64)

    # float64 columns written straight into float32 (the same rounding as a final astype)
    e = np.empty((num_edges, len(EDGE_FEATURES)), np.float32)
    e[:, 0] = ecount.astype(np.float64)
    e[:, 1] = ecount / w
    e[:, 2] = mean_int
    e[:, 3] = std_int
    e[:, 4] = np.where(multi, 1.0 / (1.0 + std_int), 0.0)
    e[:, 5] = first / w
    e[:, 6] = last / w
    e[:, 7] = (last - first) / w
    e[:, 8] = bidir
    e[:, 9] = deg_src * deg_dst
    e[:, 10] = deg_src / deg_dst

    y: npt.NDArray[np.int64] = np.asarray(label[msg].reshape(g, w).any(axis=1), np.int64)
    index = None
    if with_index:
        edge_of = np.empty(g * (w - 1), np.int64)
        edge_of[(tpos.reshape(g, w - 1) + (np.arange(g, dtype=np.int64) * (w - 1))[:, None]).ravel()] = (
            np.cumsum(new_edge) - 1
        )
        index = WindowIndex(
            message=msg,
            node=node_of_msg,
            edge=edge_of,
            node_first=msg[order[seg[:-1]]],
            edge_first=edge_graph * stride + first,
        )
    graphs = WindowGraphs(
        node_can_id=node_can_id,
        x=x,
        edge_index=np.stack([lsrc, ldst]).astype(np.int64),
        edge_attr=e,
        node_ptr=node_ptr,
        edge_ptr=edge_ptr,
        y=y,
        window_start=np.arange(g, dtype=np.int64) * stride,
    )
    return graphs, index
