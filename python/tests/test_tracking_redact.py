"""Credentials in tracking URIs never reach a log line or a file: the MLflow URI kept in
``checkpoints/tracking.json`` (and a sweep's ``tracking-parent.json``), the config logged as params
and kept in the model file, and a tracker's failure message are redacted; a requeued life still
continues its MLflow run, with the real URI from the config. Fast: a stand-in for MLflow's client
records what it was given (the real server's side is in ``test_tracking_e2e.py``)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, ClassVar

import pytest

from kdgat.config import PipelineConfig, build_config
from kdgat.stages.common import stored_config_json
from kdgat.tracking import backends, context, identity
from kdgat.tracking.redact import redact_text, redact_uri
from kdgat.tracking.session import StageTracking
from kdgat.tracking.settings import resolve
from kdgat.training.requeue import checkpoint_path

SECRET_URI = "https://alice:s3cret-pw@mlflow.example.org:8443/api/?token=t0k3n&workspace=ws1"
SECRETS = ("s3cret-pw", "t0k3n")
REDACTED = "https://alice:***@mlflow.example.org:8443/api/?token=***&workspace=ws1"


@pytest.mark.parametrize(
    ("uri", "shown"),
    [
        ("https://user:secret@host/path", "https://user:***@host/path"),
        # A userinfo without a password is often a token on its own: masked whole.
        ("https://ghp_abc123@host/path", "https://***@host/path"),
        ("https://host/path?token=abc", "https://host/path?token=***"),
        (
            "https://host/?experiment=7&access_token=a&X-Amz-Signature=b&api_key=c#top",
            "https://host/?experiment=7&access_token=***&X-Amz-Signature=***&api_key=***#top",
        ),
        (SECRET_URI, REDACTED),
        # Nothing secret: unchanged, character for character.
        ("http://127.0.0.1:5001", "http://127.0.0.1:5001"),
        ("sqlite:////abs/dir/mlflow.db", "sqlite:////abs/dir/mlflow.db"),
        ("sqlite:///rel.db?mode=ro", "sqlite:///rel.db?mode=ro"),
        ("databricks://profile", "databricks://profile"),
        ("file:///scratch/mlruns", "file:///scratch/mlruns"),
    ],
)
def test_a_uri_is_shown_without_its_credentials(uri: str, shown: str) -> None:
    assert redact_uri(uri) == shown
    assert redact_uri(shown) == shown, "redacting twice changes nothing"


def test_a_uri_quoted_in_a_message_is_redacted() -> None:
    message = f"MlflowException: API request to {SECRET_URI} failed ('{SECRET_URI}/runs')"
    out = redact_text(message)
    assert not any(s in out for s in SECRETS), out
    assert out == f"MlflowException: API request to {REDACTED} failed ('{REDACTED}/runs')"


class FakeMlflow:
    """Stands in for :class:`kdgat.tracking.backends.MlflowBackend`: records the URI each call got."""

    name = "mlflow"
    runs: ClassVar[dict[str, str]] = {}  # run id -> the URI it was made with
    seen: ClassVar[list[str]] = []

    def __init__(self, uri: str, run_id: str) -> None:
        FakeMlflow.seen.append(uri)
        self.uri, self.run_id = uri, run_id
        self.resumed = False

    @staticmethod
    def experiment_id(uri: str, name: str) -> str:
        FakeMlflow.seen.append(uri)
        return "1"

    @staticmethod
    def create_run(uri: str, experiment_id: str, name: str, tags: dict[str, str], **_: Any) -> str:
        FakeMlflow.seen.append(uri)
        run_id = f"run{len(FakeMlflow.runs)}"
        FakeMlflow.runs[run_id] = uri
        return run_id

    def exists(self) -> bool:
        return self.run_id in FakeMlflow.runs

    def resume(self) -> None:
        self.resumed = True

    def set_tags(self, tags: dict[str, str]) -> None:
        pass

    def log_params(self, params: dict[str, Any]) -> None:
        FakeMlflow.params = params  # type: ignore[attr-defined]


@pytest.fixture
def fake_mlflow(monkeypatch: pytest.MonkeyPatch) -> type[FakeMlflow]:
    FakeMlflow.runs, FakeMlflow.seen = {}, []
    monkeypatch.setattr(backends, "MlflowBackend", FakeMlflow)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    return FakeMlflow


def _life(run_dir: Path, uri: str) -> StageTracking:
    """One life of a stage: the kept ids read as ``_open`` reads them, MLflow opened, ids saved."""
    cfg = build_config("small", {"tracking.tensorboard": "false", "tracking.mlflow.uri": uri})
    s = StageTracking(cfg, run_dir, {"stage": "autoencoder"}, resolve(cfg))
    s.opened = True
    kept, resumed = identity.load(run_dir)
    s.identity = kept if resumed else identity.Identity()
    s.identity.lives += 1
    s._open_mlflow(s.settings.mlflow_uri or "", None, None, "vgae_small_autoencoder", {})
    s.save_identity()
    return s


def test_the_kept_ids_hold_the_redacted_uri_and_a_requeued_life_continues_its_run(
    tmp_path: Path, fake_mlflow: type[FakeMlflow], caplog: pytest.LogCaptureFixture
) -> None:
    first = _life(tmp_path, SECRET_URI)
    kept_text = identity.identity_path(tmp_path).read_text()
    assert not any(s in kept_text for s in SECRETS), kept_text
    kept = json.loads(kept_text)
    assert kept["mlflow_uri"] == REDACTED
    assert kept["mlflow_run_id"] == first.identity.mlflow_run_id == "run0"
    assert not any(s in json.dumps(fake_mlflow.params) for s in SECRETS), "params are logged and stored"  # type: ignore[attr-defined]

    # The requeued life: last.ckpt exists, the URI comes from the config again (with its password).
    checkpoint_path(tmp_path).write_bytes(b"ckpt")
    fake_mlflow.seen.clear()
    with caplog.at_level(logging.INFO, logger="kdgat.tracking"):
        second = _life(tmp_path, SECRET_URI)
    (backend,) = second.backends
    assert isinstance(backend, FakeMlflow) and backend.resumed
    assert backend.run_id == "run0" and second.identity.lives == 2, "the same MLflow run goes on"
    assert fake_mlflow.seen == [SECRET_URI], "the client got the real URI, not the kept copy"
    assert "starting a new run" not in caplog.text

    # Another account is another URI: a new run, and the message names neither password.
    other = "https://bob:other-pw@mlflow.example.org:8443/api/?token=t0k3n&workspace=ws1"
    with caplog.at_level(logging.INFO, logger="kdgat.tracking"):
        third = _life(tmp_path, other)
    assert third.identity.mlflow_run_id == "run1"
    assert "the MLflow URI changed" in caplog.text
    assert "alice:***@" in caplog.text and "bob:***@" in caplog.text
    assert not any(s in caplog.text for s in (*SECRETS, "other-pw")), caplog.text


def test_a_kept_uri_from_before_redaction_still_matches(
    tmp_path: Path, fake_mlflow: type[FakeMlflow]
) -> None:
    """A ``tracking.json`` written with the URI whole (before this change) is still the same URI."""
    fake_mlflow.runs["old"] = SECRET_URI
    checkpoint_path(tmp_path).parent.mkdir(parents=True)
    checkpoint_path(tmp_path).write_bytes(b"ckpt")
    identity.save(tmp_path, identity.Identity(mlflow_uri=SECRET_URI, mlflow_run_id="old", lives=1))
    s = _life(tmp_path, SECRET_URI)
    assert s.identity.mlflow_run_id == "old"
    assert identity.identity_path(tmp_path).read_text().count("s3cret") == 0, "rewritten redacted"


def test_a_sweeps_parent_file_keeps_the_redacted_uri(tmp_path: Path, fake_mlflow: type[FakeMlflow]) -> None:
    cfg = build_config("small", {"tracking.tensorboard": "false", "tracking.mlflow.uri": SECRET_URI})
    s = StageTracking(cfg, tmp_path / "point_0", {"stage": "autoencoder"}, resolve(cfg))
    s.opened = True
    group = context.Group(key=tmp_path, name="sweep", kind="sweep", tags={})
    s._open_mlflow(SECRET_URI, None, group, "point_0", {})
    parent_text = (tmp_path / identity.PARENT_FILE).read_text()
    assert not any(x in parent_text for x in SECRETS), parent_text
    assert f"mlflow {REDACTED} 1" in json.loads(parent_text)


def test_a_trackers_failure_message_is_logged_without_the_credentials(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cfg = build_config("small", {"tracking.tensorboard": "false"})
    s = StageTracking(cfg, tmp_path, {"stage": "autoencoder"}, resolve(cfg))
    s.opened = True

    def opener() -> None:
        raise ConnectionError(f"HTTPSConnectionPool: Max retries exceeded with url {SECRET_URI}")

    with caplog.at_level(logging.WARNING, logger="kdgat.tracking"):
        s._open_tracker("mlflow", opener, first=True)
        s._try_again()
    assert "tried again" in caplog.text and "training goes on without it" in caplog.text
    assert REDACTED in caplog.text
    assert not any(x in caplog.text for x in SECRETS), caplog.text


def test_the_config_kept_in_a_model_file_and_logged_as_params_has_no_credentials() -> None:
    cfg = build_config("small", {"tracking.mlflow.uri": SECRET_URI})
    stored = stored_config_json(cfg)
    assert not any(s in stored for s in SECRETS)
    back = PipelineConfig.model_validate_json(stored)  # what load_model reads back
    assert back.tracking.mlflow.uri == REDACTED
    assert back.model_dump(exclude={"tracking"}) == cfg.model_dump(exclude={"tracking"})
    params = context.flat_config(cfg)
    assert params["tracking.mlflow.uri"] == REDACTED
    assert not any(s in json.dumps(params) for s in SECRETS)
