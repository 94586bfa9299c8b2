"""GATWithJK: the KD-GAT graph classifier (teacher at scale large, student at scale small)."""

from __future__ import annotations

import logging

import torch
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint
from torch_geometric.nn import JumpingKnowledge, global_mean_pool

from kdgat.config import GATArchitecture
from kdgat.models import forward_check
from kdgat.models.layers import is_cugraph, make_gat_conv

log = logging.getLogger("kdgat.models")


class GATWithJK(nn.Module):
    """Window graph -> class logits.

    In: ``x [N, 11]`` (column 0 = CAN-ID vocabulary index, 1..10 = node features),
    ``edge_index [2, E]``, ``edge_attr [E, 11]``, ``batch [N]`` (graph of each node).
    Out: ``[B, 2]`` logits (benign, attack).

    CAN-ID embedding ⊕ node features -> ``layers`` GAT layers (edge-aware) -> JumpingKnowledge
    (concatenation) -> global mean pool -> ``fc_layers`` fully connected layers.
    """

    def __init__(
        self,
        arch: GATArchitecture,
        *,
        vocab_size: int,
        node_features: int = 11,
        edge_features: int = 11,
        num_classes: int = 2,
        gradient_checkpointing: bool = False,
    ) -> None:
        super().__init__()
        self.arch = arch
        self.gradient_checkpointing = gradient_checkpointing
        self.embedding = nn.Embedding(vocab_size + 1, arch.embedding_dim)
        in_dim = arch.embedding_dim + node_features - 1
        self.convs = nn.ModuleList()
        for i in range(arch.layers):
            self.convs.append(
                make_gat_conv(
                    in_dim if i == 0 else arch.hidden * arch.heads,
                    arch.hidden,
                    heads=arch.heads,
                    edge_dim=edge_features,
                    conv=arch.conv,
                    use_cugraph=arch.use_cugraph,
                    dropout=arch.dropout,
                )
            )
        self.jk = JumpingKnowledge("cat")
        width = arch.hidden * arch.heads * arch.layers
        fcs: list[nn.Module] = []
        for _ in range(arch.fc_layers - 1):
            fcs += [nn.Linear(width, width // 2), nn.ReLU(), nn.Dropout(arch.dropout)]
            width //= 2
        fcs.append(nn.Linear(width, num_classes))
        self.head = nn.Sequential(*fcs)
        self.dropout = nn.Dropout(arch.dropout)

    def _conv(self, conv: nn.Module, h: Tensor, edge_index: Tensor, edge_attr: Tensor) -> Tensor:
        out: Tensor = conv(h, edge_index, edge_attr=edge_attr)
        return out

    def forward(self, x: Tensor, edge_index: Tensor, edge_attr: Tensor, batch: Tensor) -> Tensor:
        forward_check.check_forward(batch, training=self.training)
        ids = x[:, 0].long().clamp(0, self.embedding.num_embeddings - 1)
        h = torch.cat([self.embedding(ids), x[:, 1:]], dim=-1)
        layers = []
        for conv in self.convs:
            if self.gradient_checkpointing and self.training:
                h = checkpoint(self._conv, conv, h, edge_index, edge_attr, use_reentrant=False)
            else:
                h = self._conv(conv, h, edge_index, edge_attr)
            h = self.dropout(torch.relu(h))
            layers.append(h)
        pooled = global_mean_pool(self.jk(layers), batch)
        logits: Tensor = self.head(pooled)
        return logits

    @torch.no_grad()
    def attention_weights(
        self, x: Tensor, edge_index: Tensor, edge_attr: Tensor
    ) -> list[tuple[Tensor, Tensor]] | None:
        """Per-layer ``(edge_index, alpha [E, heads])``; None under cuGraph (it does not return them)."""
        if any(is_cugraph(c) for c in self.convs):
            log.warning("attention weights are not available from CuGraphGATConv: skipped")
            return None
        ids = x[:, 0].long().clamp(0, self.embedding.num_embeddings - 1)
        h = torch.cat([self.embedding(ids), x[:, 1:]], dim=-1)
        out = []
        for conv in self.convs:
            h, (ei, alpha) = conv(h, edge_index, edge_attr=edge_attr, return_attention_weights=True)
            h = torch.relu(h)
            out.append((ei, alpha))
        return out
