"""bench/real-data: how well detection carries over to an unseen vehicle and an unseen attack type,
and whether it sees subtle attacks, on the real CAN recordings of a folder, converted to Parquet
(timestamp, id, data_field, label, source_file): the public HCRL "Survival Analysis" CAN data set
(Kia Soul, Hyundai Sonata; train_01/train_02, as repackaged by the can-train-and-test collection)
and can-train-and-test set_01 and set_03 (two more vehicles; targeted payload fuzzing, RPM and
speed spoofing). They are not in this repository: `--data DIR` names their folder; the development
machines keep them in ../shared/data/can-real. The hcrl_sa test recordings and set_02/set_04 are
never used.

Run from the repo root:  cd python && uv run python ../bench/real-data/run.py [--quick]

Scenarios (window graphs of 100 messages, as the pipeline builds them; ``scenarios``):

- ``known``          every recording (exact duplicates dropped), windows split at random 70/10/20
                     into train / validation / test (known vehicles, known attacks)
- ``lovo-<v>``       leave one vehicle out: train + validation (90/10) on the other vehicles'
                     recordings, test on every window of vehicle v (kia, sonata, set01, set03)
- ``loao-<a>``       leave one attack type out: train + validation on the recordings without attack
                     a, test on every window of the recordings with it (dos, fuzzy, targeted, spoof)
- ``known-spoof``    set_03's spoofing, vehicle and attack known: tested on the second RPM and
                     speed recordings, trained on everything else
- ``known-targeted`` set_01's targeted fuzzing, vehicle and attack known: alternate tenths of its
                     one recording for training and test

Variants (feature set and normalisation, each trained once per scenario: a VGAE on benign training
windows, then the curriculum GAT), every one scored in every mode of ``kdgat.scoring``
(``SCORING_MODES``). Every threshold and fusion weight is fitted on the validation windows of
the training recordings; test labels are used to compute the printed scores and nothing else (the
CAN-ID vocabulary holds the IDs of the benign training windows, built after the split as the
pipeline builds it; until the sixth session it read every benign message of the training
recordings, which in ``known`` and ``known-targeted`` included the test windows');
``novelty_mean_or_max`` is scored with the VGAE's mean and
largest node loss (the pipeline's ``vgae_pools``), the other modes with ``--vgae-pool``. Beside
window F1 / precision / recall / specificity: the event figures of
``kdgat.scoring.events`` (episodes detected, delay to the first flagged window's verdict time — the
last message its features read, ``kdgat.data.verdict``, per variant — and false alarms per hour of
benign traffic, overall and per test recording), and for ``novelty_timing`` the timing rule against
the models per recording (``kdgat.scoring.rules``: on the test recordings, and on each training
recording's validation windows with the models' bars fitted on the other training recordings').

- ``paper``          the published 11 + 11 features with the CAN-ID vocabulary index
- ``vi``             vehicle-independent features (``data.features=vehicle_independent``)
- ``vi+calib``       the same, each recording normalised by its own first K unlabelled windows
                     (``data.calibration_windows=K``)
- ``payload+calib``  ``vi+calib`` plus the payload-semantics columns (``kdgat.data.features_payload``,
                     each ID's profile from the recording's first PROFILE_WINDOWS windows)

Training here is the bench's own short loop over the pipeline's models (``GATWithJK``,
``GraphAutoencoderNeighborhood``, Adam, class-weighted cross-entropy, the curriculum schedule of the
curriculum stage: the easiest half by VGAE score first, all of it by the last epoch), without
Lightning's checkpointing, so that a whole table fits in minutes on 2 cores. ``paper`` scored
``gat`` is therefore the published features and decision rule, not the published pipeline's training.
Prints progress, the table, and one JSON line (also written to --json).
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch_geometric.loader import DataLoader

from kdgat.config import build_config
from kdgat.data import CanIdVocab, GraphSet, WindowGraphs, build_window_graphs, read_can_file
from kdgat.data.calibration import calibrate_rows, moments
from kdgat.data.features_payload import payload_features, payload_profile
from kdgat.data.features_vi import VI_NODE_FEATURES, vehicle_independent_features
from kdgat.data.verdict import profile_head, verdict_messages, verdict_times
from kdgat.models import GATWithJK, GraphAutoencoderNeighborhood
from kdgat.scoring import (
    SCORING_MODES,
    Scorer,
    binary_counts,
    event_figures,
    f1_from_counts,
    false_alarms_by_recording,
    fit_scorer,
    gat_probabilities,
    needs_timing,
    timing_scores,
    vgae_pools,
    window_times,
)
from kdgat.scoring.rules import rule_by_recording, rule_validation
from kdgat.stages.scoring import anomaly_scores

_ROOT = Path(__file__).resolve().parents[2]
#: ../shared/data/can-real from the main checkout (/work/main) or from a worktree (/work/wt/<name>)
DATA = next(
    (
        p
        for p in (_ROOT.parent / "shared/data/can-real", _ROOT.parent.parent / "shared/data/can-real")
        if p.is_dir()
    ),
    _ROOT.parent / "shared/data/can-real",
)
VEHICLES = ("kia", "sonata", "set01", "set03")
#: The bench's attack types, by file name: random-ID fuzzing and targeted payload fuzzing (random
#: payloads of a legitimate ID) are different attacks here, unlike ``kdgat.data.attack_type_of``
#: (which calls both "fuzzy"); RPM and speed spoofing are one type, "spoof".
ATTACKS = {1: "dos", 2: "fuzzy", 3: "targeted", 4: "spoof"}
VARIANTS = {
    "paper": ("paper", 0),
    "vi": ("vehicle_independent", 0),
    "vi+calib": ("vehicle_independent", 20),
    "paper+calib": ("paper", 20),
    "payload+calib": ("payload", 20),
}
#: Windows of each recording's start from which its payload profile is learned (unlabelled, as
#: calibration): the ``payload`` feature set's profile, in every variant that uses it.
PROFILE_WINDOWS = 20
#: known-spoof: set_03's spoofing with the vehicle and the attack known — trained on the first
#: recording of each spoofed signal, tested on the second.
KNOWN_SPOOF_TEST = ("rpm-accessory-2", "speed-accessory-2")
#: known-targeted: the one targeted-fuzzing recording in this many contiguous blocks, alternately
#: training and test
BLOCKS = 10


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


@dataclass
class Recording:
    name: str
    vehicle: str
    attack: int  # 0 = attack-free recording
    graphs: dict[str, WindowGraphs]  # by feature set
    times: tuple[np.ndarray, np.ndarray, np.ndarray]  # per window: first, last, first injected message
    verdict: dict[str, np.ndarray]  # per variant, per window: its verdict time (kdgat.data.verdict)


def attack_of(name: str) -> int:
    """The bench's attack type of a recording with injected messages (``ATTACKS``)."""
    low = name.lower()
    if "targeted" in low:
        return 3
    if "rpm" in low or "speed" in low:
        return 4
    if "dos" in low:
        return 1
    if "fuzz" in low:
        return 2
    raise ValueError(f"{name}: attack type unknown")


