"""The data and the model: a synthetic two-blob dataset and a Lightning MLP classifier."""

from __future__ import annotations

import time
import zlib
from dataclasses import dataclass

import torch
from lightning.pytorch import LightningModule
from torch import Tensor, nn
from torch.utils.data import TensorDataset

# The dataset's shape: a few thousand rows of a handful of features, two classes.
N_ROWS = 4000
N_FEATURES = 8
VAL_FRACTION = 0.2
# Distance of each blob's centre from the origin, in units of the (unit) noise: the best possible
# accuracy is Phi(1.5) ~ 0.93, so the loss curve has something to learn and never hits zero.
BLOB_OFFSET = 1.5


@dataclass(frozen=True)
class Splits:
    """The train and validation splits of one synthetic dataset."""

    train: TensorDataset
    val: TensorDataset


def dataset_seed(name: str, seed: int) -> int:
    """A generator seed derived from the dataset's name and the run's seed (stable across processes)."""
    # crc32, not hash(): str hashes are salted per process.
    return (zlib.crc32(name.encode()) * 1_000_003 + seed) % 2**63


def make_dataset(name: str, seed: int) -> Splits:
    """Two Gaussian blobs (a binary classification), generated deterministically from ``name`` and ``seed``.

    Any name works: it only picks the random direction and noise of the blobs, so the same name and
    seed always give the same rows, and no file is read or downloaded.
    """
    gen = torch.Generator().manual_seed(dataset_seed(name, seed))
    direction = torch.randn(N_FEATURES, generator=gen)
    direction = direction / direction.norm()
    labels = torch.randint(0, 2, (N_ROWS,), generator=gen)
    # Class 1 sits at +offset along the direction, class 0 at -offset.
    centres = (labels.float() * 2 - 1).unsqueeze(1) * BLOB_OFFSET * direction
    features = centres + torch.randn(N_ROWS, N_FEATURES, generator=gen)
    order = torch.randperm(N_ROWS, generator=gen)
    n_val = int(N_ROWS * VAL_FRACTION)
    val_idx, train_idx = order[:n_val], order[n_val:]
    return Splits(
        train=TensorDataset(features[train_idx], labels[train_idx]),
        val=TensorDataset(features[val_idx], labels[val_idx]),
    )


class MLPClassifier(LightningModule):
    """A two-hidden-layer MLP that logs ``train_loss``, ``val_loss`` and ``val_acc`` once per epoch."""

    def __init__(self, in_features: int, hidden: int, lr: float, epoch_sleep: float = 0.0) -> None:
        super().__init__()
        # Stored in every checkpoint (and in the CSV logger's hparams.yaml).
        self.save_hyperparameters()
        self.lr = lr
        self.epoch_sleep = epoch_sleep
        self.net = nn.Sequential(
            nn.Linear(in_features, hidden),
            nn.ReLU(),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
            nn.Linear(hidden, 2),
        )
        self.loss = nn.CrossEntropyLoss()

    def forward(self, x: Tensor) -> Tensor:
        """Class logits for a batch of rows."""
        return self.net(x)

    # Knowledge distillation (Hinton et al. 2015): with a teacher, the loss mixes the labels'
    # cross-entropy with the KL divergence to the teacher's softened classes.
    KD_ALPHA = 0.5
    KD_TEMPERATURE = 2.0
    teacher: nn.Module | None = None

    def distil_from(self, teacher: nn.Module) -> None:
        """Train as the student of ``teacher``, kept out of this module's parameters and state dict
        (so the student's checkpoints hold the student alone, and the optimizer never sees it)."""
        object.__setattr__(self, "teacher", teacher)

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        """One optimisation step; the loss is averaged over the epoch for the log."""
        x, y = batch
        logits = self(x)
        loss = self.loss(logits, y)
        if self.teacher is not None:
            t = self.KD_TEMPERATURE
            with torch.no_grad():
                soft = torch.softmax(self.teacher(x) / t, dim=1)
            log_student = torch.log_softmax(logits / t, dim=1)
            kd = nn.functional.kl_div(log_student, soft, reduction="batchmean") * t * t
            loss = (1 - self.KD_ALPHA) * loss + self.KD_ALPHA * kd
        self.log("train_loss", loss, on_step=False, on_epoch=True, batch_size=len(y))
        return loss

    def validation_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> None:
        """Validation loss and accuracy, averaged over the epoch (weighted by batch size)."""
        x, y = batch
        logits = self(x)
        self.log("val_loss", self.loss(logits, y), on_epoch=True, batch_size=len(y))
        self.log("val_acc", (logits.argmax(dim=1) == y).float().mean(), on_epoch=True, batch_size=len(y))

    def on_train_epoch_end(self) -> None:
        """Print the epoch's scores (a job log shows progress), then sleep ``epoch_sleep`` seconds.

        Validation has already run for this epoch, and ``last.ckpt`` was written when it ended (see
        the ModelCheckpoint in train.py), so a run killed during the sleep resumes after this epoch.
        """
        metrics = self.trainer.callback_metrics
        if "val_loss" in metrics:
            print(
                f"epoch={self.current_epoch} val_loss={float(metrics['val_loss']):.4f} "
                f"val_acc={float(metrics['val_acc']):.4f}",
                flush=True,
            )
        if self.epoch_sleep > 0:
            time.sleep(self.epoch_sleep)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        """Adam at the configured learning rate."""
        return torch.optim.Adam(self.parameters(), lr=self.lr)


def load_teacher(path: str) -> MLPClassifier:
    """The teacher a student distils from: a Lightning checkpoint of this model, read as tensors only."""
    blob = torch.load(path, map_location="cpu", weights_only=True)
    hp = blob["hyper_parameters"]
    teacher = MLPClassifier(hp["in_features"], hp["hidden"], hp["lr"])
    teacher.load_state_dict(blob["state_dict"])
    teacher.eval()
    for p in teacher.parameters():
        p.requires_grad_(False)
    return teacher


@torch.no_grad()
def evaluate(model: MLPClassifier, data: TensorDataset) -> tuple[float, float]:
    """Loss and accuracy of ``model`` over a whole split, in one pass (for the final ``metrics.json``)."""
    model.eval()
    x, y = data.tensors
    logits = model(x)
    return float(model.loss(logits, y)), float((logits.argmax(dim=1) == y).float().mean())
