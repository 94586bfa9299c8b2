"""The per-window inputs that the scoring modes combine besides the VGAE's
(:func:`kdgat.stages.scoring.anomaly_scores`): the GAT's attack probability, and the timing score
that ``novelty_timing`` reads from the payload features, and each window's position in its recording
that the warm-up reads."""

from __future__ import annotations

import torch
from torch.utils.data import Dataset
from torch_geometric.data import Data
from torch_geometric.loader import DataLoader

from kdgat.data import GraphSet
from kdgat.data.features_payload import PAYLOAD_NODE_FEATURES
from kdgat.models import GATWithJK

#: The payload features' column that the timing score reads.
PERIOD_COLUMN = PAYLOAD_NODE_FEATURES.index("period_ratio")


@torch.no_grad()
def gat_probabilities(net: GATWithJK, data: Dataset[Data], batch_size: int = 512) -> torch.Tensor:
    """The GAT's attack probability per window ``[len(data)]`` (eval mode, data order)."""
    net.eval()
    loader = DataLoader(data, batch_size=batch_size, shuffle=False)  # type: ignore[arg-type]
    out = [torch.softmax(net(b.x, b.edge_index, b.edge_attr, b.batch), -1)[:, 1] for b in loader]
    return torch.cat(out) if out else torch.zeros(0)


def timing_scores(data: GraphSet) -> torch.Tensor:
    """Per window ``[len(data)]``: minus the smallest ``period_ratio`` of its nodes (payload
    features, stored raw): 0 when no two consecutive messages of an ID came closer than half its
    profiled period, 1 at a quarter period, 2 at an eighth, … (log2)."""
    s = data.store
    if s["x"].shape[1] != len(PAYLOAD_NODE_FEATURES):
        raise ValueError(
            f"timing scores need the payload features ({len(PAYLOAD_NODE_FEATURES)} node columns); "
            f"these windows have {s['x'].shape[1]}: build the cache with data.features payload"
        )
    ptr = s["node_ptr"]
    graph_of_node = torch.repeat_interleave(torch.arange(len(ptr) - 1), ptr.diff())
    low = torch.zeros(len(ptr) - 1, dtype=torch.float64)
    low.scatter_reduce_(0, graph_of_node, s["x"][:, PERIOD_COLUMN].double(), "amin", include_self=True)
    return -low[data.index]


def window_ranks(data: GraphSet) -> torch.Tensor:
    """Each window's position in its recording ``[len(data)]`` (0 = the recording's first window):
    the cache stores a recording's windows together and in stream order (``file_index``)."""
    file_index = data.store["file_index"].view(-1)
    first = torch.zeros(len(file_index), dtype=torch.long)
    if len(file_index):
        new_file = torch.ones(len(file_index), dtype=torch.bool)
        new_file[1:] = file_index[1:] != file_index[:-1]
        starts = torch.nonzero(new_file).view(-1)
        first = starts[torch.cumsum(new_file.long(), 0) - 1]
    return (torch.arange(len(file_index)) - first)[data.index]
