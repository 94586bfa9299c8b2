"""The pipeline runs as many compute threads as its allocation has cores (kdgat.training.threads)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from kdgat.cli import main
from kdgat.training.threads import match_threads_to_allocation


@pytest.fixture(autouse=True)
def _restore_threads(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    before = torch.get_num_threads()
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("SLURM_CPUS_PER_TASK", raising=False)
    yield
    torch.set_num_threads(before)


def test_an_allocation_of_one_core_runs_one_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    torch.set_num_threads(2)
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "1")
    assert match_threads_to_allocation() == 1
    assert torch.get_num_threads() == 1


def test_omp_num_threads_is_the_users_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    torch.set_num_threads(2)
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "1")
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert match_threads_to_allocation() is None
    assert torch.get_num_threads() == 2


@pytest.mark.parametrize("value", [None, "", "0", "two"])
def test_outside_an_allocation_nothing_changes(monkeypatch: pytest.MonkeyPatch, value: str | None) -> None:
    torch.set_num_threads(2)
    if value is not None:
        monkeypatch.setenv("SLURM_CPUS_PER_TASK", value)
    assert match_threads_to_allocation() is None
    assert torch.get_num_threads() == 2


def test_a_stage_command_matches_its_threads_before_it_runs(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    caplog.set_level(logging.INFO, logger="kdgat")
    torch.set_num_threads(2)
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "1")
    monkeypatch.setenv("KD_GAT_CACHE_ROOT", str(tmp_path))
    # no graph cache for this data set: the stage fails with a user error, after the threads are set
    status = main(["autoencoder", "--model", "vgae", "--scale", "small", "--dataset", "nothing-here"])
    assert status == 2
    assert torch.get_num_threads() == 1
    assert "compute threads: 1" in caplog.text
