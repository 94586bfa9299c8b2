"""Vehicle-independent window-graph features (``data.features = "vehicle_independent"``).

The paper's node features (:mod:`kdgat.data.graphs`) start with a CAN-ID vocabulary index learned
from the training vehicles' benign IDs: on a vehicle never seen in training every ID is "unknown",
which is what DoS and fuzzing look like in training. The features here describe *how* an ID
behaves — its rate, period and regularity, its payloads, how new it is in the stream — so they mean
the same on any vehicle. The graph (nodes, edges, labels, order) is the one of
:func:`~kdgat.data.graphs.build_window_graphs`; only the feature columns differ, and there are
again 11 + 11 of them, so the models take either set unchanged.

Definitions. Message ``m`` of the stream has timestamp ``t[m]``, ID ``id[m]``, length ``dlc[m]``
and payload ``P[m]`` (its first ``dlc`` bytes). ``prev(m)`` is the closest earlier message of the
stream with the same ID (none for an ID's first message), ``H`` = ``history`` messages, and
``nov(d) = min(1, log(1 + d) / log(1 + H))`` for a distance ``d`` in messages. With no earlier
occurrence, message ``m`` (0-based position in the stream) is at least ``m + 1`` messages from one,
and ``nov(m + 1)``, that least distance, is used: 1 once the stream has ``H`` messages behind it, and
low at its start, where no ID is yet known to be new (version 1 of these features gave 1 there, so
a recording's first windows looked like a random-ID injection: ``VI_FEATURES_VERSION`` 2). The
same holds for time: an ID's first message ``m`` of the stream is at least ``t[m] - t[0]`` seconds
from an earlier one, and a node whose messages have no earlier occurrence (``D`` below is empty:
one message, the ID's first) takes that least gap as its period (version 2 gave 0 there, the
value a random injected ID also had, so the windows in which a recording's slow IDs first appear
looked like one: ``VI_FEATURES_VERSION`` 3).

For a node (ID ``v`` in window ``[s, s + W)``) with messages ``M`` (``c`` of them) and ``D`` = the
gaps ``t[m] - t[prev(m)]`` for ``m`` in ``M`` with a ``prev(m)``:

====  =================  ===================================================================
col   name               meaning
====  =================  ===================================================================
0     no_vocabulary      always 0: the models' CAN-ID embedding slot, unused (one constant row)
1     rate               c / W
2     log_period         log10(max(mean(D), 1e-6)) + 6; when D is empty (the node's one
                         message m0 is its ID's first): log10(max(t[m0] - t[0], 1e-6)) + 6
3     period_cv          std(D) / mean(D) (population std; 0 when |D| < 2 or mean(D) = 0)
4     payload_entropy    Shannon entropy (bits) of the byte values of all payload bytes of M / 8
5     payload_change     share of m in M with a prev(m) whose (dlc, payload) differs from
                         prev(m)'s, over the m in M with a prev(m) (0 when there is none)
6     payload_distinct   number of distinct (dlc, payload) among M / c
7     zero_payload       share of m in M whose payload bytes are all 0 (dlc 0 counts)
8     dlc_mean           mean dlc over M / 8
9     novelty            nov(m0 - prev(m0)) for the node's first message m0 of the window
10    id_rank            the node's rank among the window's IDs, ascending (0 = lowest = the
                         highest CAN priority) / max(1, nodes - 1)
====  =================  ===================================================================

Edges ``a -> b`` with transitions at positions ``p_1 < ... < p_c`` (message ``s + p`` has ID
``a`` and ``s + p + 1`` has ID ``b``): columns 0-4 and 7-10 of the paper's edge features (count,
frequency, mean_interval, std_interval, regularity, span, bidirectional, degree_product,
degree_ratio — positional and degree statistics, the same on any vehicle), then

====  =================  ===================================================================
9     novelty            nov(q - prevT(q)) for the first transition q = s + p_1, where
                         prevT(q) is the closest earlier transition of the stream with the
                         same (a, b) (none: nov(q + 1), as for nodes)
10    log_gap_ratio      log10((mean_i |t[s+p_i+1] - t[s+p_i]| + 1e-6) / (T_w + 1e-6)), with
                         T_w = |t[s + W - 1] - t[s]| / (W - 1) the window's mean message gap
====  =================  ===================================================================

All of it is computed from the stream only (no labels, no vocabulary), vectorised with numpy.
"""