def vehicle_of(name: str) -> str:
    low = name.lower()
    for v in ("kia", "sonata"):
        if v in low:
            return v
    if low.startswith("set_01"):
        return "set01"
    if low.startswith("set_03"):
        return "set03"
    raise ValueError(f"{name}: vehicle unknown")


def load_recordings(data: Path, history: int) -> list[Recording]:
    seen: set[str] = set()
    out = []
    for path in sorted(data.glob("*.parquet")):
        msgs, _ = read_can_file(path)
        content = msgs.content_digest()
        if content in seen:
            log(f"skip {path.name}: same rows as an earlier recording ({content[:8]})")
            continue
        seen.add(content)
        g = build_window_graphs(msgs.can_id, msgs.payload, msgs.label, 100, 100)
        vi = vehicle_independent_features(
            g,
            timestamp=msgs.timestamp,
            can_id=msgs.can_id,
            dlc=msgs.dlc,
            payload=msgs.payload,
            window_size=100,
            history=history,
        )
        attack = attack_of(path.name) if msgs.label.any() else 0
        head = profile_head(PROFILE_WINDOWS, 100, 100, len(msgs))
        profile = payload_profile(msgs.can_id[:head], msgs.payload[:head], msgs.timestamp[:head])
        pf = payload_features(
            vi, profile, can_id=msgs.can_id, payload=msgs.payload, timestamp=msgs.timestamp, window_size=100
        )
        # each variant's verdict times: the last message its features (and its calibration) read
        verdict = {
            name: verdict_times(
                msgs.timestamp,
                verdict_messages(
                    can_id=msgs.can_id,
                    timestamp=msgs.timestamp,
                    window_start=g.window_start,
                    window_size=100,
                    features=features,
                    calibration_windows=calib,
                    profile=profile,
                    profile_messages=head,
                ),
            )
            for name, (features, calib) in VARIANTS.items()
        }
        out.append(
            Recording(
                path.stem,
                vehicle_of(path.stem),
                attack,
                {"paper": g, "vehicle_independent": vi, "payload": pf},
                window_times(msgs.timestamp, msgs.label, g.window_start, 100),
                verdict,
            )
        )
        log(
            f"{path.stem}: {len(msgs)} messages, {g.num_graphs} windows "
            f"({int(g.y.sum())} attack), vehicle {out[-1].vehicle}"
        )
    return out


