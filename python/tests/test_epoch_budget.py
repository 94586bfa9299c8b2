"""``training.limit_train_batches``: an epoch of at most N training batches, a fresh draw each epoch;
64 by default, ``null`` for every training window each epoch."""

import json
import math
import os
from pathlib import Path

import pytest
import torch

from kdgat import paths
from kdgat.config import build_config

from helpers import AUTOENCODER, DATASET, kdgat, metrics


def _steps(run_root: Path) -> int:
    ckpt = paths.run_dir(run_root, DATASET, "vgae", "small", "autoencoder") / "checkpoints" / "last.ckpt"
    return int(torch.load(ckpt, weights_only=False, map_location="cpu")["global_step"])


def test_an_epoch_stops_after_the_configured_batches(run_root: Path) -> None:
    args = ("-O", "training.max_epochs", "3", "-O", "training.batch_size", "16")
    assert kdgat(run_root, *AUTOENCODER, *args, "-O", "training.limit_train_batches", "2") == 0
    assert metrics(run_root, "vgae_small_autoencoder")["epochs"] == 3
    assert _steps(run_root) == 3 * 2


@pytest.mark.parametrize("scale", ["small", "large"])
def test_the_default_epoch_is_64_batches_and_null_lifts_the_cap(scale: str) -> None:
    assert build_config(scale).training.limit_train_batches == 64
    assert build_config(scale, {"training.limit_train_batches": "null"}).training.limit_train_batches is None


def _benign_training_windows() -> int:
    meta = json.loads((Path(os.environ["KD_GAT_CACHE_ROOT"]) / DATASET / "meta.json").read_text())
    return int(meta["graphs"]["train"] - meta["attack_graphs"]["train"])


def test_without_the_cap_an_epoch_is_every_training_window(run_root: Path, tmp_path: Path) -> None:
    # The autoencoder trains on the benign training windows: in batches of 2, more steps than the
    # default cap of 64, which a capped epoch stops at.
    one_epoch = ("-O", "training.max_epochs", "1", "-O", "training.batch_size", "2")
    assert kdgat(run_root, *AUTOENCODER, *one_epoch) == 0
    assert _steps(run_root) == 64
    full = tmp_path / "full"
    assert kdgat(full, *AUTOENCODER, *one_epoch, "-O", "training.limit_train_batches", "null") == 0
    assert _steps(full) == math.ceil(_benign_training_windows() / 2) > 64