from __future__ import annotations

from typing import TypeVar

import numpy as np
import numpy.typing as npt

from kdgat.data.graphs import EDGE_FEATURES, WindowGraphs, WindowIndex

#: The definitions' version, in the graph cache's parameters (a change rebuilds the caches).
#: 2: an ID or transition with no earlier occurrence gets the novelty of its least possible distance
#: (1 only once the stream is ``history`` messages long), no longer 1 from the stream's start.
#: 3: a node whose one message is its ID's first gets the least possible gap as ``log_period``
#: (the time since the stream's first message), no longer 0.
VI_FEATURES_VERSION = 3

VI_NODE_FEATURES: tuple[str, ...] = (
    "no_vocabulary",
    "rate",
    "log_period",
    "period_cv",
    "payload_entropy",
    "payload_change",
    "payload_distinct",
    "zero_payload",
    "dlc_mean",
    "novelty",
    "id_rank",
)
#: Paper edge columns kept (count, frequency, mean/std interval, regularity, span, bidirectional,
#: degree product/ratio): positional and degree statistics.
_KEPT_EDGE_COLUMNS = (0, 1, 2, 3, 4, 7, 8, 9, 10)
VI_EDGE_FEATURES: tuple[str, ...] = (
    *(EDGE_FEATURES[c] for c in _KEPT_EDGE_COLUMNS),
    "novelty",
    "log_gap_ratio",
)

_T = TypeVar("_T", bound=np.generic)

#: Default novelty horizon H (messages).
DEFAULT_HISTORY = 1000


def previous_occurrence(key: npt.NDArray[np.unsignedinteger]) -> npt.NDArray[np.int64]:
    """``prev[m]``: the largest ``j < m`` with ``key[j] == key[m]``, else -1."""
    n = len(key)
    prev = np.full(n, -1, np.int64)
    if n < 2:
        return prev
    if n < 1 << 32 and (key.dtype.itemsize <= 4 or int(key.max()) < 1 << 32):
        # one sort of (key, position) packed into 64 bits: the positions of each key ascending
        packed = np.sort((key.astype(np.uint64) << np.uint64(32)) | np.arange(n, dtype=np.uint64))
        pos = (packed & np.uint64(0xFFFFFFFF)).astype(np.int64)
        same = (packed[1:] >> np.uint64(32)) == (packed[:-1] >> np.uint64(32))
        prev[pos[1:][same]] = pos[:-1][same]
        return prev
    order = np.argsort(key, kind="stable")
    sk = key[order]
    same = sk[1:] == sk[:-1]
    prev[order[1:][same]] = order[:-1][same]
    return prev


def transition_codes(can_id: npt.NDArray[np.uint32]) -> npt.NDArray[np.uint64]:
    """One key per transition ``m -> m + 1`` (``n - 1`` of them), equal exactly when the pair
    of IDs ``(can_id[m], can_id[m + 1])`` is: dense when the stream has under 2^16 distinct IDs."""
    n = len(can_id)
    if n < 2:
        return np.zeros(0, np.uint64)
    ids = np.unique(can_id)
    k = len(ids)
    if k >= 1 << 16:
        return (can_id[:-1].astype(np.uint64) << np.uint64(32)) | can_id[1:].astype(np.uint64)
    if int(ids[-1]) < 1 << 22:
        table = np.zeros(int(ids[-1]) + 1, np.uint64)
        table[ids] = np.arange(k, dtype=np.uint64)
        code = table[can_id]
    else:
        code = np.searchsorted(ids, can_id).astype(np.uint64)
    return code[:-1] * np.uint64(k) + code[1:]


