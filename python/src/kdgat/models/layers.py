"""GAT convolution factory: standard PyG layers, or cuGraph's fused layer when it can run."""

from __future__ import annotations

import logging
from functools import cache

import torch
from torch import nn
from torch_geometric.nn import GATConv, GATv2Conv

log = logging.getLogger("kdgat.models")


@cache
def cugraph_available() -> bool:
    """CuGraphGATConv needs pylibcugraphops (last released with RAPIDS 24.12) and a CUDA device."""
    try:
        import pylibcugraphops  # type: ignore[import-not-found]  # noqa: F401
        from torch_geometric.nn import CuGraphGATConv  # noqa: F401
    except ImportError:
        return False
    return torch.cuda.is_available()


@cache
def _warn_fallback() -> None:
    log.warning(
        "use_cugraph=True but CuGraphGATConv cannot run here (needs pylibcugraphops from RAPIDS <= 24.12 "
        "and a CUDA GPU): using the standard GAT layer instead"
    )


def make_gat_conv(
    in_dim: int,
    out_dim: int,
    *,
    heads: int,
    edge_dim: int,
    conv: str = "gat",
    use_cugraph: bool = False,
    concat: bool = True,
    dropout: float = 0.0,
) -> nn.Module:
    """A GAT layer that consumes ``edge_attr`` (``edge_dim`` set: the edge features are used in
    attention, which the original code missed). ``use_cugraph`` picks the fused cuGraph layer when
    it can run, else warns once and returns the standard layer."""
    if use_cugraph:
        if cugraph_available():
            from torch_geometric.nn import CuGraphGATConv

            return CuGraphGATConv(in_dim, out_dim, heads=heads, concat=concat, edge_dim=edge_dim)
        _warn_fallback()
    layer = GATv2Conv if conv == "gatv2" else GATConv
    return layer(
        in_dim,
        out_dim,
        heads=heads,
        concat=concat,
        edge_dim=edge_dim,
        dropout=dropout,
        add_self_loops=False,
    )


def is_cugraph(layer: nn.Module) -> bool:
    return type(layer).__name__ == "CuGraphGATConv"