@dataclass
class Scenario:
    """Training and test recordings, and how their windows are split: ``random`` (70/10/20 of
    every window), ``files`` (every window of the test recordings is test, the training
    recordings' windows 90/10 train / validation), ``blocks`` (as ``files``, but a recording that
    is in both lists is cut into BLOCKS contiguous blocks of windows, the even ones for training
    and the odd ones for test: its one attack period, which is not in its later half, lands on
    both sides)."""

    train: list[int]
    test: list[int]
    split: str = "files"


def scenarios(recs: list[Recording]) -> dict[str, Scenario]:
    idx = range(len(recs))
    out = {"known": Scenario(list(idx), list(idx), "random")}
    for v in VEHICLES:
        out[f"lovo-{v}"] = Scenario(
            [i for i in idx if recs[i].vehicle != v], [i for i in idx if recs[i].vehicle == v]
        )
    for a, name in ATTACKS.items():
        out[f"loao-{name}"] = Scenario(
            [i for i in idx if recs[i].attack != a], [i for i in idx if recs[i].attack == a]
        )
    spoof_test = [i for i in idx if recs[i].name.endswith(KNOWN_SPOOF_TEST)]
    out["known-spoof"] = Scenario([i for i in idx if i not in spoof_test], spoof_test)
    out["known-targeted"] = Scenario(list(idx), [i for i in idx if recs[i].attack == 3], "blocks")
    return out


def make_store(
    recs: list[Recording], files: list[int], features: str, calib: int, train_mask_fn: Any, vocab: CanIdVocab
) -> tuple[dict[str, torch.Tensor], np.ndarray]:
    """Collated graphs of ``files`` normalised as the pipeline does; returns store and file index."""
    parts = [recs[f].graphs[features] for f in files]
    g = WindowGraphs.concat(parts)
    file_index = np.repeat(np.arange(len(files)), [p.num_graphs for p in parts])
    x = g.x.astype(np.float64).copy()
    if features == "paper":
        x[:, 0] = vocab.index(g.node_can_id)
    npg, epg = np.diff(g.node_ptr), np.diff(g.edge_ptr)
    if calib:
        first = np.concatenate([[0], np.cumsum([p.num_graphs for p in parts])[:-1]])
        rank = np.arange(g.num_graphs) - first[file_index]
        x[:, 1:] = calibrate_rows(x[:, 1:], np.repeat(file_index, npg), np.repeat(rank, npg), calib)
        e = calibrate_rows(g.edge_attr, np.repeat(file_index, epg), np.repeat(rank, epg), calib)
    else:
        benign_train = train_mask_fn(g.y)
        nm, ns = moments(x[np.repeat(benign_train, npg), 1:])
        em, es = moments(g.edge_attr[np.repeat(benign_train, epg)])
        x[:, 1:] = (x[:, 1:] - nm) / ns
        e = (g.edge_attr - em) / es
    if features == "payload":
        # the payload columns already measure against each ID's own profile (bounded units); the
        # first windows' spread of these mostly-zero columns is ~0 and would blow them up
        x[:, len(VI_NODE_FEATURES) :] = g.x[:, len(VI_NODE_FEATURES) :]
    store = {
        "x": torch.from_numpy(x.astype(np.float32)),
        "edge_index": torch.from_numpy(g.edge_index),
        "edge_attr": torch.from_numpy(np.asarray(e, np.float32)),
        "node_ptr": torch.from_numpy(g.node_ptr),
        "edge_ptr": torch.from_numpy(g.edge_ptr),
        "y": torch.from_numpy(g.y),
        "attack_type": torch.from_numpy(g.y * np.array([recs[f].attack for f in files])[file_index]),
    }
    return store, file_index


