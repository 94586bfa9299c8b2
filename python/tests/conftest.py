"""One tiny synthetic data set, preprocessed once per session, shared by the pipeline tests."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from kdgat.config import build_config
from kdgat.data import preprocess_dataset, write_synthetic_dataset
from kdgat.stages.common import graph_params

from helpers import DATASET


@pytest.fixture(scope="session")
def pipeline_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    root = tmp_path_factory.mktemp("kdgat")
    env = {
        "KD_GAT_DATA_ROOT": str(root / "raw"),
        "KD_GAT_CACHE_ROOT": str(root / "cache"),
        "KD_GAT_RUN_ROOT": str(root / "runs"),
    }
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    write_synthetic_dataset(root / "raw" / DATASET, n_messages=60_000, seed=0)
    # the graph parameters of the pipeline's default config (what every stage then asks for)
    preprocess_dataset(DATASET, graph_params(build_config("small")), workers=1)
    yield env
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture
def run_root(tmp_path: Path, pipeline_env: dict[str, str]) -> Path:
    """A fresh run root per test (the data set and cache are shared)."""
    return tmp_path / "runs"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``gpu``-marked tests need a CUDA device: skipped with the reason where there is none
    (CI and the development machines); scripts/gpu-check.sh runs them on a GPU machine."""
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (torch.cuda.is_available() is False here)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
