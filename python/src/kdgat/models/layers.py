"""GAT convolution factory: the standard PyG layer with edge features, or a fused cugraph-ops layer
that uses them too when it can run.

Which fused layer (read from the sources, see docs/decisions/0005-fused-gat-layer-with-edge-features.md):

- PyG's ``CuGraphGATConv`` (2.8.1) has no ``edge_dim``: its attention vector holds ``2·heads·C``
  weights, while the kernel it calls (``pylibcugraphops`` ``mha_gat_n2n``) expects
  ``2·heads·C + dim_edge`` when edge features are given. Its ``forward`` passes ``edge_attr`` to the
  kernel unprojected (from 2.8.0; 2.6/2.7 take no ``edge_attr`` at all) and does not reorder it when
  it sorts the edges into CSC order.
- cugraph-pyg's ``GATConv`` (``cugraph_pyg.nn.conv``, 23.x-24.12) did it right (``edge_dim`` ->
  a projection to ``heads·C`` and a ``3·heads·C`` attention vector) but pins PyG < 2.6 and was removed
  in 25.02 together with the pylibcugraphops dependency (cugraph-gnn PR #99).

So the fused layer here is :class:`EdgeFeatureCuGraphGATConv`: PyG's ``CuGraphGATConv`` (the class
installed with our PyG) with the edge projection and the ``3·heads·C`` attention vector added, the
edges sorted by destination once and ``edge_attr`` permuted with them. It needs pylibcugraphops
(last released with RAPIDS 24.12), PyG >= 2.8 and a CUDA GPU.
"""

from __future__ import annotations

import logging
from functools import cache
from typing import Any

import torch
from torch import Tensor, nn
from torch_geometric import EdgeIndex
from torch_geometric.nn import CuGraphGATConv, GATConv, GATv2Conv
from torch_geometric.nn.inits import glorot, zeros

log = logging.getLogger("kdgat.models")


def fused_gat_problem() -> str | None:
    """Why the fused edge-aware GAT layer cannot run here, or None when it can."""
    return _fused_gat_problem()


@cache
def _fused_gat_problem() -> str | None:
    import inspect

    if "edge_attr" not in inspect.signature(CuGraphGATConv.forward).parameters:
        return "the installed PyG's CuGraphGATConv.forward takes no edge_attr (PyG >= 2.8 needed)"
    try:
        import pylibcugraphops  # type: ignore[import-not-found]  # noqa: F401
    except ImportError:
        return (
            "pylibcugraphops is not installed (it was last released with RAPIDS 24.12: "
            "use the gnn-rapids-cugraphops environment)"
        )
    if not torch.cuda.is_available():
        return "no CUDA GPU (cugraph-ops kernels run on CUDA devices only)"
    return None


def cugraph_available() -> bool:
    """True when :func:`make_gat_conv` with ``use_cugraph=True`` returns the fused layer."""
    return fused_gat_problem() is None


@cache
def _log_fallback(reason: str, standard: str) -> None:
    # The first words are what logs are searched for (the examples' e2e): keep them stable.
    log.warning(
        "use_cugraph=True but CuGraphGATConv cannot run here (the fused cugraph-ops GAT layer with "
        "edge features: %s): using the standard %s layer instead",
        reason,
        standard,
    )


def cugraph_init_kwargs(in_dim: int, out_dim: int, *, heads: int, concat: bool) -> dict[str, Any]:
    """What :class:`EdgeFeatureCuGraphGATConv` passes to ``CuGraphGATConv.__init__``."""
    return {"in_channels": in_dim, "out_channels": out_dim, "heads": heads, "concat": concat}


def cugraph_forward_kwargs(x: Tensor, edge_index: EdgeIndex, edge_feat: Tensor) -> dict[str, Any]:
    """What :class:`EdgeFeatureCuGraphGATConv` passes to ``CuGraphGATConv.forward``."""
    return {"x": x, "edge_index": edge_index, "edge_attr": edge_feat}


def sort_edges_by_destination(
    edge_index: Tensor, edge_attr: Tensor, num_nodes: int
) -> tuple[EdgeIndex, Tensor]:
    """The graph as an ``EdgeIndex`` in CSC (destination) order, with ``edge_attr`` in the same order.
    ``CuGraphGATConv`` sorts by destination itself but drops the permutation, so edge features would
    reach the wrong edges: sorting here first makes its own sort a no-op."""
    ei = EdgeIndex(edge_index, sparse_size=(num_nodes, num_nodes))
    ei, perm = ei.sort_by("col")
    return ei, edge_attr if perm is None else edge_attr[perm]


class EdgeFeatureCuGraphGATConv(CuGraphGATConv):  # type: ignore[misc]
    """PyG's fused ``CuGraphGATConv`` with edge features used in attention, as ``GATConv(edge_dim)``.

    In: ``x [N, in_dim]``, ``edge_index [2, E]``, ``edge_attr [E, edge_dim]``.
    Out: ``[N, heads·out_dim]`` (``concat``) or ``[N, out_dim]``.
    Attention weights are laid out as the kernel expects them: source, destination, edge
    (``3·heads·out_dim``); the edge term is ``lin_edge(edge_attr)``, as in ``GATConv``.
    No attention dropout (the kernel has none)."""

    def __init__(self, in_dim: int, out_dim: int, *, heads: int, edge_dim: int, concat: bool = True) -> None:
        super().__init__(**cugraph_init_kwargs(in_dim, out_dim, heads=heads, concat=concat))
        self.edge_dim = edge_dim
        self.lin_edge = nn.Linear(edge_dim, heads * out_dim, bias=False)
        self.att = nn.Parameter(torch.empty(3 * heads * out_dim))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if not hasattr(self, "lin_edge"):  # called by the parent's __init__ before ours has run
            return
        self.lin.reset_parameters()
        self.lin_edge.reset_parameters()
        glorot(self.att.view(3, self.heads, self.out_channels))
        zeros(self.bias)

    def forward(self, x: Tensor, edge_index: Tensor, edge_attr: Tensor) -> Tensor:  # type: ignore[override]
        ei, attr = sort_edges_by_destination(edge_index, edge_attr, x.size(0))
        out: Tensor = super().forward(**cugraph_forward_kwargs(x, ei, self.lin_edge(attr)))
        return out


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
    attention). ``use_cugraph`` picks the fused cugraph-ops layer when it can run, else logs once
    why not and returns the standard layer (``conv="gatv2"`` always uses the standard layer: the
    fused one is GAT v1)."""
    problem: str | None = None
    if use_cugraph:
        problem = fused_gat_problem() or (
            "conv=gatv2 has no fused edge-aware layer here" if conv == "gatv2" else None
        )
        if problem is None:
            return EdgeFeatureCuGraphGATConv(in_dim, out_dim, heads=heads, edge_dim=edge_dim, concat=concat)
    layer = GATv2Conv if conv == "gatv2" else GATConv
    if use_cugraph and problem is not None:
        _log_fallback(problem, f"{layer.__name__}(edge_dim={edge_dim})")
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
    return isinstance(layer, CuGraphGATConv)
