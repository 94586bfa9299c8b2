"""Payload-semantics features: what spoofing and targeted fuzzing change.

Spoofing (a false RPM or speed value) and targeted payload fuzzing send a legitimate ID at about
its normal rate, so the rate, period and vocabulary features (:mod:`kdgat.data.features_vi`,
:mod:`kdgat.data.graphs`) barely move; what moves is the payload *against the ID's own history*:
a value jumps further than that ID's values ever jump, leaves the range the ID's bytes keep,
bytes change together in a pattern the ID never shows (a counter or checksum left behind), or the
value flips back and forth between the true one and the injected one.

On the recordings an injected message is also an *extra* message of that ID, between two of its
periodic ones, and often breaks a byte that only takes a few values (a counter, a status field).
Two messages of an ID closer than half its period are a *close pair*; which of the two is the
extra one, the pair alone cannot tell: an injected message late in the period is close to the true
message *after* it, one early in the period to the true message *before* it. Their neighbours can:
taking the injected message out leaves the ID's true messages one period apart, taking the true one
out leaves a gap a period off by the offset of the injection. So ``period_ratio`` looks at each
message's nearer neighbour of the same ID on *both* sides, and counts the message only when it is
the pair's extra one by that test. A window's verdict then waits for the ID's messages up to about
one and a half periods after the window (the delays that the evaluation and the bench report count
that wait: :mod:`kdgat.data.verdict`). Version 1 of
the column looked back only and missed about a quarter of the speed-spoofing windows; version 2
looked both ways but counted both messages of a pair, so the benign window next to an attack
window was flagged whenever the pair straddled their border; version 3 counted the extra message
only, but of every ID, and an event-driven ID (no period: its messages come close by themselves)
marked most windows of traffic that has them (``PAYLOAD_FEATURES_VERSION`` 4: periodic IDs only).

So each ID gets a **payload profile** learned from traffic without labels (:func:`payload_profile`):
per byte ``k`` the largest change between consecutive messages of the ID (``jump_max[k]``), the
smallest and largest value (``low[k]``, ``high[k]``), the values it takes (kept for the bytes with
at most ``CATEGORICAL_VALUES`` distinct values: counters, flags), the set of *change masks* seen
(bit ``k`` set when byte ``k`` changed), the ID's period (median gap between its messages) and
whether it is periodic (no gap under half the period). The bench and the tests learn it per
recording from its first ``K * W`` messages — the same unlabelled calibration traffic as
``data.calibration_windows = K`` — so a new vehicle needs nothing but its own first seconds of
traffic; nothing here reads a label.

Definitions. ``P[m]`` are message ``m``'s 8 payload bytes (0 beyond its DLC), ``prev(m)`` the
closest earlier message of the stream with the same ID, ``Δ[m, k] = |P[m, k] - P[prev(m), k]|``,
``mask(m)`` the bits ``k`` with ``Δ[m, k] > 0``, ``gap(m) = t[m] - t[prev(m)]``, ``next(m)`` the
closest later message with the same ID, ``near(m)`` the smaller of ``gap(m)`` and
``t[next(m)] - t[m]`` (of those that exist; ∞ without either) and ``c(m)`` that neighbour (the
earlier one on a tie). With ``off(x, y) = |(t[y] - t[x]) / period - 1|`` (∞ when ``x`` or ``y``
does not exist), ``m`` is *extra* when ``off(prev(m), next(m)) <= off`` of the pair with ``c(m)``
taken out instead (``off(prev(c), m)`` when ``c(m) = prev(m)``, ``off(m, next(c))`` when it is
``next(m)``): taking ``m`` out leaves a spacing at least as regular. For a node (ID ``v`` in a
window) with messages ``M``, ``D`` = those with a ``prev(m)``, ``X`` = the extra ones, and ``v``'s
profile (if ``v`` had at least one message with a ``prev`` in the profile traffic: *profiled*;
every column is 0 otherwise):

====  =================  ===================================================================
col   name               meaning (0 when the set it averages or maximises over is empty)
====  =================  ===================================================================
11    jump_excess        max over m in D, k of max(0, Δ[m, k] - jump_max[k]) / 255
12    jump_share         share of m in D with Δ[m, k] > jump_max[k] for some k
13    range_excess       max over m in M, k of max(0, low[k] - P[m, k], P[m, k] - high[k]) / 255
14    period_ratio       log2(max(2 * min over m in X of near(m) / period, 2^-10)), capped at 0:
                         how much closer than half the ID's period an extra message of the window
                         came to its neighbour (0 = not closer: the jitter of periodic traffic
                         stays above half a period); 0 for an ID that is not *periodic*: one with
                         a gap under half its period in the profile traffic (an event-driven ID,
                         whose messages come close by themselves)
15    novel_mask_share   share of m in D whose mask(m) is not among the profile's masks
16    novel_value_share  share of m in M with a categorical byte k (at most CATEGORICAL_VALUES
                         values in the profile) whose value P[m, k] the profile never saw
====  =================  ===================================================================

Columns 0-10 and the edges are those of :func:`~kdgat.data.features_vi.vehicle_independent_features`
(the graphs passed in), so this set is the vehicle-independent one plus six columns (17 node
features; the models take ``node_features=17``). Vectorised with numpy; ``tests/data/
test_features_payload.py`` checks every column against a slow pure-Python reference.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from kdgat.data.features_vi import VI_NODE_FEATURES, previous_occurrence, window_chunks, window_index
from kdgat.data.graphs import WindowGraphs, WindowIndex

PAYLOAD_NODE_FEATURES: tuple[str, ...] = (
    *VI_NODE_FEATURES,
    "jump_excess",
    "jump_share",
    "range_excess",
    "period_ratio",
    "novel_mask_share",
    "novel_value_share",
)
#: A byte with at most this many distinct values in the profile is categorical (its values kept).
CATEGORICAL_VALUES = 16
#: The definition of these columns; part of a payload cache's key (a change rebuilds those caches).
PAYLOAD_FEATURES_VERSION = 4


@dataclass(frozen=True)
class PayloadProfile:
    """Per profiled ID (``ids`` ascending): ``jump_max``, ``low``, ``high`` ``[n, 8]`` (uint8 as
    int64), ``period`` ``[n]`` (s); ``masks``: sorted keys ``id << 8 | mask`` of the masks seen;
    ``categorical`` ``[n, 8]``: byte k has at most CATEGORICAL_VALUES values; ``values``: sorted keys
    ``id << 11 | k << 8 | value`` of the values seen; ``periodic`` ``[n]``: no two consecutive
    messages of the ID came closer than half its period (the only IDs ``period_ratio`` reads)."""

    ids: npt.NDArray[np.uint32]
    jump_max: npt.NDArray[np.int64]
    low: npt.NDArray[np.int64]
    high: npt.NDArray[np.int64]
    period: npt.NDArray[np.float64]
    periodic: npt.NDArray[np.bool_]
    masks: npt.NDArray[np.uint64]
    categorical: npt.NDArray[np.bool_]
    values: npt.NDArray[np.uint64]


def _value_keys(can_id: npt.NDArray[np.uint32], payload: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint64]:
    """``[n, 8]`` keys ``id << 11 | k << 8 | P[m, k]``."""
    k = np.arange(8, dtype=np.uint64) << np.uint64(8)
    return np.asarray((can_id.astype(np.uint64)[:, None] << np.uint64(11)) | k | payload, dtype=np.uint64)


def _deltas(
    can_id: npt.NDArray[np.uint32], payload: npt.NDArray[np.uint8]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.uint64]]:
    """``prev`` per message, ``Δ`` ``[n, 8]`` (0 without a prev) and the change mask."""
    prev = previous_occurrence(can_id)
    p = payload.astype(np.int64)
    delta = np.where((prev >= 0)[:, None], np.abs(p - p[np.maximum(prev, 0)]), 0)
    mask = ((delta > 0).astype(np.uint64) << np.arange(8, dtype=np.uint64)).sum(axis=1).astype(np.uint64)
    return prev, delta, mask


def payload_profile(
    can_id: npt.NDArray[np.uint32], payload: npt.NDArray[np.uint8], timestamp: npt.NDArray[np.float64]
) -> PayloadProfile:
    """The profile of every ID of this traffic (a recording's first messages, or benign traffic)
    with at least one message whose ``prev`` is in it too. Reads no label."""
    prev, delta, mask = _deltas(can_id, payload)
    has = prev >= 0
    ids = np.unique(can_id[has])
    n = len(ids)
    row = np.searchsorted(ids, can_id)
    known = row < n
    known[known] = ids[row[known]] == can_id[known]
    jump_max = np.zeros((n, 8), np.int64)
    np.maximum.at(jump_max, row[has], delta[has])
    p = payload.astype(np.int64)
    low = np.full((n, 8), 255, np.int64)
    high = np.zeros((n, 8), np.int64)
    np.minimum.at(low, row[known], p[known])
    np.maximum.at(high, row[known], p[known])
    # period: the median gap (the lower middle one of an even count)
    gap = timestamp[has] - timestamp[prev[has]]
    by = np.lexsort((gap, row[has]))
    sr, sg = row[has][by], gap[by]
    first = np.searchsorted(sr, np.arange(n))
    count = np.bincount(sr, minlength=n)
    period = sg[first + (count - 1) // 2] if n else np.zeros(0)
    periodic = sg[first] >= period / 2 if n else np.zeros(0, bool)
    masks = np.unique((can_id[has].astype(np.uint64) << np.uint64(8)) | mask[has])
    keys = np.unique(_value_keys(can_id[known], payload[known]))
    distinct = np.zeros((n, 8), np.int64)
    np.add.at(
        distinct,
        (
            np.searchsorted(ids, (keys >> np.uint64(11)).astype(np.uint32)),
            (keys >> np.uint64(8)) & np.uint64(7),
        ),
        1,
    )
    categorical = distinct <= CATEGORICAL_VALUES
    return PayloadProfile(ids, jump_max, low, high, period, periodic, masks, categorical, keys)


def payload_features(
    graphs: WindowGraphs,
    profile: PayloadProfile,
    *,
    can_id: npt.NDArray[np.uint32],
    payload: npt.NDArray[np.uint8],
    timestamp: npt.NDArray[np.float64],
    window_size: int,
    index: WindowIndex | None = None,
    previous: npt.NDArray[np.int64] | None = None,
) -> WindowGraphs:
    """``graphs`` (vehicle-independent features of this stream) with the six payload columns
    appended to the node features (raw, before normalisation); edges unchanged. When
    ``graphs.x`` already has the 17 columns (``vehicle_independent_features(...,
    extra_columns=6)``), they are filled in place of a copy. ``index`` and ``previous``: as for
    :func:`~kdgat.data.features_vi.vehicle_independent_features`."""
    g = graphs.num_graphs
    num_nodes = len(graphs.node_can_id)
    if graphs.x.shape[1] == len(PAYLOAD_NODE_FEATURES):
        x = graphs.x
    else:
        x = np.zeros((num_nodes, len(PAYLOAD_NODE_FEATURES)), np.float32)
        x[:, : len(VI_NODE_FEATURES)] = graphs.x
    extra = x[:, len(VI_NODE_FEATURES) :]
    extra[:] = 0.0
    n_prof = len(profile.ids)
    if g and n_prof:
        w = window_size
        if index is None:
            index = window_index(graphs, can_id, w)
        prev = previous_occurrence(can_id) if previous is None else previous
        nxt = np.full(len(prev), -1, np.int64)
        nxt[prev[prev >= 0]] = np.flatnonzero(prev >= 0)
        jump_max = profile.jump_max.astype(np.int16)
        low, high = profile.low.astype(np.int16), profile.high.astype(np.int16)
        period = np.where(profile.periodic, profile.period, np.nan)
        # the profile's values and masks as lookup tables: row * 2048 + k * 256 + value, row * 256 + mask
        seen_value = np.zeros(n_prof * 2048, bool)
        seen_value[
            np.searchsorted(profile.ids, (profile.values >> np.uint64(11)).astype(np.uint32)) * 2048
            + (profile.values & np.uint64(2047)).astype(np.int64)
        ] = True
        seen_mask = np.zeros(n_prof * 256, bool)
        seen_mask[
            np.searchsorted(profile.ids, (profile.masks >> np.uint64(8)).astype(np.uint32)) * 256
            + (profile.masks & np.uint64(255)).astype(np.int64)
        ] = True
        byte_at = np.arange(8, dtype=np.int64) * 256
        for a, b, na, nb in window_chunks(graphs.node_ptr, w):
            nn = nb - na
            msg = index.message[a:b]
            node = index.node[a:b] - na
            pm = prev[msg]
            has = pm >= 0
            p = payload[msg].astype(np.int16)
            delta = np.abs(p - payload[np.maximum(pm, 0)].astype(np.int16))
            delta[~has] = 0
            ids = can_id[msg]
            row = np.searchsorted(profile.ids, ids)
            profiled = row < n_prof
            profiled[profiled] = profile.ids[row[profiled]] == ids[profiled]
            r = np.where(profiled, row, 0)
            n_has = np.bincount(node, weights=has, minlength=nn)
            prof_has = profiled & has

            # integer maxima first: max(e) / 255 is max(e / 255), e >= 0
            excess = np.maximum(0, delta - jump_max[r]).max(axis=1)
            top = np.zeros(nn, np.int16)
            np.maximum.at(top, node[prof_has], excess[prof_has])
            extra[na:nb, 0] = top / 255.0
            over = (delta > jump_max[r]).any(axis=1)
            share = np.bincount(node, weights=prof_has & over, minlength=nn)
            out_of_range = np.maximum(0, np.maximum(low[r] - p, p - high[r])).max(axis=1)
            top[:] = 0
            np.maximum.at(top, node[profiled], out_of_range[profiled])
            extra[na:nb, 2] = top / 255.0
            extra[na:nb, 3] = _period_ratio(
                node, nn, msg, prev, nxt, timestamp, np.where(profiled, period[r], np.nan)
            )
            unseen = ~seen_value[(r * 2048)[:, None] + byte_at + p]
            unseen &= profile.categorical[r] & profiled[:, None]
            extra[na:nb, 5] = np.bincount(node, weights=unseen.any(axis=1), minlength=nn) / np.maximum(
                1, np.bincount(node, minlength=nn)
            )
            mask = np.packbits(delta > 0, axis=1, bitorder="little")[:, 0].astype(np.int64)
            novel = ~seen_mask[r * 256 + mask]
            novel_share = np.bincount(node, weights=prof_has & novel, minlength=nn)
            # the node is profiled when its ID is (all its messages share the ID)
            node_profiled = np.zeros(nn, bool)
            node_profiled[node[profiled]] = True
            with_d = node_profiled & (n_has > 0)
            extra[na:nb, 1] = np.where(with_d, share / np.maximum(n_has, 1), 0.0)
            extra[na:nb, 4] = np.where(with_d, novel_share / np.maximum(n_has, 1), 0.0)
    return replace(graphs, x=x)


def _period_ratio(
    node: npt.NDArray[np.int64],
    num_nodes: int,
    msg: npt.NDArray[np.int64],
    prev: npt.NDArray[np.int64],
    nxt: npt.NDArray[np.int64],
    timestamp: npt.NDArray[np.float64],
    period: npt.NDArray[np.float64],
) -> npt.NDArray[np.float64]:
    """Column 14 per node: ``msg`` are the stream indices of the windows' messages, ``node`` their
    node, ``period`` their ID's profiled period (NaN when unprofiled)."""

    def at(i: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        """``t[i]``, NaN where ``i`` is -1 (no such message)."""
        return np.where(i >= 0, timestamp[np.maximum(i, 0)], np.nan)

    def hop(links: npt.NDArray[np.int64], i: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """``links[i]``, -1 where ``i`` is -1."""
        return np.where(i >= 0, links[np.maximum(i, 0)], -1)

    def off(x: npt.NDArray[np.float64], y: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """How far ``y - x`` is from one period, in periods; inf where either is missing."""
        d = np.abs((y - x) / np.maximum(period, 1e-9) - 1)
        return np.where(np.isnan(d), np.inf, d)

    pm, nm = prev[msg], nxt[msg]
    t, tp, tn = timestamp[msg], at(pm), at(nm)
    back = np.where(pm >= 0, t - tp, np.inf)
    ahead = np.where(nm >= 0, tn - t, np.inf)
    near = np.minimum(back, ahead)
    partner_is_prev = back <= ahead
    # the spacing left with the partner taken out instead of m
    other = np.where(
        partner_is_prev,
        off(at(hop(prev, pm)), t),
        off(t, at(hop(nxt, nm))),
    )
    is_extra = np.isfinite(near) & ~np.isnan(period) & (off(tp, tn) <= other)
    ratio = np.where(is_extra, near / np.maximum(period, 1e-9), np.inf)
    soonest = np.full(num_nodes, np.inf)
    np.minimum.at(soonest, node, ratio)
    return np.where(np.isfinite(soonest), np.minimum(0.0, np.log2(np.maximum(2 * soonest, 2.0**-10))), 0.0)
