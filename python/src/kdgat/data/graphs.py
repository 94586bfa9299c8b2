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


def _segments(sorted_keys: npt.NDArray[np.int64] | npt.NDArray[np.uint64]) -> npt.NDArray[np.int64]:
    """Start offsets of runs of equal values in a sorted array, plus the end: int64[k + 1]."""
    if len(sorted_keys) == 0:
        return np.zeros(1, np.int64)
    change = np.flatnonzero(sorted_keys[1:] != sorted_keys[:-1]) + 1
    return np.concatenate([[0], change, [len(sorted_keys)]]).astype(np.int64)


def build_window_graphs(
    can_id: npt.NDArray[np.uint32],
    payload: npt.NDArray[np.uint8],
    label: npt.NDArray[np.uint8],
    window_size: int = 100,
    stride: int = 100,
) -> WindowGraphs:
    """Window graphs of one stream: ``can_id`` uint32[n], ``payload`` uint8[n, 8], ``label`` [n]."""
    if window_size < 2:
        raise ValueError(f"window_size {window_size} is too small: expected >= 2")
    if stride < 1:
        raise ValueError(f"stride {stride} is invalid: expected >= 1")
    n, w = len(can_id), window_size
    if n < w:
        return WindowGraphs.empty()
    g = (n - w) // stride + 1
    if stride == w:
        msg = np.arange(g * w, dtype=np.int64)
    else:
        msg = ((np.arange(g, dtype=np.int64) * stride)[:, None] + np.arange(w)).ravel()
    pos = np.tile(np.arange(w, dtype=np.int64), g)

    # --- nodes: distinct CAN IDs per window. Sorting each window's row (stable, so positions
    # stay ascending within an ID) is much cheaper than one global sort of (window, ID) keys.
    ids2d = can_id[msg].reshape(g, w)
    order2d = np.argsort(ids2d, axis=1, kind="stable")
    sorted2d = np.take_along_axis(ids2d, order2d, axis=1)
    new_node = np.ones((g, w), bool)
    new_node[:, 1:] = sorted2d[:, 1:] != sorted2d[:, :-1]
    new_flat = new_node.ravel()
    order = (order2d + (np.arange(g, dtype=np.int64) * w)[:, None]).ravel()
    seg = np.concatenate([np.flatnonzero(new_flat), [g * w]]).astype(np.int64)
    num_nodes = len(seg) - 1
    node_can_id = sorted2d.ravel()[seg[:-1]].astype(np.uint32)
    node_graph = seg[:-1] // w
    count = np.diff(seg)
    node_of_msg = np.empty(g * w, np.int64)
    node_of_msg[order] = np.cumsum(new_flat) - 1

    x = np.zeros((num_nodes, len(NODE_FEATURES)), np.float32)
    byte_sums = np.add.reduceat(payload[msg[order]].astype(np.float64), seg[:-1], axis=0)
    x[:, 1:9] = byte_sums / count[:, None] / 255.0
    x[:, 9] = count
    x[:, 10] = pos[order[seg[1:] - 1]] / (w - 1)
    node_ptr = np.searchsorted(node_graph, np.arange(g + 1)).astype(np.int64)

    # --- edges: distinct (source node, target node) over consecutive messages in a window
    nodes2d = node_of_msg.reshape(g, w)
    src = nodes2d[:, :-1].ravel()
    dst = nodes2d[:, 1:].ravel()
    tpos = np.tile(np.arange(w - 1, dtype=np.int64), g)
    # Edges sorted per window by local (source, target): nodes are numbered window by window,
    # so the flattened order is the global (source, target) order.
    local = (nodes2d - node_ptr[:-1, None]).astype(np.int64)
    lkey = local[:, :-1] * w + local[:, 1:]
    eorder2d = np.argsort(lkey, axis=1, kind="stable")
    eorder = (eorder2d + (np.arange(g, dtype=np.int64) * (w - 1))[:, None]).ravel()
    ekey = src * num_nodes + dst
    ekey_sorted = ekey[eorder]
    eseg = _segments(ekey_sorted)
    num_edges = len(eseg) - 1
    ecount = np.diff(eseg)
    ukey = ekey_sorted[eseg[:-1]]
    usrc, udst = ukey // num_nodes, ukey % num_nodes
    tpos_sorted = tpos[eorder]
    first = tpos_sorted[eseg[:-1]]
    last = tpos_sorted[eseg[1:] - 1]

    edge_of_t = np.repeat(np.arange(num_edges, dtype=np.int64), ecount)
    same = edge_of_t[1:] == edge_of_t[:-1]
    gaps = np.diff(tpos_sorted)[same].astype(np.float64)
    sumsq = np.bincount(edge_of_t[1:][same], weights=gaps * gaps, minlength=num_edges)
    multi = ecount >= 2
    denom = np.maximum(ecount - 1, 1)
    mean_int = np.where(multi, (last - first) / denom, 0.0)
    var = np.where(multi, sumsq / denom - mean_int * mean_int, 0.0)
    std_int = np.sqrt(np.maximum(var, 0.0))

    reverse = udst * num_nodes + usrc
    hit = np.searchsorted(ukey, reverse)
    bidir = (hit < num_edges) & (ukey[np.minimum(hit, num_edges - 1)] == reverse)

    degree = (np.bincount(src, minlength=num_nodes) + np.bincount(dst, minlength=num_nodes)).astype(
        np.float64
    )
    e = np.zeros((num_edges, len(EDGE_FEATURES)), np.float64)
    e[:, 0] = ecount
    e[:, 1] = ecount / w
    e[:, 2] = mean_int
    e[:, 3] = std_int
    e[:, 4] = np.where(multi, 1.0 / (1.0 + std_int), 0.0)
    e[:, 5] = first / w
    e[:, 6] = last / w
    e[:, 7] = (last - first) / w
    e[:, 8] = bidir
    e[:, 9] = degree[usrc] * degree[udst]
    e[:, 10] = degree[usrc] / degree[udst]

    edge_graph = node_graph[usrc]
    edge_index = np.stack([usrc - node_ptr[edge_graph], udst - node_ptr[edge_graph]])
    edge_ptr = np.searchsorted(edge_graph, np.arange(g + 1)).astype(np.int64)
    y: npt.NDArray[np.int64] = np.asarray(label[msg].reshape(g, w).any(axis=1), np.int64)
    return WindowGraphs(
        node_can_id=node_can_id,
        x=x,
        edge_index=edge_index.astype(np.int64),
        edge_attr=e.astype(np.float32),
        node_ptr=node_ptr,
        edge_ptr=edge_ptr,
        y=y,
        window_start=np.arange(g, dtype=np.int64) * stride,
    )
