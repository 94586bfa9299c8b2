"""Cache, raw and run directories, with and without the environment variables."""

from __future__ import annotations

from pathlib import Path

import pytest

from kdgat import paths


def test_cache_dir_uses_kd_gat_cache_root_when_set(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KD_GAT_CACHE_ROOT", str(tmp_path / "staged"))
    assert paths.cache_dir("hcrl_sa") == tmp_path / "staged" / "hcrl_sa"


def test_cache_dir_defaults_to_data_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KD_GAT_CACHE_ROOT", raising=False)
    assert paths.cache_dir("set_01") == Path("data/cache/set_01")
    monkeypatch.setenv("KD_GAT_CACHE_ROOT", "")
    assert paths.cache_dir("set_01") == Path("data/cache/set_01")


def test_raw_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("KD_GAT_DATA_ROOT", raising=False)
    assert paths.raw_dir("hcrl_ch") == Path("data/raw/hcrl_ch")
    monkeypatch.setenv("KD_GAT_DATA_ROOT", str(tmp_path))
    assert paths.raw_dir("hcrl_ch") == tmp_path / "hcrl_ch"


def test_run_dir_layout_and_root_precedence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("KD_GAT_RUN_ROOT", raising=False)
    assert paths.run_dir(None, "hcrl_sa", "gat", "large", "curriculum") == Path(
        "experimentruns/hcrl_sa/gat_large_curriculum"
    )
    monkeypatch.setenv("KD_GAT_RUN_ROOT", str(tmp_path / "env"))
    assert (
        paths.run_dir(None, "d", "vgae", "small", "autoencoder") == tmp_path / "env/d/vgae_small_autoencoder"
    )
    assert (
        paths.run_dir(tmp_path / "arg", "d", "gat", "small", "evaluation")
        == tmp_path / "arg/d/gat_small_evaluation"
    )


@pytest.mark.parametrize("bad", ["../etc", "a/b", "", ".hidden"])
def test_names_that_are_not_a_single_directory_are_refused(bad: str) -> None:
    with pytest.raises(ValueError, match=f"dataset {bad!r} is not a valid name"):
        paths.cache_dir(bad)
