"""Graph cache: build, reuse, rebuild on change, KD_GAT_CACHE_ROOT, loading with mmap."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from torch_geometric.loader import DataLoader

from kdgat.data import (
    ATTACK_TYPES,
    DataError,
    GraphParams,
    load_graphs,
    preprocess_dataset,
    write_synthetic_dataset,
)

FIXTURES = Path(__file__).parent.parent / "fixtures"
#: The paper's features without calibration: the cache behaviour tested here is the same for every
#: feature set, and these build quickest (the defaults' payload features: test_features_payload.py).
PAPER = GraphParams(features="paper", calibration_windows=0)


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_synthetic_dataset(tmp_path_factory.mktemp("raw") / "syn", n_messages=40_000, seed=3)


@pytest.fixture
def raw(synthetic: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "raw" / "syn"
    shutil.copytree(synthetic, copy)
    return copy


def test_build_then_reuse_then_rebuild_on_parameter_or_file_change(raw: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first = preprocess_dataset("syn", PAPER, workers=1, raw=raw, cache=cache)
    assert not first.hit
    assert first.messages == 40_000
    assert sum(first.graphs.values()) == 400  # 4 x (7500 train + 2500 test) messages, W=100
    assert preprocess_dataset("syn", PAPER, workers=1, raw=raw, cache=cache).hit

    other = replace(PAPER, window_size=50, stride=50)
    rebuilt = preprocess_dataset("syn", other, workers=1, raw=raw, cache=cache)
    assert not rebuilt.hit
    assert rebuilt.params_digest != first.params_digest
    assert preprocess_dataset("syn", other, workers=1, raw=raw, cache=cache).hit

    # a touched but unchanged file is still a hit; a changed byte is a rebuild
    target = raw / "train_dos.csv"
    os.utime(target, ns=(1, 1))
    assert preprocess_dataset("syn", other, workers=1, raw=raw, cache=cache).hit
    text = target.read_text()
    target.write_text(text.replace(",0\n", ",1\n", 1))
    changed = preprocess_dataset("syn", other, workers=1, raw=raw, cache=cache)
    assert not changed.hit
    assert changed.source_digest != rebuilt.source_digest

    # a new file is a rebuild too
    shutil.copy(raw / "test_rpm.csv", raw / "test_rpm_2.csv")
    assert not preprocess_dataset("syn", other, workers=1, raw=raw, cache=cache).hit


def test_kd_gat_cache_root_is_where_the_cache_goes_and_is_read(
    raw: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KD_GAT_DATA_ROOT", str(raw.parent))
    monkeypatch.setenv("KD_GAT_CACHE_ROOT", str(tmp_path / "node-local"))
    info = preprocess_dataset("syn", PAPER, workers=1)
    assert info.path == tmp_path / "node-local" / "syn"
    assert (tmp_path / "node-local" / "syn" / "meta.json").is_file()
    # staged elsewhere: only the copy under the new root is read, raw files not needed
    shutil.copytree(tmp_path / "node-local", tmp_path / "staged")
    monkeypatch.setenv("KD_GAT_CACHE_ROOT", str(tmp_path / "staged"))
    monkeypatch.setenv("KD_GAT_DATA_ROOT", str(tmp_path / "nowhere"))
    splits = load_graphs("syn", PAPER)
    assert splits.cache_dir == tmp_path / "staged" / "syn"


def test_loaded_graphs_have_the_documented_shapes_and_labels(raw: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    preprocess_dataset("syn", PAPER, workers=2, raw=raw, cache=cache)
    splits = load_graphs("syn", PAPER, cache=cache)
    assert splits.attack_types == ATTACK_TYPES
    meta = json.loads((cache / "meta.json").read_text())
    assert (len(splits.train), len(splits.val), len(splits.test)) == (
        meta["graphs"]["train"],
        meta["graphs"]["val"],
        meta["graphs"]["test"],
    )
    assert len(splits.val) == round(0.1 * (len(splits.train) + len(splits.val)))
    data = splits.train[0]
    assert data.x.dtype == torch.float32 and data.x.shape[1] == 11
    assert data.edge_index.dtype == torch.long and data.edge_index.shape[0] == 2
    assert data.edge_attr.shape == (data.edge_index.shape[1], 11)
    assert data.y.shape == (1,) and data.attack_type.shape == (1,)
    assert int(data.edge_index.max()) < data.num_nodes
    # column 0 is an integer vocabulary index
    col0 = torch.cat([splits.train[i].x[:, 0] for i in range(len(splits.train))])
    assert torch.equal(col0, col0.round()) and col0.min() >= 0 and col0.max() < splits.vocab_size
    # attack types follow the file names; benign windows are type 0
    for ds in (splits.train, splits.test):
        y, at = ds.y, ds.attack_type
        assert torch.all((y == 0) == (at == 0))
        assert set(at[y == 1].tolist()) == {1, 2, 3, 4}
    # DoS ID 0x000 is out of vocabulary (index 0) in DoS attack windows
    dos = splits.test.subset(torch.nonzero(splits.test.attack_type == 1).flatten())
    assert any((dos[i].x[:, 0] == 0).any() for i in range(len(dos)))
    batch = next(iter(DataLoader(splits.train, batch_size=8, shuffle=True)))
    assert batch.num_graphs == 8 and batch.y.shape == (8,)


def test_normalisation_uses_benign_training_windows_only(raw: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    preprocess_dataset("syn", PAPER, workers=1, raw=raw, cache=cache)
    splits = load_graphs("syn", PAPER, cache=cache)
    benign = splits.train.subset(torch.nonzero(splits.train.y == 0).flatten())
    x = torch.cat([benign[i].x[:, 1:] for i in range(len(benign))]).double()
    e = torch.cat([benign[i].edge_attr for i in range(len(benign))]).double()
    varying = x.std(0) > 0
    assert torch.allclose(x.mean(0), torch.zeros(10, dtype=torch.double), atol=1e-4)
    assert torch.allclose(
        x.std(0, unbiased=False)[varying],
        torch.ones(int(varying.sum()), dtype=torch.double),
        atol=1e-3,
    )
    assert torch.allclose(e.mean(0), torch.zeros(11, dtype=torch.double), atol=1e-4)
    # attack windows are not centred by it (DoS windows have many more transitions of one pair)
    attack = splits.train.subset(torch.nonzero(splits.train.y == 1).flatten())
    ea = torch.cat([attack[i].edge_attr for i in range(len(attack))]).double()
    assert not torch.allclose(ea.mean(0), torch.zeros(11, dtype=torch.double), atol=0.05)


def test_parallel_and_serial_builds_are_identical(raw: Path, tmp_path: Path) -> None:
    preprocess_dataset("syn", PAPER, workers=1, raw=raw, cache=tmp_path / "a")
    preprocess_dataset("syn", PAPER, workers=2, raw=raw, cache=tmp_path / "b")
    a = torch.load(tmp_path / "a" / "graphs.pt", weights_only=True)
    b = torch.load(tmp_path / "b" / "graphs.pt", weights_only=True)
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key


def test_cache_file_loads_with_weights_only_and_few_storages(raw: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    preprocess_dataset("syn", PAPER, workers=1, raw=raw, cache=cache)
    store = torch.load(cache / "graphs.pt", weights_only=True, mmap=True)
    assert all(isinstance(v, torch.Tensor) for v in store.values())
    assert len({v.untyped_storage().data_ptr() for v in store.values()}) <= 16


def test_loading_without_a_cache_or_with_other_parameters_names_the_fix(raw: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    with pytest.raises(
        DataError,
        match=r"no graph cache for data set syn .*python -m kdgat preprocess --dataset syn",
    ):
        load_graphs("syn", PAPER, cache=cache)
    preprocess_dataset("syn", PAPER, workers=1, raw=raw, cache=cache)
    with pytest.raises(DataError, match=r"built with parameters .*'window_size': 100.*'window_size': 50"):
        load_graphs("syn", replace(PAPER, window_size=50, stride=50), cache=cache)


def test_malformed_rows_are_reported_per_file_and_too_many_refuse_the_file(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    raw.mkdir()
    rows = [
        f"1478198376.{i:06d},{0x100 + i % 7:04x},2,0{i % 10},00,{'T' if 450 <= i < 460 else 'R'}"
        for i in range(600)
    ]
    rows[10] = "1478198376.000010,0316,8,05,R"
    rows[20] = "oops"
    (raw / "DoS_dataset.csv").write_text("\n".join(rows) + "\n")
    info = preprocess_dataset("hc", PAPER, workers=1, raw=raw, cache=tmp_path / "c")
    (report,) = info.files
    assert (report["rows"], report["parsed"], report["malformed"]) == (600, 598, 2)
    assert report["reasons"] == {
        "field count does not match DLC": 1,
        "too few fields (expected timestamp,id,dlc,...,flag)": 1,
    }
    assert "2 malformed" in info.summary()
    # no test files: windows are held out as test by test_fraction
    assert info.graphs == {"train": 4, "val": 0, "test": 1}
    assert sum(info.attack_graphs.values()) == 1

    shutil.copy(FIXTURES / "hcrl_sample.csv", raw / "broken.csv")  # 9 of 24 rows malformed
    with pytest.raises(DataError, match=r"broken\.csv: 9 of 24 rows are malformed"):
        preprocess_dataset("hc", PAPER, workers=1, raw=raw, cache=tmp_path / "c")


def test_missing_or_empty_raw_directory(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"raw data directory .*nope does not exist"):
        preprocess_dataset("x", PAPER, workers=1, raw=tmp_path / "nope", cache=tmp_path / "c")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="holds no CAN files"):
        preprocess_dataset("x", PAPER, workers=1, raw=tmp_path / "empty", cache=tmp_path / "c")


def test_graph_params_are_validated() -> None:
    with pytest.raises(ValueError, match=r"GraphParams\.window_size is 1; expected an int >= 2"):
        GraphParams(window_size=1)
    with pytest.raises(ValueError, match="val_fraction \\+ test_fraction"):
        GraphParams(val_fraction=0.5, test_fraction=0.5)
    assert GraphParams().digest() == GraphParams().digest() != GraphParams(stride=50).digest()
    assert np.isclose(GraphParams().val_fraction, 0.1)


def test_a_pickled_split_carries_the_path_not_the_tensors(raw: Path, tmp_path: Path) -> None:
    import pickle

    cache = tmp_path / "cache"
    preprocess_dataset("syn", PAPER, workers=1, raw=raw, cache=cache)
    splits = load_graphs("syn", PAPER, cache=cache)
    blob = pickle.dumps(splits.test)
    assert len(blob) < 16 * len(splits.test) + 4096  # indices only
    again = pickle.loads(blob)
    assert len(again) == len(splits.test)
    for i in (0, len(again) - 1):
        assert torch.equal(again[i].x, splits.test[i].x)
        assert torch.equal(again[i].edge_index, splits.test[i].edge_index)


def test_a_staged_cache_without_raw_files_is_used_when_it_fits_the_parameters(
    raw: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cache = tmp_path / "cache"
    built = preprocess_dataset("syn", PAPER, workers=1, raw=raw, cache=cache)
    shutil.rmtree(raw)
    again = preprocess_dataset("syn", PAPER, workers=1, raw=raw, cache=cache)
    assert again.hit and again.source_digest == built.source_digest
    assert "source files not re-checked" in caplog.text
    with pytest.raises(DataError, match=r"raw data directory .* does not exist"):
        preprocess_dataset("syn", replace(PAPER, stride=50), workers=1, raw=raw, cache=cache)