def train_vgae(net: GraphAutoencoderNeighborhood, data: GraphSet, epochs: int, bs: int) -> None:
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    for _ in range(epochs):
        net.train()
        for b in DataLoader(data, batch_size=bs, shuffle=True):  # type: ignore[arg-type]
            opt.zero_grad()
            net.loss(b.x, b.edge_index, b.edge_attr, b.batch).backward()
            opt.step()


def train_gat(net: GATWithJK, data: GraphSet, order: torch.Tensor, epochs: int, bs: int) -> None:
    y = data.y
    counts = torch.bincount(y.long(), minlength=2).float().clamp(min=1)
    weight = counts.sum() / (2 * counts)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    for epoch in range(epochs):
        share = min(1.0, 0.5 + 0.5 * epoch / max(1, epochs - 1))
        part = data.subset(order[: max(1, math.ceil(share * len(order)))])
        net.train()
        for b in DataLoader(part, batch_size=bs, shuffle=True):  # type: ignore[arg-type]
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(
                net(b.x, b.edge_index, b.edge_attr, b.batch), b.y.view(-1), weight=weight
            )
            loss.backward()
            opt.step()


def metrics(pred: torch.Tensor, y: torch.Tensor) -> dict[str, float]:
    tp, fp, fn, tn = binary_counts(pred, y)
    return {
        "f1": float(f1_from_counts(tp, fp, fn)),
        "accuracy": (tp + tn) / max(1, len(y)),
        "precision": tp / max(1, tp + fp),
        "recall": tp / max(1, tp + fn),
        "specificity": tn / max(1, tn + fp),
        "n": len(y),
        "attack": int(y.sum()),
    }