def window_index(graphs: WindowGraphs, can_id: npt.NDArray[np.uint32], window_size: int) -> WindowIndex:
    """The :class:`~kdgat.data.graphs.WindowIndex` of ``graphs`` (built by ``build_window_graphs``
    from this stream), found from the graphs alone: what
    :func:`~kdgat.data.graphs.build_window_graphs_indexed` returns with them."""
    g, w = graphs.num_graphs, window_size
    starts = graphs.window_start
    msg = (starts[:, None] + np.arange(w)).ravel()
    win = np.repeat(np.arange(g, dtype=np.int64), w)
    num_nodes = len(graphs.node_can_id)
    node_graph = np.repeat(np.arange(g, dtype=np.int64), np.diff(graphs.node_ptr))
    # nodes are sorted by (graph, CAN ID)
    node_key = (node_graph.astype(np.uint64) << np.uint64(32)) | graphs.node_can_id.astype(np.uint64)
    msg_key = (win.astype(np.uint64) << np.uint64(32)) | can_id[msg].astype(np.uint64)
    node = np.searchsorted(node_key, msg_key).astype(np.int64)
    node_first = np.full(num_nodes, np.iinfo(np.int64).max, np.int64)
    np.minimum.at(node_first, node, msg)
    e_graph = np.repeat(np.arange(g, dtype=np.int64), np.diff(graphs.edge_ptr))
    gsrc = graphs.edge_index[0] + graphs.node_ptr[e_graph]
    gdst = graphs.edge_index[1] + graphs.node_ptr[e_graph]
    edge_key = gsrc * num_nodes + gdst
    node2d = node.reshape(g, w)
    edge = np.searchsorted(edge_key, (node2d[:, :-1] * num_nodes + node2d[:, 1:]).ravel()).astype(np.int64)
    t_msg = (starts[:, None] + np.arange(w - 1)).ravel()
    edge_first = np.full(len(e_graph), np.iinfo(np.int64).max, np.int64)
    np.minimum.at(edge_first, edge, t_msg)
    return WindowIndex(message=msg, node=node, edge=edge, node_first=node_first, edge_first=edge_first)


def _novelty(
    position: npt.NDArray[np.int64], previous: npt.NDArray[np.int64], history: int
) -> npt.NDArray[np.float64]:
    """``nov`` of the distance from each ``position`` back to its ``previous`` occurrence (-1: none,
    and then the least distance it can have, ``position + 1``)."""
    d = np.where(previous >= 0, position - previous, position + 1)
    return np.minimum(1.0, np.log1p(np.maximum(d, 0).astype(np.float64)) / np.log1p(history))


#: Window messages per chunk of the per-node payload statistics (entropy, distinct payloads): the
#: chunk's sort keys stay in the CPU caches.
CHUNK_MESSAGES = 1 << 16


