"""Synthetic CAN traffic: determinism, formats, attacks, and that the task is not trivial."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kdgat.data import (
    CanIdVocab,
    generate_can_traffic,
    read_can_file,
    split_of,
    write_can_file,
    write_synthetic_dataset,
)
from kdgat.data.synth import DOS_ID, GEAR_ID, RPM_ID


def test_same_seed_same_traffic_other_seed_other_traffic() -> None:
    a = generate_can_traffic(5000, seed=7, attack="fuzzy")
    b = generate_can_traffic(5000, seed=7, attack="fuzzy")
    c = generate_can_traffic(5000, seed=8, attack="fuzzy")
    assert len(a) == 5000
    assert np.array_equal(a.payload, b.payload) and np.array_equal(a.timestamp, b.timestamp)
    assert not np.array_equal(a.can_id, c.can_id)
    assert np.all(np.diff(a.timestamp) >= 0)


@pytest.mark.parametrize(("fmt", "name"), [("csv", "x.csv"), ("hcrl", "x.csv"), ("parquet", "x.parquet")])
def test_written_files_read_back_identical(tmp_path: Path, fmt: str, name: str) -> None:
    messages = generate_can_traffic(3000, seed=1, attack="rpm")
    path = write_can_file(tmp_path / name, messages, fmt)
    back, report = read_can_file(path)
    assert report.format == {"csv": "ctt", "hcrl": "hcrl", "parquet": "parquet"}[fmt]
    assert report.malformed == 0 and report.parsed == 3000
    assert np.array_equal(back.can_id, messages.can_id)
    assert np.array_equal(back.dlc, messages.dlc)
    assert np.array_equal(back.payload, messages.payload)
    assert np.array_equal(back.label, messages.label)
    assert np.allclose(back.timestamp, messages.timestamp, atol=1e-6, rtol=0)


def _bursts(times: np.ndarray) -> list[np.ndarray]:
    return np.split(times, np.flatnonzero(np.diff(times) > 0.02) + 1)


@pytest.mark.parametrize(
    ("attack", "interval"), [("dos", 0.0003), ("fuzzy", 0.0005), ("gear", 0.001), ("rpm", 0.001)]
)
def test_attacks_are_injected_in_labelled_bursts_at_their_rate(attack: str, interval: float) -> None:
    m = generate_can_traffic(60_000, seed=2, attack=attack)
    injected = m.label == 1
    assert 0.005 < injected.mean() < 0.5
    ids = m.can_id[injected]
    if attack == "dos":
        assert np.all(ids == DOS_ID) and not m.payload[injected].any()
    elif attack == "fuzzy":
        assert len(np.unique(ids)) > 100
    else:
        assert np.all(ids == (RPM_ID if attack == "rpm" else GEAR_ID))
        assert len(np.unique(m.payload[injected], axis=0)) > 1  # one replayed frame per burst
    bursts = _bursts(m.timestamp[injected])
    long_ones = [b for b in bursts if len(b) >= 20]
    assert long_ones and np.median(np.concatenate([np.diff(b) for b in long_ones])) == pytest.approx(
        interval, rel=0.1
    )
    assert min(len(b) for b in bursts) <= 5  # short bursts exist: the hard cases


def test_dataset_layout_follows_the_split_convention(tmp_path: Path) -> None:
    out = write_synthetic_dataset(
        tmp_path / "d", n_messages=8000, seed=0, attacks=("dos", "gear"), fmt="hcrl"
    )
    names = sorted(p.name for p in out.iterdir())
    assert names == ["test_dos.csv", "test_gear.csv", "train_dos.csv", "train_gear.csv"]
    assert [split_of(n) for n in names] == ["test", "test", "train", "train"]
    with pytest.raises(ValueError, match="attack 'spoof' is unknown"):
        write_synthetic_dataset(tmp_path / "e", n_messages=100, seed=0, attacks=("spoof",))


def _window_counts(files: list[Path], vocab: CanIdVocab | None, w: int = 100):
    ids, ys = [], []
    for f in files:
        m, _ = read_can_file(f)
        g = len(m) // w
        ids.append(m.can_id[: g * w].reshape(g, w))
        ys.append(m.label[: g * w].reshape(g, w).any(axis=1))
    allids, y = np.concatenate(ids), np.concatenate(ys).astype(float)
    if vocab is None:
        vocab = CanIdVocab.build([allids[y == 0].ravel()])
    index = vocab.index(allids.ravel()).reshape(allids.shape)
    counts = np.zeros((len(y), vocab.size))
    np.add.at(counts, (np.repeat(np.arange(len(y)), w), index.ravel()), 1.0)
    return counts, y, vocab


def _f1(y: np.ndarray, p: np.ndarray) -> float:
    tp = float(((p == 1) & (y == 1)).sum())
    return 2 * tp / max(2 * tp + float(((p == 1) & (y == 0)).sum()) + float(((p == 0) & (y == 1)).sum()), 1.0)


@pytest.mark.parametrize("seed", [0, 1])
def test_the_task_is_learnable_but_simple_baselines_are_clearly_below_perfect(
    tmp_path: Path, seed: int
) -> None:
    """Majority class, and a logistic regression on per-ID message counts per window (each ID one
    count; unknown IDs share one count), trained on the train files, scored on the test files."""
    out = write_synthetic_dataset(tmp_path / "d", n_messages=400_000, seed=seed)
    files = sorted(out.iterdir())
    xtr, ytr, vocab = _window_counts([f for f in files if split_of(f.name) == "train"], None)
    xte, yte, _ = _window_counts([f for f in files if split_of(f.name) == "test"], vocab)
    mu, sd = xtr.mean(0), xtr.std(0) + 1e-9
    xtr, xte = (xtr - mu) / sd, (xte - mu) / sd
    w, b = np.zeros(xtr.shape[1]), 0.0
    for _ in range(2000):
        p = 1 / (1 + np.exp(-(xtr @ w + b)))
        w -= 0.5 * (xtr.T @ (p - ytr) / len(ytr) + 1e-4 * w)
        b -= 0.5 * float((p - ytr).mean())
    pred = (xte @ w + b > 0).astype(float)

    majority_acc = max(yte.mean(), 1 - yte.mean())
    lr_acc, lr_f1 = float((pred == yte).mean()), _f1(yte, pred)
    assert 0.1 < yte.mean() < 0.4  # both classes well represented
    assert majority_acc < 0.9
    assert _f1(yte, np.ones_like(yte)) < 0.5  # "everything is an attack"
    assert lr_f1 > 0.75  # learnable from counts alone ...
    assert lr_f1 < 0.96 and lr_acc < 0.985  # ... but short spoofing bursts are missed
