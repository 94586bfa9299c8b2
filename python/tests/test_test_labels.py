"""Nothing the pipeline fits reads a test label: flip the label of every test window in the raw files,
preprocess and evaluate again, and every fitted quantity — normalisation, per-recording calibration,
vocabulary, and the scorer of each ``evaluation.scoring`` mode (thresholds, VGAE centre and scale,
fusion weights) — is bitwise the same, while the reported test scores change."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from kdgat import paths
from kdgat.config import build_config
from kdgat.data import (
    CanMessages,
    GraphParams,
    GraphSplits,
    generate_can_traffic,
    load_graphs,
    preprocess_dataset,
    read_can_file,
    write_can_file,
)
from kdgat.data.cache import VOCAB_FILE
from kdgat.models import build_model
from kdgat.scoring import SCORING_MODES, needs_timing
from kdgat.stages.common import graph_params, save_model
from kdgat.stages.dispatch import run_stage

SCALE = "small"  # evaluation at scale small reads the distilled GAT


def _recordings(test_files: bool) -> dict[str, CanMessages]:
    """Two attack types on one bus; with ``test_files`` also ``test_*`` files (the test split is
    then those files, otherwise a random share of the training files' windows)."""
    out = {}
    for i, attack in enumerate(("dos", "fuzzy")):
        out[f"train_{attack}.parquet"] = generate_can_traffic(
            6000, seed=11 + i, bus_seed=0, attack=attack, attack_share=0.15
        )
        if test_files:
            out[f"test_{attack}.parquet"] = generate_can_traffic(
                3000, seed=21 + i, bus_seed=0, attack=attack, attack_share=0.15
            )
    return out


def _flip_test_windows(raw: Path, out: Path, dataset: str, params: GraphParams) -> None:
    """Copy of ``raw`` in which every test window's label is flipped: a benign window's messages
    all become attacks, an attack window's messages all benign."""
    assert params.stride == params.window_size  # windows do not overlap: no other window changes
    splits = load_graphs(dataset, params, mmap=False)
    store, meta = splits.test.store, splits.meta
    out.mkdir(parents=True)
    for f, entry in enumerate(meta["files"]):
        msgs, _ = read_can_file(raw / entry["path"])
        label = msgs.label.copy()
        test = ((store["split"] == 2) & (store["file_index"] == f)).numpy()
        for start, y in zip(store["window_start"].numpy()[test], store["y"].numpy()[test], strict=True):
            label[start : start + params.window_size] = 0 if y else 1
        flipped = CanMessages(msgs.timestamp, msgs.can_id, msgs.dlc, msgs.payload, label)
        write_can_file(out / entry["path"], flipped, "parquet")


def _evaluate(dataset: str, overrides: dict[str, Any], run_root: Path) -> dict[str, dict[str, Any]]:
    """The evaluation stage in every scoring mode over the same (untrained, seeded) GAT and VGAE,
    built for the data set's vocabulary: mode -> metrics.json."""
    cfg = build_config(SCALE, overrides)
    vocab_size = load_graphs(dataset, graph_params(cfg), mmap=False).vocab_size
    for model, stage in (("gat", "distillation"), ("vgae", "autoencoder")):
        torch.manual_seed(0)
        net = build_model(model, cfg, vocab_size=vocab_size)
        run_dir = paths.run_dir(str(run_root), dataset, model, SCALE, stage)
        run_dir.mkdir(parents=True)
        save_model(run_dir, net, model_name=model, scale=SCALE, cfg=cfg, vocab_size=vocab_size)
    out = {}
    for mode in _modes(overrides):
        mode_cfg = build_config(SCALE, {**overrides, "evaluation.scoring": mode})
        run_stage("evaluation", mode_cfg, dataset=dataset, model="gat", scale=SCALE, run_root=str(run_root))
        metrics = paths.run_dir(str(run_root), dataset, "gat", SCALE, "evaluation") / "metrics.json"
        out[mode] = json.loads(metrics.read_text())
    return out


def _labelled_and_flipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, overrides: dict[str, Any], test_files: bool
) -> tuple[GraphSplits, GraphSplits]:
    """Data sets ``labelled`` and ``flipped`` (its test windows' labels flipped), preprocessed."""
    monkeypatch.setenv("KD_GAT_DATA_ROOT", str(tmp_path / "raw"))
    monkeypatch.setenv("KD_GAT_CACHE_ROOT", str(tmp_path / "cache"))
    monkeypatch.setenv("KD_GAT_RUN_ROOT", str(tmp_path / "runs"))
    params = graph_params(build_config(SCALE, overrides))
    raw = paths.raw_dir("labelled")
    raw.mkdir(parents=True)
    for name, msgs in _recordings(test_files).items():
        write_can_file(raw / name, msgs, "parquet")
    preprocess_dataset("labelled", params)
    _flip_test_windows(raw, paths.raw_dir("flipped"), "labelled", params)
    preprocess_dataset("flipped", params)
    a = load_graphs("labelled", params, mmap=False)
    b = load_graphs("flipped", params, mmap=False)
    test = a.test.store["split"] == 2
    ya, yb = a.test.store["y"], b.test.store["y"]
    assert int(test.sum()) > 0 and 0 < int(ya[test].sum()) < int(test.sum())
    # the flip did what it says: every test label and no other
    assert torch.equal(yb[test], 1 - ya[test])
    assert torch.equal(yb[~test], ya[~test])
    return a, b