def run_one(
    recs: list[Recording], sc: Scenario, variant: str, args: argparse.Namespace, scores: Path | None = None
) -> dict[str, Any]:
    """Trains and scores one scenario x variant; ``scores``: where to save every validation and test
    window's model outputs (``--scores``)."""
    features, calib = VARIANTS[variant]
    train_f, test_f = sc.train, sc.test
    rng = np.random.default_rng(args.seed)
    files = sorted(set(train_f) | set(test_f))
    counts = [recs[f].graphs["paper"].num_graphs for f in files]
    file_of = np.repeat(np.array(files), counts)
    rank = np.arange(len(file_of)) - np.repeat(np.cumsum([0, *counts[:-1]]), counts)  # window in its file
    n = len(file_of)
    split = np.zeros(n, np.uint8)  # 0 train, 1 val, 2 test
    if sc.split == "random":
        perm = rng.permutation(n)
        split[perm[: round(0.2 * n)]] = 2
        split[perm[round(0.2 * n) : round(0.3 * n)]] = 1
    else:
        split[np.isin(file_of, test_f)] = 2
        if sc.split == "blocks":
            both = np.isin(file_of, sorted(set(train_f) & set(test_f)))
            block = rank * BLOCKS // np.repeat(np.array(counts), counts)
            split[both & (block % 2 == 0)] = 0
        tr = rng.permutation(np.flatnonzero(split == 0))
        split[tr[: round(0.1 * len(tr))]] = 1
    # The vocabulary as the pipeline builds it: the IDs of the benign training windows' nodes (every
    # feature set has the same windows and nodes), so no test label decides it or its size.
    paper = [recs[f].graphs["paper"] for f in files]
    benign_train = (split == 0) & (np.concatenate([g.y for g in paper]) == 0)
    nodes = np.repeat(benign_train, np.concatenate([np.diff(g.node_ptr) for g in paper]))
    vocab = CanIdVocab.build([np.concatenate([g.node_can_id for g in paper])[nodes]])
    store, _ = make_store(recs, files, features, calib, lambda y: (split == 0) & (y == 0), vocab)

    y_all = store["y"].view(-1).numpy()

    def subset(code: int, limit: int | None = None) -> GraphSet:
        idx = np.flatnonzero(split == code)
        if limit and len(idx) > limit:
            if args.train_sample == "attacks":
                # every training attack window (up to half the limit), benign ones drawn for the rest:
                # a uniform draw keeps ~limit/len of a rare attack's few hundred windows
                att, ben = idx[y_all[idx] == 1], idx[y_all[idx] == 0]
                att = rng.choice(att, min(len(att), limit // 2), replace=False)
                ben = rng.choice(ben, min(len(ben), limit - len(att)), replace=False)
                idx = np.sort(np.concatenate([att, ben]))
            else:
                idx = np.sort(rng.choice(idx, limit, replace=False))
        return GraphSet(store, torch.from_numpy(idx))

    train, val, test = subset(0, args.max_train), subset(1), subset(2)
    cfg = build_config(args.scale)
    torch.manual_seed(args.seed)
    t0 = time.perf_counter()
    nf = int(store["x"].shape[1])
    vgae = GraphAutoencoderNeighborhood(cfg.vgae, vocab_size=vocab.size, node_features=nf)
    benign = train.subset(torch.nonzero(train.y == 0).view(-1))
    train_vgae(vgae, benign, args.vgae_epochs, args.batch_size)
    vgae.eval()
    s = anomaly_scores(vgae, train)
    z = (s - s.median()) / (s.std() + 1e-6)
    order = torch.argsort(torch.where(train.y == 1, -z, z))
    gat = GATWithJK(cfg.gat, vocab_size=vocab.size, node_features=nf)
    train_gat(gat, train, order, args.gat_epochs, args.batch_size)
    fit_s = time.perf_counter() - t0
    # the VGAE's window score per pool, on the validation and test windows: "mean" is the pipeline's
    # score (--vgae-pool max swaps the two for every mode but novelty_mean_or_max, which reads both)
    pooled = {
        pool: (anomaly_scores(vgae, val, pool), anomaly_scores(vgae, test, pool)) for pool in ("mean", "max")
    }
    pv, pt = gat_probabilities(gat, val), gat_probabilities(gat, test)

    out: dict[str, Any] = {
        "train_windows": len(train),
        "val_windows": len(val),
        "fit_seconds": round(fit_s, 1),
    }
    at, av = np.flatnonzero(split == 2), np.flatnonzero(split == 1)
    t_first, t_last, t_attack = (np.concatenate([recs[f].times[k] for f in files])[at] for k in range(3))
    verdict = np.concatenate([recs[f].verdict[variant] for f in files])
    v_first, v_last = (np.concatenate([recs[f].times[k] for f in files])[av] for k in range(2))
    timing = (timing_scores(val), timing_scores(test)) if features == "payload" else None
    outputs: dict[str, np.ndarray] = {
        f"{part}_{k}": v.numpy()
        for part, i in (("val", 0), ("test", 1))
        for k, v in {
            "y": (val, test)[i].y.view(-1),
            "gat": (pv, pt)[i],
            "vgae_mean": pooled["mean"][i],
            "vgae_max": pooled["max"][i],
            **({"timing": timing[i]} if timing else {}),
        }.items()
    }
    outputs |= {
        "test_recording": file_of[at],
        "test_window": rank[at],
        "test_t_first": t_first,
        "test_t_last": t_last,
        "test_t_attack": t_attack,
        "test_t_verdict": verdict[at],
        # the validation windows' recordings and times: the per-recording checks of the scoring
        # rules on the training recordings (timing_rule_validation, valselect.py)
        "val_recording": file_of[av],
        "val_window": rank[av],
        "val_t_first": v_first,
        "val_t_last": v_last,
        "recording_names": np.array([r.name for r in recs]),
    }
    if scores is not None:
        # every window's model outputs: scoring rules are compared on them without training again
        # (rescore.py)
        scores.parent.mkdir(parents=True, exist_ok=True)
        np.savez_compressed(scores, **outputs)  # type: ignore[arg-type]  # numpy stubs: allow_pickle
    out |= score_modes(outputs, vgae_pool=args.vgae_pool, merge_gap_s=args.merge_gap_s, warmup=args.warmup)
    return out


def score_modes(
    o: dict[str, np.ndarray], *, vgae_pool: str, merge_gap_s: float, warmup: int
) -> dict[str, dict[str, Any]]:
    """Every scoring mode of ``kdgat.scoring`` fitted on the validation windows' outputs and applied
    to the test windows' (``o``: the arrays run_one saves with ``--scores``): window metrics, event
    figures, the fitted scorer and which part decided. ``warmup``: each test recording's first
    windows get no verdict (every mode but gat; ``kdgat.scoring.fusion``)."""
    t = {k: torch.from_numpy(np.asarray(v)) for k, v in o.items() if k.startswith(("val_", "test_"))}
    y_val, y_test = t["val_y"].long(), t["test_y"].long()
    rank = t["test_window"].long()
    pooled = {p: (t[f"val_vgae_{p}"], t[f"test_vgae_{p}"]) for p in ("mean", "max")}
    timing = (t["val_timing"], t["test_timing"]) if "val_timing" in t else None

    def vgae_inputs(mode: str) -> tuple[torch.Tensor, torch.Tensor]:
        # "mean" is the pipeline's score (--vgae-pool max swaps the two for every mode but the
        # ones that read both)
        pools = vgae_pools(mode) if len(vgae_pools(mode)) > 1 else (vgae_pool,)
        if len(pools) == 1:
            return pooled[pools[0]]
        return torch.stack([pooled[p][0] for p in pools], 1), torch.stack([pooled[p][1] for p in pools], 1)

    # the delays end at each window's verdict time (kdgat.data.verdict); outputs saved before the
    # bench kept verdict times have none, and then no delay is reported
    honest = "test_t_verdict" in o
    names = recording_names(o)
    out: dict[str, dict[str, Any]] = {}
    for mode in SCORING_MODES:
        if needs_timing(mode) and timing is None:
            continue  # the timing rule reads the payload features' period column
        sv, st = vgae_inputs(mode)
        scorer = fit_scorer(mode, y_val, gat_prob=t["val_gat"], vgae_score=sv, warmup_windows=warmup)
        tt = timing[1] if needs_timing(mode) and timing else None
        pred = scorer.predict(t["test_gat"], st, tt, rank)
        windows: dict[str, Any] = {
            "recording": o["test_recording"],
            "window": o["test_window"],
            "y": y_test.numpy(),
            "pred": pred.numpy(),
            "t_first": o["test_t_first"],
            "t_last": o["test_t_last"],
            "t_attack": o["test_t_attack"],
            "t_verdict": o["test_t_verdict"] if honest else o["test_t_last"],
        }
        events = [
            event_figures(**windows, merge_gap_s=merge_gap_s).to_json(),
            event_figures(**windows).to_json(),
        ]
        if not honest:
            for ev in events:
                ev["median_delay_s"] = ev["p90_delay_s"] = None
        by_recording = false_alarms_by_recording(
            **{k: windows[k] for k in ("recording", "y", "pred", "t_first", "t_last")}
        )
        out[mode] = {
            **metrics(pred, y_test),
            # episodes: attack windows <= merge-gap-s apart are one attack; events_runs: every run
            # of adjacent attack windows is one
            "events": events[0],
            "events_runs": events[1],
            "false_alarms_by_recording": {names[r]: f for r, f in by_recording.items()},
            # what a delay ends at: the verdict time (results files before it: the window's end)
            "delay_end": "verdict" if honest else None,
            "scorer": scorer.to_json(),
        }
        if mode in ("fusion_max", "fusion_novelty", "novelty_mean_or_max", "novelty_timing"):
            out[mode]["decided_by"] = decided_by(scorer, t["test_gat"], st, y_test, tt, rank)
        if tt is not None and timing:
            out[mode]["timing_val_benign_flagged"] = scorer.timed_benign_share(timing[0], y_val)
            out[mode]["timing_rule_test"] = timing_rule_test(
                scorer, windows, t["test_gat"], st, tt, rank, names
            )
            if "val_recording" in o:
                out[mode]["timing_rule_validation"] = timing_rule_validation(o, names)
    return out


def recording_names(o: dict[str, np.ndarray]) -> dict[int, str]:
    """Recording index -> name (the index itself in outputs saved before the names were)."""
    if "recording_names" in o:
        return dict(enumerate(str(n) for n in o["recording_names"]))
    ids = np.unique(np.concatenate([o["test_recording"], o.get("val_recording", np.zeros(0, np.int64))]))
    return {int(i): str(int(i)) for i in ids}


def timing_rule_test(
    scorer: Scorer,
    windows: dict[str, Any],
    gat_prob: torch.Tensor,
    vgae_score: torch.Tensor,
    timing: torch.Tensor,
    rank: torch.Tensor,
    names: dict[int, str],
) -> dict[str, dict[str, Any]]:
    """The timing rule against the models on each test recording (``kdgat.scoring.rules``: on its
    benign windows after its first PROFILE_WINDOWS, the traffic its payload profile was learned from)."""
    by = rule_by_recording(
        scorer,
        **{k: windows[k] for k in ("recording", "window", "y", "t_first", "t_last")},
        gat_prob=gat_prob,
        vgae_score=vgae_score,
        timing=timing,
        rank=rank,
        after=PROFILE_WINDOWS,
    )
    return {names[r]: f for r, f in by.items()}


def timing_rule_validation(o: dict[str, np.ndarray], names: dict[int, str]) -> dict[str, dict[str, Any]]:
    """The timing rule against the models on each training recording's validation windows, the
    models' bars fitted on the other training recordings' (``kdgat.scoring.rules.rule_validation``).
    Reads no test window."""
    t = {k: torch.from_numpy(np.asarray(v)) for k, v in o.items() if k.startswith("val_")}
    by = rule_validation(
        recording=o["val_recording"],
        window=o["val_window"],
        y=t["val_y"],
        t_first=o["val_t_first"],
        t_last=o["val_t_last"],
        gat_prob=t["val_gat"],
        vgae_score=torch.stack([t[f"val_vgae_{p}"] for p in vgae_pools("novelty_timing")], 1),
        timing=t["val_timing"],
        after=PROFILE_WINDOWS,
    )
    return {names[r]: f for r, f in by.items()}


def decided_by(
    scorer: Scorer,
    gat_prob: torch.Tensor,
    vgae_score: torch.Tensor,
    y: torch.Tensor,
    timing: torch.Tensor | None = None,
    rank: torch.Tensor | None = None,
) -> dict[str, int]:
    """Which part of ``fusion_max`` / ``fusion_novelty`` flagged the test windows: the GAT alone,
    the VGAE alone, both (and of each, how many were attack windows); ``novelty_timing`` also: the
    windows that only the timing rule flagged."""
    judged = ~scorer.in_warmup(rank, len(y))  # the warm-up's windows: no part flags them
    g = scorer.by_gat(gat_prob) & judged
    if scorer.mode in ("fusion_novelty", "novelty_mean_or_max", "novelty_timing"):
        v = scorer.novel(vgae_score) & judged
    else:
        vgae = Scorer("vgae", scorer.vgae_threshold, scorer.vgae_centre, scorer.vgae_scale)
        v = (vgae.predict(None, vgae_score) == 1) & judged
    a = y == 1
    timed: dict[str, int] = {}
    if timing is not None:
        t = scorer.timed(timing) & judged & ~g & ~v
        timed = {"timing_only": int(t.sum()), "timing_only_attack": int((t & a).sum())}
    return {
        **timed,
        "gat_only": int((g & ~v).sum()),
        "gat_only_attack": int((g & ~v & a).sum()),
        "vgae_only": int((v & ~g).sum()),
        "vgae_only_attack": int((v & ~g & a).sum()),
        "both": int((g & v).sum()),
        "both_attack": int((g & v & a).sum()),
    }


TABLE_HEAD = (
    "| scenario | variant | scoring | F1 | precision | recall | specificity | episodes detected "
    "| median delay to the verdict (s) | false alarms / h |\n|---|---|---|---:|---:|---:|---:|---:|---:|---:|"
)


def table_row(scenario: str, variant: str, mode: str, r: dict[str, Any]) -> str:
    """One row of the bench table: window F1, precision, recall, specificity, then the event figures
    (``kdgat.scoring.events``: detected / episodes, median delay to the first flagged window's
    verdict time, flagged benign windows per hour; a delay of a results file from before the
    verdict times: ``-``)."""
    spec = f"{r['specificity']:.4f}" if "specificity" in r else ""
    head = (
        f"| {scenario} | {variant} | {mode} | {r['f1']:.4f} | {r['precision']:.4f} | {r['recall']:.4f} "
        f"| {spec} "
    )
    ev = r.get("events")
    if ev is None:  # a results file from before the event figures
        return head + "| | | |"
    delay = "-" if ev["median_delay_s"] is None else f"{ev['median_delay_s']:.3f}"
    if r.get("delay_end") != "verdict" and ev["median_delay_s"] is not None:
        delay += " (to the window's end)"  # a results file from before the verdict times
    fa = "-" if ev["false_alarms_per_hour"] is None else f"{ev['false_alarms_per_hour']:.0f}"
    return head + f"| {ev['detected']}/{ev['episodes']} | {delay} | {fa} |"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--scale", default="large", choices=["small", "large"])
    ap.add_argument("--vgae-epochs", type=int, default=4)
    ap.add_argument("--gat-epochs", type=int, default=6)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--max-train", type=int, default=None, help="at most this many training windows")
    ap.add_argument(
        "--train-sample",
        choices=["uniform", "attacks"],
        default="uniform",
        help="how --max-train draws: uniformly, or every training attack window (up to half) first",
    )
    ap.add_argument("--variants", default="paper,vi,vi+calib")
    ap.add_argument("--scenarios", default="all")
    ap.add_argument("--history", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--vgae-pool",
        default="mean",
        choices=["mean", "max"],
        help="the VGAE's window score: mean (the pipeline's) or max of its node losses",
    )
    ap.add_argument(
        "--merge-gap-s",
        type=float,
        default=2.0,
        help="attack windows of a recording at most this many seconds apart are one episode",
    )
    ap.add_argument(
        "--warmup",
        type=int,
        default=0,
        help="each test recording's first N windows get no verdict, in every scoring mode but gat "
        "(the pipeline's evaluation.warmup_windows)",
    )
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="scale small, 2+3 epochs, 2000 training windows")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument(
        "--scores",
        type=Path,
        default=None,
        help="save each run's per-window model outputs (validation, test) as DIR/<scenario>__<variant>.npz",
    )
    args = ap.parse_args()
    if args.quick:
        args.scale, args.vgae_epochs, args.gat_epochs, args.max_train = "small", 2, 3, 2000
    torch.set_num_threads(args.threads)
    if not args.data.is_dir():
        print(f"no recordings at {args.data}: pass --data DIR (../shared/data/can-real)", file=sys.stderr)
        return 2
    started = time.perf_counter()
    recs = load_recordings(args.data, args.history)
    scen = scenarios(recs)
    names = list(scen) if args.scenarios == "all" else args.scenarios.split(",")
    variants = args.variants.split(",")
    for v in variants:
        if v not in VARIANTS:
            print(f"--variants: {v!r} is unknown; expected some of {', '.join(VARIANTS)}", file=sys.stderr)
            return 2
    results: dict[str, dict[str, Any]] = {}
    for sname in names:
        sc = scen[sname]
        results[sname] = {}
        for v in variants:
            on = "all (random windows)" if sc.split == "random" else ", ".join(recs[i].name for i in sc.train)
            log(f"{sname} / {v}: training on {on}; testing on {', '.join(recs[i].name for i in sc.test)}")
            scores = args.scores / f"{sname}__{v}.npz" if args.scores else None
            r = run_one(recs, sc, v, args, scores)
            results[sname][v] = r
            log(
                "  "
                + "  ".join(f"{m} F1 {r[m]['f1']:.4f}" for m in SCORING_MODES if m in r)
                + f"  ({r['fit_seconds']}s)"
            )
            doc = document(args, results, started)
            if args.json:  # after every run: a bench cut short keeps what it measured
                args.json.write_text(json.dumps(doc, indent=1) + "\n")
    print()
    print(TABLE_HEAD)
    for sname in names:
        for v in variants:
            for m in SCORING_MODES:
                if m in results[sname][v]:  # novelty_timing only with the payload features
                    print(table_row(sname, v, m, results[sname][v][m]))
    print(json.dumps(document(args, results, started)))
    return 0


def document(args: argparse.Namespace, results: dict[str, dict[str, Any]], started: float) -> dict[str, Any]:
    """The results file: arguments, machine, seconds so far and every finished run."""
    return {
        "bench": "real-data",
        "args": {k: (str(a) if isinstance(a, Path) else a) for k, a in vars(args).items()},
        "machine": {
            "cpus": torch.get_num_threads(),
            "python": platform.python_version(),
            "torch": torch.__version__,
        },
        "seconds": round(time.perf_counter() - started, 1),
        "results": results,
    }


if __name__ == "__main__":
    raise SystemExit(main())
