"""``training.limit_train_batches``: an epoch of at most N training batches, a fresh draw each epoch."""

from pathlib import Path

import torch

from kdgat import paths

from helpers import AUTOENCODER, DATASET, kdgat, metrics


def test_an_epoch_stops_after_the_configured_batches(run_root: Path) -> None:
    args = (
        "-O",
        "training.max_epochs",
        "3",
        "-O",
        "training.batch_size",
        "16",
        "-O",
        "training.patience",
        "0",
    )
    assert kdgat(run_root, *AUTOENCODER, *args, "-O", "training.limit_train_batches", "2") == 0
    m = metrics(run_root, "vgae_small_autoencoder")
    assert m["epochs"] == 3
    ckpt = paths.run_dir(run_root, DATASET, "vgae", "small", "autoencoder") / "checkpoints" / "last.ckpt"
    assert torch.load(ckpt, weights_only=False, map_location="cpu")["global_step"] == 3 * 2
