"""The pipeline uses the run contract's values (``kdgat/contract/run_contract.json``, which the
TypeScript side reads too): its stages are the CLI's, its layout is where runs land, its signal
variable arms the handshake, its exit status is what a requeue ends with. The file is read here
with plain ``json``, not through :mod:`kdgat.contract`, so a loader that drifts from it fails too."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import kdgat.contract
from kdgat import cli, paths
from kdgat.stages.dispatch import RUNNERS
from kdgat.training.requeue import RequeueCallback, RequeueRequested

RAW: dict[str, Any] = json.loads(
    (Path(kdgat.contract.__file__).parent / "run_contract.json").read_text(encoding="utf-8")
)


def test_the_cli_has_one_subcommand_per_stage_of_the_file_in_its_order() -> None:
    parser = cli._parser()
    (sub,) = [a for a in parser._actions if a.dest == "command"]
    commands = list(sub.choices)  # type: ignore[arg-type]
    stages = [s["name"] for s in RAW["stages"]]
    assert commands[: len(stages)] == stages
    assert tuple(stages) == kdgat.contract.STAGES
    assert list(RUNNERS) == stages  # every stage of the file runs, and nothing else


def test_run_dirs_follow_the_files_layout(tmp_path: Path) -> None:
    layout: str = RAW["runDir"]["layout"]
    want = layout.replace("<run-root>", str(tmp_path)).replace("<dataset>", "hcrl_sa")
    want = want.replace("<model>", "gat").replace("<scale>", "large").replace("<stage>", "curriculum")
    assert paths.run_dir(tmp_path, "hcrl_sa", "gat", "large", "curriculum") == Path(want)


def test_the_signal_comes_from_the_files_variable_and_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = RAW["requeue"]["signalEnv"]
    monkeypatch.delenv(env, raising=False)
    assert RequeueCallback(tmp_path).signame == RAW["requeue"]["defaultSignal"]
    monkeypatch.setenv(env, "SIGUSR2")
    assert RequeueCallback(tmp_path).signame == "USR2"


def test_a_requeued_stage_exits_with_the_files_status(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def requeued(*args: object, **kwargs: object) -> dict[str, object]:
        raise RequeueRequested(str(tmp_path / RAW["runDir"]["files"]["checkpoint"]))

    monkeypatch.setattr(cli, "run_stage", requeued)
    status = cli.main(["autoencoder", "--model", "vgae", "--scale", "small", "--dataset", "d"])
    assert status == RAW["requeue"]["exitStatus"]


def test_a_broken_contract_is_refused_naming_the_field() -> None:
    bad = json.loads(json.dumps(RAW))
    bad["requeue"]["exitStatus"] = 300
    with pytest.raises(ValueError, match=r"requeue\.exitStatus"):
        kdgat.contract.RunContract.model_validate(bad)