def window_chunks(node_ptr: npt.NDArray[np.int64], window_size: int) -> list[tuple[int, int, int, int]]:
    """``(first window message, end, first node, end)`` of chunks of whole windows of about
    ``CHUNK_MESSAGES`` messages (the window-message arrays of a :class:`WindowIndex`)."""
    g = len(node_ptr) - 1
    per = max(1, CHUNK_MESSAGES // window_size)
    return [
        (a * window_size, min(a + per, g) * window_size, int(node_ptr[a]), int(node_ptr[min(a + per, g)]))
        for a in range(0, g, per)
    ]


def _payload_entropy_distinct(
    node: npt.NDArray[np.int64],
    dlc: npt.NDArray[np.uint8],
    payload: npt.NDArray[np.uint8],
    p64: npt.NDArray[np.uint64],
    chunks: list[tuple[int, int, int, int]],
    num_nodes: int,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]]:
    """Per node: the sum of ``-p log2 p`` over the byte values of its messages' payload bytes
    (summed in ascending byte value), and the number of distinct ``(dlc, payload)`` among its
    messages. ``node``, ``dlc``, ``payload``, ``p64``: per window message."""
    entropy = np.zeros(num_nodes, np.float64)
    distinct = np.zeros(num_nodes, np.int64)
    cols = np.arange(8)
    for a, b, na, nb in chunks:
        local = (node[a:b] - na).astype(np.uint32)
        nn = nb - na
        d = dlc[a:b]
        keys = (local[:, None] << np.uint32(8)) | payload[a:b]
        if not (d == 8).all():
            keys = keys[cols[None, :] < d[:, None]]
        keys = np.sort(keys, axis=None)
        if len(keys):
            run = np.ones(len(keys), bool)
            run[1:] = keys[1:] != keys[:-1]
            at = np.flatnonzero(run)
            cnt = np.diff(np.append(at, len(keys)))
            kn = (keys[at] >> np.uint32(8)).astype(np.int64)
            tot = np.bincount(kn, weights=cnt, minlength=nn)
            p = cnt / tot[kn]
            entropy[na:nb] = np.bincount(kn, weights=-p * np.log2(p), minlength=nn)
        # distinct bodies: (node, dlc, payload) with the payload as its rank among the chunk's
        values, code = np.unique(p64[a:b], return_inverse=True)
        body = np.sort((local.astype(np.int64) * 9 + d) * len(values) + code.ravel())
        new = np.ones(len(body), bool)
        new[1:] = body[1:] != body[:-1]
        distinct[na:nb] = np.bincount(body[new] // (9 * len(values)), minlength=nn)
    return entropy, distinct


def vehicle_independent_features(
    graphs: WindowGraphs,
    *,
    timestamp: npt.NDArray[np.float64],
    can_id: npt.NDArray[np.uint32],
    dlc: npt.NDArray[np.uint8],
    payload: npt.NDArray[np.uint8],
    window_size: int,
    history: int = DEFAULT_HISTORY,
    index: WindowIndex | None = None,
    previous: npt.NDArray[np.int64] | None = None,
    extra_columns: int = 0,
) -> WindowGraphs:
    """``graphs`` (built by ``build_window_graphs`` from this stream) with the node and edge
    feature columns replaced by the vehicle-independent ones (raw, before normalisation).

    ``index``: the graphs' :class:`~kdgat.data.graphs.WindowIndex` when the caller has it (from
    ``build_window_graphs_indexed``; else it is found again), ``previous``:
    ``previous_occurrence(can_id)`` when the caller has it; ``extra_columns``: node columns left 0
    after the 11 (for a feature set that appends its own)."""
    if history < 1:
        raise ValueError(f"history {history} is invalid: expected >= 1 message")
    g = graphs.num_graphs
    if g == 0:
        return graphs
    w = window_size
    if index is None:
        index = window_index(graphs, can_id, w)
    msg, node, first_msg = index.message, index.node, index.node_first
    num_nodes = len(graphs.node_can_id)
    node_graph = np.repeat(np.arange(g, dtype=np.int64), np.diff(graphs.node_ptr))
    count = np.bincount(node, minlength=num_nodes).astype(np.float64)

    prev = previous_occurrence(can_id) if previous is None else previous
    # windows back to back (stride = W): the window messages are the stream's head, no gathers
    contiguous = g == 1 or int(graphs.window_start[1] - graphs.window_start[0]) == w

    def at(a: npt.NDArray[_T]) -> npt.NDArray[_T]:
        return a[: len(msg)] if contiguous else a[msg]

    pm = at(prev)
    has = pm >= 0
    pm0 = np.maximum(pm, 0)
    t_msg = at(timestamp)
    gap = np.where(has, t_msg - timestamp[pm0], 0.0)
    n_gap = np.bincount(node, weights=has.astype(np.float64), minlength=num_nodes)
    s1 = np.bincount(node, weights=gap, minlength=num_nodes)
    s2 = np.bincount(node, weights=gap * gap, minlength=num_nodes)
    mean_gap = np.divide(s1, n_gap, out=np.zeros(num_nodes), where=n_gap > 0)
    var_gap = np.divide(s2, n_gap, out=np.zeros(num_nodes), where=n_gap > 0) - mean_gap**2
    std_gap = np.sqrt(np.maximum(var_gap, 0.0))
    # no gap at all: the node's one message is its ID's first, at least t[m0] - t[0] after one
    least_gap = timestamp[first_msg] - timestamp[0]

    # float64 columns written straight into float32 (the same rounding as a final astype), one
    # contiguous row per column, turned into the node rows at the end
    xt = np.zeros((len(VI_NODE_FEATURES) + extra_columns, num_nodes), np.float32)
    xt[1] = count / w
    xt[2] = np.log10(np.maximum(np.where(n_gap > 0, mean_gap, least_gap), 1e-6)) + 6.0
    xt[3] = np.where((n_gap >= 2) & (mean_gap > 0), std_gap / np.where(mean_gap > 0, mean_gap, 1.0), 0.0)

    # payload identity: 8 bytes (zero beyond dlc) + dlc
    p64_all = np.ascontiguousarray(payload).view(np.uint64).ravel()
    p64, d = at(p64_all), at(dlc)
    entropy, distinct = _payload_entropy_distinct(
        node, d, at(payload), p64, window_chunks(graphs.node_ptr, w), num_nodes
    )
    xt[4] = entropy / 8.0
    changed = (p64 != p64_all[pm0]) | (d != dlc[pm0])
    n_changed = np.bincount(node, weights=(changed & has).astype(np.float64), minlength=num_nodes)
    xt[5] = np.divide(n_changed, n_gap, out=np.zeros(num_nodes), where=n_gap > 0)
    xt[6] = distinct / count
    zero = p64 == 0
    xt[7] = np.bincount(node, weights=zero.astype(np.float64), minlength=num_nodes) / count
    xt[8] = np.bincount(node, weights=d.astype(np.float64), minlength=num_nodes) / count / 8.0

    # novelty of the node's first message in the window
    xt[9] = _novelty(first_msg, prev[first_msg], history)
    local = np.arange(num_nodes) - graphs.node_ptr[node_graph]
    n_in_graph = np.diff(graphs.node_ptr)[node_graph]
    xt[10] = local / np.maximum(1, n_in_graph - 1)

    # --- edges: the transition (message s+p -> s+p+1) of every window, mapped to its edge
    num_edges = len(graphs.edge_attr)
    e_graph = np.repeat(np.arange(g, dtype=np.int64), np.diff(graphs.edge_ptr))
    edge, first_t = index.edge, index.edge_first
    tprev = previous_occurrence(transition_codes(can_id))
    ftp = tprev[first_t]

    t2 = t_msg.reshape(g, w)
    dt = np.abs(t2[:, 1:] - t2[:, :-1]).ravel()
    ecount = np.bincount(edge, minlength=num_edges).astype(np.float64)
    mean_dt = np.bincount(edge, weights=dt, minlength=num_edges) / ecount
    starts = graphs.window_start
    win_dt = np.abs(timestamp[starts + w - 1] - timestamp[starts]) / (w - 1)

    e = np.empty((num_edges, len(VI_EDGE_FEATURES)), np.float32)
    assert _KEPT_EDGE_COLUMNS == (0, 1, 2, 3, 4, 7, 8, 9, 10)  # two slices of the paper's columns
    e[:, :5] = graphs.edge_attr[:, :5]
    e[:, 5:9] = graphs.edge_attr[:, 7:11]
    e[:, 9] = _novelty(first_t, ftp, history)
    e[:, 10] = np.log10((mean_dt + 1e-6) / (win_dt[e_graph] + 1e-6))
    return WindowGraphs(
        node_can_id=graphs.node_can_id,
        x=np.ascontiguousarray(xt.T),
        edge_index=graphs.edge_index,
        edge_attr=e,
        node_ptr=graphs.node_ptr,
        edge_ptr=graphs.edge_ptr,
        y=graphs.y,
        window_start=graphs.window_start,
    )
