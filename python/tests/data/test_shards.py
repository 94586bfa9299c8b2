"""Sharded preprocessing: the assignment, the shard store and its ledger, reruns, the join (byte for
byte a one-job build) and the preprocess stage under the job array's variables."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kdgat.config import build_config
from kdgat.contract import METRICS_FILE, SHARD_COUNT_ENV, SHARD_INDEX_ENV
from kdgat.data import DataError, GraphParams, preprocess_dataset, write_synthetic_dataset
from kdgat.data.cache import sha256_of
from kdgat.data.shards import ShardReport, assign_shards, build_shard, shard_store
from kdgat.stages import preprocess
from kdgat.stages.common import graph_params
from kdgat.stages.dispatch import run_stage

#: The paper's features without calibration (the quickest build; sharding does not depend on the
#: feature set, and the stage test below runs the config's default features).
PARAMS = GraphParams(features="paper", calibration_windows=0)
BROKEN = "train_fuzzy.csv"


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # 8 files (train_/test_ per attack) of 3,750 / 1,250 messages
    return write_synthetic_dataset(tmp_path_factory.mktemp("raw") / "syn", n_messages=20_000, seed=5)


@pytest.fixture
def raw(synthetic: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "raw" / "syn"
    shutil.copytree(synthetic, copy)
    return copy


def build_all(raw: Path, cache: Path, count: int, params: GraphParams = PARAMS) -> list[ShardReport]:
    return [build_shard("syn", params, i, count, raw=raw, cache=cache) for i in range(count)]


def assert_same_cache(joined: Path, one_job: Path) -> None:
    for name in ("graphs.pt", "vocab.json"):
        assert (joined / name).read_bytes() == (one_job / name).read_bytes(), name
    assert json.loads((joined / "meta.json").read_text()) == json.loads((one_job / "meta.json").read_text())


def test_assign_shards_balances_bytes_deterministically() -> None:
    # largest first, each to the lightest shard (ties: the lower shard): 9 -> 0, 7 -> 1, 5 -> 1,
    # 3 -> 0, 2 -> 0 (12 = 12): 14 and 12 bytes
    assert assign_shards([5, 9, 2, 7, 3], 2) == [[1, 2, 4], [0, 3]]
    # equal sizes: by index, round the shards
    assert assign_shards([4, 4, 4, 4], 3) == [[0, 3], [1], [2]]
    assert assign_shards([1, 2], 4) == [[1], [0], [], []]
    assert assign_shards([], 2) == [[], []]
    sizes = [(i * 7919) % 1000 for i in range(50)]
    shards = assign_shards(sizes, 6)
    assert shards == assign_shards(sizes, 6)
    assert sorted(i for s in shards for i in s) == list(range(50))
    assert all(s == sorted(s) for s in shards)
    totals = [sum(sizes[i] for i in s) for s in shards]
    assert max(totals) - min(totals) <= max(sizes)


def test_shard_index_and_count_are_validated(raw: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"shard index is 3 with shard count 3; expected 0 <= index < 3"):
        build_shard("syn", PARAMS, 3, 3, raw=raw, cache=tmp_path / "c")
    with pytest.raises(ValueError, match=r"shard index is -1"):
        build_shard("syn", PARAMS, -1, 3, raw=raw, cache=tmp_path / "c")
    with pytest.raises(ValueError, match=r"shard count is 0; expected >= 1"):
        assign_shards([1], 0)
    assert preprocess.shard_env({}) == (None, None)
    assert preprocess.shard_env({SHARD_COUNT_ENV: "4"}) == (None, 4)
    assert preprocess.shard_env({SHARD_INDEX_ENV: "3", SHARD_COUNT_ENV: "4"}) == (3, 4)
    with pytest.raises(ValueError, match=rf"{SHARD_INDEX_ENV}='1' is set but {SHARD_COUNT_ENV} is not"):
        preprocess.shard_env({SHARD_INDEX_ENV: "1"})
    with pytest.raises(ValueError, match=rf"{SHARD_COUNT_ENV}='x' is not an integer"):
        preprocess.shard_env({SHARD_INDEX_ENV: "1", SHARD_COUNT_ENV: "x"})
    with pytest.raises(ValueError, match=rf"{SHARD_COUNT_ENV}='0': expected the number of shards"):
        preprocess.shard_env({SHARD_COUNT_ENV: "0"})
    with pytest.raises(ValueError, match=rf"{SHARD_INDEX_ENV}='4': expected 0 <= index < {SHARD_COUNT_ENV}"):
        preprocess.shard_env({SHARD_INDEX_ENV: "4", SHARD_COUNT_ENV: "4"})


def test_shards_joined_are_byte_identical_to_a_one_job_build(raw: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    with pytest.raises(DataError, match=r"lacks 8 of 8 files \(8 missing, 0 failed\)"):
        preprocess_dataset("syn", PARAMS, raw=raw, cache=cache, from_shards=True)
    reports = build_all(raw, cache, 3)
    assert sorted(r for rep in reports for r in rep.built) == sorted(
        p.relative_to(raw).as_posix() for p in raw.rglob("*.csv")
    )
    assert all(not rep.skipped and not rep.failed for rep in reports)
    assert sum(rep.messages for rep in reports) == 20_000
    assert reports[0].summary().startswith("shard 0 of 3: ")
    ledger = json.loads(next((shard_store(cache, PARAMS) / "ledger").glob("*.json")).read_text())
    assert ledger["status"] == "ok" and ledger["report"]["rows"] == ledger["messages"]
    assert {"relpath", "sha256", "graphs", "seconds", "host", "job", "time"} <= set(ledger)

    joined = preprocess_dataset("syn", PARAMS, raw=raw, cache=cache, from_shards=True)
    one_job = preprocess_dataset("syn", PARAMS, workers=1, raw=raw, cache=tmp_path / "one")
    assert not joined.hit and joined.messages == one_job.messages == 20_000
    assert_same_cache(cache, tmp_path / "one")
    # the hit check comes first: the joined cache is reused as any other
    assert preprocess_dataset("syn", PARAMS, raw=raw, cache=cache, from_shards=True).hit


def test_a_failed_file_is_named_and_a_rerun_builds_only_it(raw: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    target = raw / BROKEN
    good = target.read_bytes()
    target.write_bytes(good + b"oops\n" * 400)  # 400 of 4,150 rows malformed: > 5%
    broken_sha = sha256_of(target)

    reports, errors = [], []
    for i in range(3):
        try:
            reports.append(build_shard("syn", PARAMS, i, 3, raw=raw, cache=cache))
        except DataError as e:
            errors.append(str(e))
    assert len(reports) == 2 and len(errors) == 1
    assert f"{BROKEN}: 400 of 4150 rows are malformed" in errors[0]
    entry = json.loads((shard_store(cache, PARAMS) / "ledger" / f"{broken_sha}.json").read_text())
    assert entry["status"] == "failed" and entry["relpath"] == BROKEN
    assert "400 of 4150 rows are malformed" in entry["error"] and "report" not in entry

    with pytest.raises(DataError) as refused:
        preprocess_dataset("syn", PARAMS, raw=raw, cache=cache, from_shards=True)
    text = str(refused.value)
    assert "lacks 1 of 8 files (0 missing, 1 failed)" in text
    assert f"{BROKEN}: failed: " in text and "400 of 4150 rows are malformed" in text
    assert text.endswith("`runner resume`): tasks skip the shards that are done")
    assert not (cache / "meta.json").exists()

    target.write_bytes(good)
    again = build_all(raw, cache, 3)
    assert [r for rep in again for r in rep.built] == [BROKEN]
    assert sorted(r for rep in again for r in rep.skipped) == sorted(
        p.relative_to(raw).as_posix() for p in raw.rglob("*.csv") if p.name != BROKEN
    )
    preprocess_dataset("syn", PARAMS, raw=raw, cache=cache, from_shards=True)
    preprocess_dataset("syn", PARAMS, workers=1, raw=raw, cache=tmp_path / "one")
    assert_same_cache(cache, tmp_path / "one")


def test_the_stage_runs_a_task_or_the_join_by_the_array_variables(
    raw: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = build_config("small")  # the pipeline's default features: payload, calibrated
    monkeypatch.setenv("KD_GAT_DATA_ROOT", str(raw.parent))
    monkeypatch.setenv("KD_GAT_CACHE_ROOT", str(tmp_path / "cache"))

    def stage(run_root: Path) -> dict:
        run_stage("preprocess", cfg, dataset="syn", model="gat", scale="small", run_root=str(run_root))
        return json.loads((run_root / "syn" / "gat_small_preprocess" / METRICS_FILE).read_text())

    monkeypatch.setenv(SHARD_COUNT_ENV, "2")
    for i in range(2):
        monkeypatch.setenv(SHARD_INDEX_ENV, str(i))
        task = stage(tmp_path / f"task{i}")
        assert task["shard"] == {"index": i, "count": 2}
        assert task["shard_files"]["failed"] == 0 and task["shard_files"]["built"] == len(task["built"]) > 0
        assert f"shard {i} of 2: " in capsys.readouterr().out
    assert not (tmp_path / "cache" / "syn" / "meta.json").exists()

    monkeypatch.delenv(SHARD_INDEX_ENV)
    join = stage(tmp_path / "join")
    assert join["shards"] == 2 and join["cache_hit"] is False and join["messages"] == 20_000
    preprocess_dataset("syn", graph_params(cfg), workers=1, raw=raw, cache=tmp_path / "one")
    assert_same_cache(tmp_path / "cache" / "syn", tmp_path / "one")
