"""KD-GAT models: the GAT classifier and the VGAE, one per module."""

from __future__ import annotations

from kdgat.config import PipelineConfig, build_config
from kdgat.data.params import node_feature_count
from kdgat.models.gat import GATWithJK
from kdgat.models.layers import cugraph_available, make_gat_conv
from kdgat.models.vgae import GraphAutoencoderNeighborhood

__all__ = [
    "GATWithJK",
    "GraphAutoencoderNeighborhood",
    "build_model",
    "cugraph_available",
    "make_gat_conv",
    "parameter_count",
]

#: Counts reported for the published KD-GAT code (large / small), for comparison.
PUBLISHED_PARAMETERS = {
    ("gat", "large"): 311_138,
    ("gat", "small"): 49_202,
    ("vgae", "large"): 185_850,
    ("vgae", "small"): 9_186,
}


def build_model(
    model: str, cfg: PipelineConfig, *, vocab_size: int
) -> GATWithJK | GraphAutoencoderNeighborhood:
    # the node features of the config's feature set (the graph cache it reads holds that many)
    node_features = node_feature_count(cfg.data.features)
    if model == "gat":
        return GATWithJK(
            cfg.gat,
            vocab_size=vocab_size,
            node_features=node_features,
            gradient_checkpointing=cfg.training.gradient_checkpointing,
        )
    if model == "vgae":
        return GraphAutoencoderNeighborhood(cfg.vgae, vocab_size=vocab_size, node_features=node_features)
    raise ValueError(f"model {model!r} is unknown; expected gat or vgae")


def parameter_count(model: str, scale: str, *, vocab_size: int = 2048) -> int:
    m = build_model(model, build_config(scale), vocab_size=vocab_size)
    return sum(p.numel() for p in m.parameters())
