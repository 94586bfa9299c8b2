"""A tracker that fails is tried again, not dropped at once: the calls it missed are held and sent
to it in order at the next epoch's end; a second failure in a row drops it and the log says what
it missed. Fast: a stand-in tracker records what it took (the real MLflow server's side is in
``test_tracking_e2e.py``)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path

import pytest

from kdgat.config import build_config
from kdgat.tracking.backends import Scalars
from kdgat.tracking.session import MAX_FAILURES, StageTracking
from kdgat.tracking.settings import resolve


class Flaky:
    """Records the calls it took; refuses the next ``fail`` calls (or every call from ``down``)."""

    name = "flaky"

    def __init__(self) -> None:
        self.took: list[tuple[str, object]] = []
        self.fail = 0
        self.down = False

    def _take(self, what: str, detail: object) -> None:
        if self.down or self.fail > 0:
            self.fail = max(0, self.fail - 1)
            raise ConnectionError("server gone")
        self.took.append((what, detail))

    def log_steps(self, rows: list[tuple[int, Scalars]]) -> None:
        self._take("steps", [s for s, _ in rows])

    def log_epoch(self, epoch: int, step: int, metrics: Scalars) -> None:
        self._take("epoch", epoch)

    def log_files(self, files: Iterable[Path], base: Path) -> None:
        self._take("files", None)

    def set_tags(self, tags: dict[str, str]) -> None:
        self._take("tags", sorted(tags))

    def finish(self, status: str) -> None:
        self._take("finish", status)


def _session(tmp_path: Path) -> StageTracking:
    cfg = build_config("small", {"tracking.tensorboard": "false"})
    s = StageTracking(cfg, tmp_path, {"stage": "autoencoder"}, resolve(cfg))
    s.opened = True
    return s


def _after_a_good_epoch(tmp_path: Path) -> tuple[StageTracking, Flaky]:
    """A session whose tracker opened and took epoch 0 whole."""
    s, t = _session(tmp_path), Flaky()
    s._open_tracker("flaky", lambda: s.backends.append(t), first=True)
    _epoch(s, 0)
    assert t.took == [("steps", [0, 1]), ("epoch", 0)]
    return s, t


def _epoch(s: StageTracking, epoch: int) -> None:
    """One epoch of two logged steps, then its end."""
    for step in (2 * epoch, 2 * epoch + 1):
        s.log_step(step, {"train_loss": 1.0})
    s.log_epoch(epoch, 2 * epoch + 1, {"val_loss": 0.5})


def test_a_call_that_fails_is_sent_again_at_the_next_epoch_with_the_calls_after_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    s, t = _after_a_good_epoch(tmp_path)
    t.fail = 1  # epoch 1's steps are refused once
    with caplog.at_level(logging.WARNING, logger="kdgat.tracking"):
        _epoch(s, 1)
    assert t.took == [("steps", [0, 1]), ("epoch", 0)], "nothing is sent past a refused call"
    assert "tried again at the next epoch's end" in caplog.text
    with caplog.at_level(logging.WARNING, logger="kdgat.tracking"):
        _epoch(s, 2)
        s.close("FINISHED")
    assert t.took == [
        ("steps", [0, 1]),
        ("epoch", 0),
        ("steps", [2, 3]),
        ("epoch", 1),
        ("steps", [4, 5]),
        ("epoch", 2),
        ("files", None),
        ("finish", "FINISHED"),
    ]
    assert "training goes on without it" not in caplog.text and "not sent" not in caplog.text


def test_a_tracker_that_could_not_open_gets_every_call_it_missed_once_it_opens(tmp_path: Path) -> None:
    s, t = _session(tmp_path), Flaky()
    tries = []

    def opener() -> None:
        tries.append(1)
        if len(tries) == 1:
            raise ConnectionError("not up yet")
        s.backends.append(t)

    s._open_tracker("flaky", opener, first=True)
    assert s.backends == [] and list(s.opening) == ["flaky"]
    s.set_tags({"a": "1"})
    _epoch(s, 0)  # its end opens the tracker and sends it what it missed, then the epoch
    assert len(tries) == 2
    assert t.took == [("tags", ["a"]), ("steps", [0, 1]), ("epoch", 0)]
    s.close("KILLED")
    assert t.took[-1] == ("finish", "KILLED")


def test_a_tracker_that_keeps_failing_is_dropped_saying_what_it_missed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    s, t = _after_a_good_epoch(tmp_path)
    t.down = True
    with caplog.at_level(logging.WARNING, logger="kdgat.tracking"):
        for epoch in range(1, 1 + MAX_FAILURES + 2):
            _epoch(s, epoch)
        s.close("FINISHED")
    assert s.backends == [] and t.took == [("steps", [0, 1]), ("epoch", 0)]
    dropped = [r.getMessage() for r in caplog.records if "training goes on without it" in r.getMessage()]
    assert len(dropped) == 1, caplog.text
    assert f"{MAX_FAILURES} times in a row" in dropped[0]
    assert "ConnectionError: server gone" in dropped[0] and "call(s) not sent" in dropped[0]


def test_a_tracker_that_never_opens_is_dropped_and_training_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    s = _session(tmp_path)

    def opener() -> None:
        raise ConnectionError("refused")

    with caplog.at_level(logging.WARNING, logger="kdgat.tracking"):
        s._open_tracker("flaky", opener, first=True)
        for epoch in range(3):
            _epoch(s, epoch)
        s.close("FINISHED")
    assert s.opening == {} and s.backends == []
    assert s.identity.logged_epoch == 2
    assert sum("failed to open" in r.getMessage() for r in caplog.records) == MAX_FAILURES
