"""LightningModules of the stages: VGAE reconstruction, GAT classification, KD distillation, and the
curriculum (easy windows first)."""

from __future__ import annotations

import math

import lightning as L
import torch
import torch.nn.functional as F
from torch import Tensor
from torch_geometric.data import Batch
from torch_geometric.loader import DataLoader

from kdgat.config import PipelineConfig
from kdgat.data import GraphSet
from kdgat.models import GATWithJK, GraphAutoencoderNeighborhood
from kdgat.training.loader import make_loader


class VGAEModule(L.LightningModule):
    def __init__(self, model: GraphAutoencoderNeighborhood, lr: float) -> None:
        super().__init__()
        self.model = model
        self.lr = lr

    def training_step(self, batch: Batch, batch_idx: int) -> Tensor:
        loss = self.model.loss(batch.x, batch.edge_index, batch.edge_attr, batch.batch)
        self.log("train_loss", loss, batch_size=batch.num_graphs, prog_bar=True)
        return loss

    def validation_step(self, batch: Batch, batch_idx: int) -> None:
        loss = self.model.loss(batch.x, batch.edge_index, batch.edge_attr, batch.batch)
        self.log("val_loss", loss, batch_size=batch.num_graphs, prog_bar=True, sync_dist=True)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=self.lr)


class ClassifierModule(L.LightningModule):
    """GAT classification; with a ``teacher`` it distils (KD loss, temperature T, weight alpha)."""

    def __init__(
        self,
        model: GATWithJK,
        lr: float,
        *,
        class_weight: Tensor | None = None,
        teacher: GATWithJK | None = None,
        temperature: float = 4.0,
        alpha: float = 0.7,
    ) -> None:
        super().__init__()
        self.model = model
        self.lr = lr
        self.register_buffer("class_weight", class_weight if class_weight is not None else torch.ones(2))
        self.teacher = teacher
        if teacher is not None:
            teacher.eval().requires_grad_(False)
        self.temperature = temperature
        self.alpha = alpha

    def forward(self, batch: Batch) -> Tensor:
        logits: Tensor = self.model(batch.x, batch.edge_index, batch.edge_attr, batch.batch)
        return logits

    def _loss(self, batch: Batch) -> Tensor:
        logits = self(batch)
        y = batch.y.view(-1)
        weight: Tensor = self.class_weight  # type: ignore[assignment]
        hard = F.cross_entropy(logits, y, weight=weight)
        if self.teacher is None:
            return hard
        with torch.no_grad():
            t_logits = self.teacher(batch.x, batch.edge_index, batch.edge_attr, batch.batch)
        T = self.temperature
        soft = (
            F.kl_div(F.log_softmax(logits / T, -1), F.softmax(t_logits / T, -1), reduction="batchmean")
            * T
            * T
        )
        return self.alpha * soft + (1 - self.alpha) * hard

    def training_step(self, batch: Batch, batch_idx: int) -> Tensor:
        loss = self._loss(batch)
        self.log("train_loss", loss, batch_size=batch.num_graphs, prog_bar=True)
        return loss

    def validation_step(self, batch: Batch, batch_idx: int) -> None:
        loss = self._loss(batch)
        acc = (self(batch).argmax(-1) == batch.y.view(-1)).float().mean()
        # sync_dist: under DDP every rank sees the same val_loss, so early stopping agrees.
        self.log_dict(
            {"val_loss": loss, "val_acc": acc}, batch_size=batch.num_graphs, prog_bar=True, sync_dist=True
        )

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.model.parameters(), lr=self.lr)


class CurriculumModule(ClassifierModule):
    """Trains on the easiest windows first and adds harder ones each epoch: from half the training
    set in the first epoch to all of it by the last. Difficulty: how wrong the VGAE's anomaly score
    is about a window (a benign window that reconstructs badly, an attack that reconstructs well)."""

    def __init__(
        self,
        model: GATWithJK,
        lr: float,
        *,
        train: GraphSet,
        order: torch.Tensor,
        cfg: PipelineConfig,
        class_weight: torch.Tensor,
    ) -> None:
        super().__init__(model, lr, class_weight=class_weight)
        self.train_set = train
        self.order = order
        self.cfg = cfg
        self.batch_size = cfg.training.batch_size

    def train_dataloader(self) -> DataLoader:
        epochs = max(1, self.cfg.training.max_epochs - 1)
        share = min(1.0, 0.5 + 0.5 * self.current_epoch / epochs)
        n = max(1, math.ceil(share * len(self.order)))
        return make_loader(self.train_set.subset(self.order[:n]), self.cfg, self.batch_size, shuffle=True)
