"""The GAT's per-window output that the scoring modes combine (the VGAE's:
:func:`kdgat.stages.scoring.anomaly_scores`)."""

from __future__ import annotations

import torch
from torch.utils.data import Dataset
from torch_geometric.data import Data
from torch_geometric.loader import DataLoader

from kdgat.models import GATWithJK


@torch.no_grad()
def gat_probabilities(net: GATWithJK, data: Dataset[Data], batch_size: int = 512) -> torch.Tensor:
    """The GAT's attack probability per window ``[len(data)]`` (eval mode, data order)."""
    net.eval()
    loader = DataLoader(data, batch_size=batch_size, shuffle=False)  # type: ignore[arg-type]
    out = [torch.softmax(net(b.x, b.edge_index, b.edge_attr, b.batch), -1)[:, 1] for b in loader]
    return torch.cat(out) if out else torch.zeros(0)
