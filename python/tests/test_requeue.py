"""The requeue module's pieces on their own (the whole handshake runs in test_stages,
test_tune_worker and the slurm-templates e2e): which signal, a handler that keeps the one before,
the acknowledgement's fields, where a restart resumes from; and the OOM back-off's halving."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
import torch

from kdgat.contract import ACK_FILE, CONTRACT, OOM_BATCH_SIZE_ENV, OOM_GAVE_UP_LINE, REQUEUE_SIGNAL_ENV
from kdgat.training import requeue
from kdgat.training.oom import OomBackoff, start_batch_size


@pytest.mark.parametrize(
    ("value", "name"), [(None, CONTRACT.requeue.default_signal), ("SIGUSR2", "USR2"), ("hup", "HUP")]
)
def test_the_signal_is_the_variables_else_the_contracts_default(
    monkeypatch: pytest.MonkeyPatch, value: str | None, name: str
) -> None:
    if value is None:
        monkeypatch.delenv(REQUEUE_SIGNAL_ENV, raising=False)
    else:
        monkeypatch.setenv(REQUEUE_SIGNAL_ENV, value)
    assert requeue.signal_name() == name


def test_an_armed_handler_runs_the_one_before_it_too_and_disarm_restores_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(REQUEUE_SIGNAL_ENV, "USR2")
    heard: list[str] = []
    outer = signal.signal(signal.SIGUSR2, lambda s, f: heard.append("outer"))
    try:
        armed = requeue.arm(lambda: heard.append("inner"))
        os.kill(os.getpid(), signal.SIGUSR2)
        assert heard == ["inner", "outer"]
        requeue.disarm(armed)
        os.kill(os.getpid(), signal.SIGUSR2)
        assert heard == ["inner", "outer", "outer"]
    finally:
        signal.signal(signal.SIGUSR2, outer)


def test_the_acknowledgement_has_the_contracts_fields(tmp_path: Path) -> None:
    path = requeue.acknowledge(tmp_path, "stage", epoch=3, global_step=40, checkpoint="c")
    assert path == tmp_path / ACK_FILE
    assert tuple(json.loads(path.read_text())) == CONTRACT.requeue.ack_fields.stage
    with pytest.raises(ValueError, match="the run contract says"):
        requeue.acknowledge(tmp_path, "tune", epoch=3)


def test_a_restart_resumes_from_the_last_checkpoint_once_there_is_one(tmp_path: Path) -> None:
    assert requeue.resume_checkpoint(tmp_path) is None
    ckpt = requeue.checkpoint_path(tmp_path)
    ckpt.parent.mkdir(parents=True)
    ckpt.write_bytes(b"")
    assert requeue.resume_checkpoint(tmp_path) == ckpt


def test_oom_backoff_halves_until_its_retries_or_batch_size_one_are_spent(tmp_path: Path) -> None:
    oom = torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB\nmore")
    backoff = OomBackoff(batch_size=8, max_retries=5)
    sizes, records = [], []
    for attempt in backoff.attempts():
        sizes.append(backoff.batch_size)
        record: dict[str, object] = {}
        records.append(record)
        kw = {"attempt": attempt, "record": record, "epoch": 1, "global_step": 7, "resume": tmp_path / "x"}
        if not backoff.after_oom(oom, **kw):  # type: ignore[arg-type]
            break
    assert sizes == [8, 4, 2, 1]  # batch size 1 has nowhere to go, retries left or not
    assert records[0] == {
        "epoch": 1,
        "global_step": 7,
        "outcome": "oom",
        "reason": "CUDA out of memory. Tried to allocate 2.00 GiB",
    }
    two = OomBackoff(batch_size=64, max_retries=1)
    assert [
        two.after_oom(oom, attempt=a, record={}, epoch=0, global_step=0, resume=tmp_path)
        for a in two.attempts()
    ] == [True, False]


def test_the_back_off_says_where_it_gave_up_and_a_resubmission_starts_below_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    oom = torch.OutOfMemoryError("CUDA out of memory")
    backoff = OomBackoff(batch_size=16, max_retries=0)
    with caplog.at_level("ERROR", logger="kdgat.training"):
        assert not backoff.after_oom(oom, attempt=0, record={}, epoch=2, global_step=9, resume=tmp_path)
    # The runner reads the batch size after the contract's line (its recovery halves it).
    assert f"{OOM_GAVE_UP_LINE} 16, epoch 2" in caplog.text
    monkeypatch.delenv(OOM_BATCH_SIZE_ENV, raising=False)
    assert start_batch_size(64) == 64
    monkeypatch.setenv(OOM_BATCH_SIZE_ENV, "8")
    assert start_batch_size(64) == 8
    assert start_batch_size(4) == 4
    monkeypatch.setenv(OOM_BATCH_SIZE_ENV, "0")
    with pytest.raises(ValueError, match=OOM_BATCH_SIZE_ENV):
        start_batch_size(64)
