"""GraphAutoencoderNeighborhood: the KD-GAT variational graph autoencoder (benign windows only)."""

from __future__ import annotations

from itertools import pairwise

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch_geometric.nn import global_max_pool, global_mean_pool
from torch_geometric.utils import degree

from kdgat.config import VGAEArchitecture
from kdgat.models import forward_check
from kdgat.models.layers import make_gat_conv


class GraphAutoencoderNeighborhood(nn.Module):
    """Variational autoencoder over window graphs.

    In: ``x [N, 11]`` (column 0 = CAN-ID index), ``edge_index [2, E]``, ``edge_attr [E, 11]``,
    ``batch [N]``. Encoder: CAN-ID embedding ⊕ features -> GAT layers (``hidden_dims``) ->
    ``z_mean``, ``z_logvar`` ``[N, latent]``. Decoders from ``z``: the 10 node features (mirrored
    MLP), the CAN ID (classification head over the vocabulary) and the node's neighbourhood size
    (in/out degree, an MLP). A window whose reconstruction is poor is anomalous:
    :meth:`anomaly_score` gives one score per graph ``[B]``.
    """

    def __init__(
        self,
        arch: VGAEArchitecture,
        *,
        vocab_size: int,
        node_features: int = 11,
        edge_features: int = 11,
    ) -> None:
        super().__init__()
        self.arch = arch
        self.embedding = nn.Embedding(vocab_size + 1, arch.embedding_dim)
        dims = [arch.embedding_dim + node_features - 1, *arch.hidden_dims]
        self.encoder = nn.ModuleList(
            make_gat_conv(
                dims[i],
                dims[i + 1] // arch.heads if i < len(dims) - 2 else dims[i + 1],
                heads=arch.heads if i < len(dims) - 2 else 1,
                edge_dim=edge_features,
                use_cugraph=arch.use_cugraph,
            )
            for i in range(len(dims) - 1)
        )
        enc_out = [
            (dims[i + 1] // arch.heads) * arch.heads if i < len(dims) - 2 else dims[i + 1]
            for i in range(len(dims) - 1)
        ]
        # Each layer's input width is the previous layer's concatenated output.
        for i in range(1, len(self.encoder)):
            layer = self.encoder[i]
            if getattr(layer, "in_channels", enc_out[i - 1]) != enc_out[i - 1]:
                self.encoder[i] = make_gat_conv(
                    enc_out[i - 1],
                    layer.out_channels,  # type: ignore[arg-type]
                    heads=layer.heads,  # type: ignore[arg-type]
                    edge_dim=edge_features,
                    use_cugraph=arch.use_cugraph,
                )
        last = enc_out[-1]
        self.z_mean = nn.Linear(last, arch.latent_dim)
        self.z_logvar = nn.Linear(last, arch.latent_dim)
        mirrored = [arch.latent_dim, *reversed(arch.hidden_dims[:-1])]
        decoder: list[nn.Module] = []
        for a, b in pairwise(mirrored):
            decoder += [nn.Linear(a, b), nn.ReLU()]
        decoder.append(nn.Linear(mirrored[-1], node_features - 1))
        self.feature_decoder = nn.Sequential(*decoder)
        self.id_head = nn.Linear(arch.latent_dim, vocab_size + 1)
        self.neighbourhood = nn.Sequential(
            nn.Linear(arch.latent_dim, arch.latent_dim), nn.ReLU(), nn.Linear(arch.latent_dim, 2)
        )
        self.dropout = nn.Dropout(arch.dropout)

    def encode(self, x: Tensor, edge_index: Tensor, edge_attr: Tensor) -> tuple[Tensor, Tensor]:
        ids = x[:, 0].long().clamp(0, self.embedding.num_embeddings - 1)
        h = torch.cat([self.embedding(ids), x[:, 1:]], dim=-1)
        for conv in self.encoder:
            h = self.dropout(F.elu(conv(h, edge_index, edge_attr=edge_attr)))
        return self.z_mean(h), self.z_logvar(h).clamp(-10, 10)

    def forward(self, x: Tensor, edge_index: Tensor, edge_attr: Tensor, batch: Tensor) -> dict[str, Tensor]:
        forward_check.check_forward(batch, training=self.training)
        mu, logvar = self.encode(x, edge_index, edge_attr)
        z = mu + torch.randn_like(mu) * torch.exp(0.5 * logvar) if self.training else mu
        return {
            "mu": mu,
            "logvar": logvar,
            "features": self.feature_decoder(z),
            "id_logits": self.id_head(z),
            "neighbourhood": self.neighbourhood(z),
        }

    @staticmethod
    def node_losses(out: dict[str, Tensor], x: Tensor, edge_index: Tensor, num_nodes: int) -> Tensor:
        """Per-node loss ``[N]``: feature MSE + CAN-ID cross-entropy + neighbourhood MSE."""
        ids = x[:, 0].long().clamp(0, out["id_logits"].shape[1] - 1)
        deg = torch.stack([degree(edge_index[1], num_nodes), degree(edge_index[0], num_nodes)], dim=-1)
        feat = F.mse_loss(out["features"], x[:, 1:], reduction="none").mean(-1)
        ident = F.cross_entropy(out["id_logits"], ids, reduction="none")
        neigh = F.mse_loss(out["neighbourhood"], torch.log1p(deg), reduction="none").mean(-1)
        return feat + 0.5 * ident + 0.5 * neigh

    def loss(self, x: Tensor, edge_index: Tensor, edge_attr: Tensor, batch: Tensor) -> Tensor:
        out = self(x, edge_index, edge_attr, batch)
        recon = self.node_losses(out, x, edge_index, x.shape[0]).mean()
        kl = -0.5 * torch.mean(torch.sum(1 + out["logvar"] - out["mu"] ** 2 - out["logvar"].exp(), dim=-1))
        return recon + 1e-3 * kl

    @torch.no_grad()
    def anomaly_score(
        self, x: Tensor, edge_index: Tensor, edge_attr: Tensor, batch: Tensor, pool: str = "mean"
    ) -> Tensor:
        """Each graph's per-node reconstruction losses pooled to ``[B]`` (higher = more anomalous):
        their mean (``pool="mean"``), or their largest (``"max"``: one spoofed ID among thirty moves
        the mean little and the largest much)."""
        out = self(x, edge_index, edge_attr, batch)
        per_node = self.node_losses(out, x, edge_index, x.shape[0])
        pools = {"mean": global_mean_pool, "max": global_max_pool}
        if pool not in pools:
            raise ValueError(f"VGAE score pool {pool!r} is unknown; expected mean or max")
        return pools[pool](per_node.unsqueeze(-1), batch).squeeze(-1)