def _assert_same_fit(a: GraphSplits, b: GraphSplits) -> None:
    """Normalisation (benign training windows) or per-recording calibration, the normalised
    features, split and the CAN-ID vocabulary: bitwise the same."""
    sa, sb = a.test.store, b.test.store
    for key in sa:
        if key == "window_times":  # the first injected message's time is the label's; the
            # windows' first and last messages and their verdict times read no label
            assert torch.equal(sa[key][:, [0, 1, 3]], sb[key][:, [0, 1, 3]]), key
        elif key not in ("y", "attack_type"):
            assert torch.equal(sa[key], sb[key]), key
    for key in ("node_features", "edge_features", "graphs"):
        assert a.meta[key] == b.meta[key], key
    assert (a.cache_dir / VOCAB_FILE).read_bytes() == (b.cache_dir / VOCAB_FILE).read_bytes()


def _modes(overrides: dict[str, Any]) -> list[str]:
    """Every scoring mode these features allow (novelty_timing needs the payload features)."""
    payload = overrides.get("data.features") == "payload"
    return [m for m in SCORING_MODES if payload or not needs_timing(m)]


def _assert_same_scorers(ra: dict[str, Any], rb: dict[str, Any]) -> None:
    assert sorted(ra) == sorted(rb) and len(ra) >= len(SCORING_MODES) - 1
    for mode in ra:
        fa = {k: v for k, v in ra[mode]["scoring"].items() if k != "vgae_model"}
        fb = {k: v for k, v in rb[mode]["scoring"].items() if k != "vgae_model"}
        assert fa == fb, mode  # floats compared exactly: thresholds, centre, scale, alpha, weights
        if needs_timing(mode):  # the timing rule's share of flagged benign validation windows
            assert 0.0 <= fa["timing_val_benign_flagged"] <= 1.0
        assert ra[mode]["scores"] != rb[mode]["scores"], mode  # the test labels do reach the scores


# (without the payload features a mode other than the default novelty_timing is named; _evaluate
# then runs every mode these features allow)
FEATURES = {
    "paper": {"data.features": "paper", "evaluation.scoring": "gat", "data.num_workers": 0},
    "vi+calib": {
        "data.features": "vehicle_independent",
        "evaluation.scoring": "fusion_max",
        "data.calibration_windows": 20,
        "data.num_workers": 0,
    },
    "payload+calib": {
        "data.features": "payload",
        "data.calibration_windows": 20,
        "data.num_workers": 0,
    },
}


# With test files the test split is those files; without, a random share of the training files'
# windows: then the CAN-ID vocabulary, built after the split from the benign training windows
# (data/build.py; cache format 2), must not read them either.
@pytest.mark.parametrize(
    ("features", "test_files"),
    [
        ("paper", True),
        ("vi+calib", True),
        ("payload+calib", True),
        ("paper", False),
        ("vi+calib", False),
        ("payload+calib", False),
    ],
    ids=[
        "paper-test-files",
        "vi+calib-test-files",
        "payload+calib-test-files",
        "paper-random-split",
        "vi+calib-random-split",
        "payload+calib-random-split",
    ],
)
def test_flipping_the_test_labels_changes_no_fitted_quantity(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, features: str, test_files: bool
) -> None:
    a, b = _labelled_and_flipped(tmp_path, monkeypatch, FEATURES[features], test_files)
    _assert_same_fit(a, b)
    runs = tmp_path / "runs"
    _assert_same_scorers(
        _evaluate("labelled", FEATURES[features], runs), _evaluate("flipped", FEATURES[features], runs)
    )
