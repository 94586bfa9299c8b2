"""The GPU paths, run on a CPU: the fused layer's calls against the installed PyG class, OOM back-off
and the trial search's OOM branch by fault injection, precision choices, the memory snapshot.
Tests that need a real GPU are marked ``gpu`` (skipped here, with the reason; scripts/gpu-check.sh)."""

import inspect
import logging
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch_geometric.data import Batch
from torch_geometric.nn import CuGraphGATConv, GATConv
from torch_geometric.nn.conv.cugraph import base as cugraph_base
from torch_geometric.nn.conv.cugraph import gat_conv as cugraph_gat_conv
from torch_geometric.utils import scatter, softmax

from kdgat.config import build_config
from kdgat.data import load_graphs
from kdgat.models import GATWithJK, build_model, layers
from kdgat.models.layers import EdgeFeatureCuGraphGATConv
from kdgat.stages.common import graph_params
from kdgat.testing import faults
from kdgat.training.batch_size import BatchSizeChoice
from kdgat.training.fit import fit, precision_for
from kdgat.training.modules import VGAEModule

from helpers import AUTOENCODER, DATASET, graph, kdgat, metrics


@pytest.fixture
def fused_constructible(monkeypatch: pytest.MonkeyPatch) -> None:
    """Lets the real CuGraphGATConv constructor run here: its only check is that pylibcugraphops
    was importable, and ``make_gat_conv`` picks the fused layer."""
    monkeypatch.setattr(cugraph_base, "HAS_PYLIBCUGRAPHOPS", True)
    monkeypatch.setattr(layers, "fused_gat_problem", lambda: None)


def test_the_old_call_does_not_bind_to_the_installed_cugraph_gat_conv() -> None:
    # What models/layers.py used to pass: PyG's CuGraphGATConv has no edge_dim (the P4 bug).
    with pytest.raises(TypeError, match="edge_dim"):
        inspect.signature(CuGraphGATConv.__init__).bind(None, 27, 48, heads=8, concat=True, edge_dim=11)


def test_model_calls_bind_to_the_installed_cugraph_gat_conv(
    fused_constructible: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Builds the large GAT with use_cugraph through the real CuGraphGATConv constructor, and binds
    every call its forward makes to CuGraphGATConv.forward's signature from the installed PyG."""
    forward_sig = inspect.signature(CuGraphGATConv.forward)
    calls: list[inspect.BoundArguments] = []

    def spy(self: CuGraphGATConv, *args: object, **kwargs: object) -> torch.Tensor:
        bound = forward_sig.bind(self, *args, **kwargs)
        calls.append(bound)
        x = bound.arguments["x"]
        assert isinstance(x, torch.Tensor)
        return torch.zeros(x.size(0), self.heads * self.out_channels)

    monkeypatch.setattr(CuGraphGATConv, "forward", spy)
    cfg = build_config("large", {"gat.use_cugraph": True})
    model = build_model("gat", cfg, vocab_size=8)
    assert isinstance(model, GATWithJK)
    assert all(isinstance(c, EdgeFeatureCuGraphGATConv) for c in model.convs)
    b = Batch.from_data_list([graph(7, 20), graph(7, 20, seed=1)])
    model(b.x, b.edge_index, b.edge_attr, b.batch)
    assert len(calls) == cfg.gat.layers
    for bound, conv in zip(calls, model.convs, strict=True):
        ei, attr = bound.arguments["edge_index"], bound.arguments["edge_attr"]
        assert type(ei).__name__ == "EdgeIndex" and ei.is_sorted_by_col
        # The edge features reach the kernel projected to heads * C (the attention vector's third part).
        assert attr.shape == (b.edge_index.size(1), conv.heads * conv.out_channels)
        assert conv.att.numel() == 3 * conv.heads * conv.out_channels


def _reference_mha_gat_n2n(feat, att, graph, heads, activation, slope, concat, edge_feat=None):  # type: ignore[no-untyped-def]
    """The kernel as pylibcugraphops documents mha_gat_n2n: attention weights [src | dst | edge]
    (dim_w = 2 * dim_in + dim_in_edges), LeakyReLU, softmax over each destination's in-edges."""
    assert activation == "LeakyReLU"
    src, dst = graph.as_tensor()
    n, c = feat.size(0), feat.size(1) // heads
    h, a = feat.view(n, heads, c), att.view(-1, heads, c)
    score = (h[src] * a[0]).sum(-1) + (h[dst] * a[1]).sum(-1)
    if edge_feat is not None:
        score = score + (edge_feat.view(-1, heads, c) * a[2]).sum(-1)
    alpha = softmax(F.leaky_relu(score, slope), dst, num_nodes=n)
    out = scatter(h[src] * alpha.unsqueeze(-1), dst, dim=0, dim_size=n, reduce="sum")
    return out.reshape(n, heads * c) if concat else out.mean(1)


def test_fused_layer_matches_gat_conv_with_edge_dim_on_a_reference_kernel(
    fused_constructible: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the cugraph-ops kernel replaced by its documented contract, the fused layer computes
    GATConv(edge_dim=11): edge features projected, weighted by the third part of the attention
    vector, and kept with their edges through the sort into CSC order."""
    monkeypatch.setattr(cugraph_gat_conv, "GATConvAgg", _reference_mha_gat_n2n, raising=False)
    monkeypatch.setattr(cugraph_base.CuGraphModule, "get_cugraph", lambda self, ei, m=None: ei)
    torch.manual_seed(0)
    ref = GATConv(9, 4, heads=3, edge_dim=11, add_self_loops=False)
    fused = EdgeFeatureCuGraphGATConv(9, 4, heads=3, edge_dim=11)
    with torch.no_grad():
        fused.lin.weight.copy_(ref.lin.weight)
        fused.lin_edge.weight.copy_(ref.lin_edge.weight)
        fused.att.copy_(torch.cat([ref.att_src.flatten(), ref.att_dst.flatten(), ref.att_edge.flatten()]))
        fused.bias.copy_(ref.bias)
    g = graph(9, 30)
    g.x = torch.randn(9, 9)
    expected = ref(g.x, g.edge_index, edge_attr=g.edge_attr)
    assert torch.allclose(fused(g.x, g.edge_index, g.edge_attr), expected, atol=1e-5)
    shuffled = torch.randperm(g.edge_index.size(1))  # edge order must not matter
    out = fused(g.x, g.edge_index[:, shuffled], g.edge_attr[shuffled])
    assert torch.allclose(out, expected, atol=1e-5)


def test_use_cugraph_falls_back_once_saying_why(caplog: pytest.LogCaptureFixture) -> None:
    layers._log_fallback.cache_clear()
    with caplog.at_level(logging.WARNING, logger="kdgat.models"):
        a = layers.make_gat_conv(8, 4, heads=2, edge_dim=11, use_cugraph=True)
        b = layers.make_gat_conv(8, 4, heads=2, edge_dim=11, use_cugraph=True)
    assert isinstance(a, GATConv) and isinstance(b, GATConv) and a.lin_edge is not None
    assert len(caplog.records) == 1
    msg = caplog.records[0].message
    assert msg.startswith("use_cugraph=True but CuGraphGATConv cannot run here")
    assert "pylibcugraphops is not installed" in msg and "GATConv(edge_dim=11)" in msg


def test_oom_backs_off_resumes_from_the_checkpoint_and_records_every_attempt(run_root: Path) -> None:
    benign = int((load_graphs(DATASET, graph_params(build_config("small"))).train.y == 0).sum())
    steps_per_epoch = math.ceil(benign / 32)
    # Batches of 32 fit through epoch 0 (its checkpoint is saved), then "run out of memory" in epoch 1.
    with faults.simulate_oom(above=16, after=steps_per_epoch + 1):
        rc = kdgat(
            run_root,
            *AUTOENCODER,
            *("-O", "training.max_epochs", "3", "-O", "training.batch_size", "32"),
        )
    assert rc == 0
    m = metrics(run_root, "vgae_small_autoencoder")
    assert m["batch_size"] == 16 and m["epochs"] == 3 and m["oom_backoffs"] == 1
    first, second = m["fit_attempts"]
    assert first["batch_size"] == 32 and first["epoch"] == 1 and first["outcome"] == "oom"
    assert "simulated" in first["reason"] and "resumed_from" not in first
    assert second["batch_size"] == 16 and second["outcome"] == "complete" and second["epoch"] == 3
    assert second["resumed_from"].endswith("checkpoints/last.ckpt")
    # 16-mixed without CUDA: the explicit fallback, recorded.
    assert m["precision"]["requested"] == "16-mixed" and m["precision"]["used"] == "32-true"
    assert "needs a CUDA device" in m["precision"]["reason"]


def test_oom_that_persists_fails_after_the_configured_retries(run_root: Path) -> None:
    with faults.simulate_oom(above=1), pytest.raises(torch.OutOfMemoryError):
        kdgat(
            run_root,
            *AUTOENCODER,
            *("-O", "training.max_epochs", "1", "-O", "training.max_oom_retries", "1"),
        )


def test_trial_search_finds_the_oom_boundary_on_its_gpu_branch(run_root: Path) -> None:
    with faults.simulate_oom(above=40):
        rc = kdgat(
            run_root,
            *AUTOENCODER,
            *("-O", "training.max_epochs", "1"),
            *("-O", "training.memory_estimation", "trial"),
        )
    assert rc == 0
    m = metrics(run_root, "vgae_small_autoencoder")
    assert m["batch_size_trial"]["max_fit"] == 40 and m["batch_size"] == 34  # 0.85 safety
    assert m["oom_backoffs"] == 0


def test_16_mixed_without_cuda_is_an_explicit_choice(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="kdgat.training"):
        to32 = precision_for(build_config("small"))
        tobf16 = precision_for(build_config("small", {"training.precision_fallback": "bf16-mixed"}))
    assert (to32.used, tobf16.used) == ("32-true", "bf16-mixed")
    assert caplog.messages[0] == (
        "precision 16-mixed needs a GPU: training in 32-bit on CPU (training.precision_fallback=32)"
    )
    assert "training in bf16-mixed on CPU (training.precision_fallback=bf16-mixed)" in caplog.messages[1]


def test_bf16_mixed_trains_on_cpu_and_memory_snapshot_says_nothing_to_record(
    pipeline_env: dict[str, str], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    splits = load_graphs(DATASET, graph_params(build_config("small")))
    cfg = build_config(
        "small",
        {
            "training.precision": "bf16-mixed",
            "training.max_epochs": 1,
            "training.memory_snapshot": True,
            "data.num_workers": 0,
        },
    )
    net = build_model("vgae", cfg, vocab_size=splits.vocab_size)
    dtypes: set[torch.dtype] = set()
    net.z_mean.register_forward_hook(lambda m, i, o: dtypes.add(o.dtype))  # type: ignore[union-attr]
    train = splits.train.subset(torch.arange(64))
    with caplog.at_level(logging.WARNING, logger="kdgat.training"):
        r = fit(
            VGAEModule(net, 1e-3),  # type: ignore[arg-type]
            cfg=cfg,
            run_dir=tmp_path,
            train=train,
            val=None,
            batch=BatchSizeChoice(32, "fixed"),
        )
    assert r.precision.used == "bf16-mixed" and r.epochs == 1
    assert torch.bfloat16 in dtypes, "autocast must run the linear layers in bfloat16"
    assert all(p.dtype == torch.float32 for p in net.parameters()), "weights stay float32"
    assert r.memory_snapshot is None and not (tmp_path / "memory_snapshot.pickle").exists()
    assert any("no CUDA allocator history to record" in m for m in caplog.messages)


@pytest.mark.gpu
def test_memory_snapshot_is_written_on_a_gpu(pipeline_env: dict[str, str], tmp_path: Path) -> None:
    splits = load_graphs(DATASET, graph_params(build_config("small")))
    cfg = build_config(
        "small", {"training.max_epochs": 1, "training.memory_snapshot": True, "data.num_workers": 0}
    )
    net = build_model("vgae", cfg, vocab_size=splits.vocab_size)
    r = fit(
        VGAEModule(net, 1e-3),  # type: ignore[arg-type]
        cfg=cfg,
        run_dir=tmp_path,
        train=splits.train.subset(torch.arange(64)),
        val=None,
        batch=BatchSizeChoice(32, "fixed"),
    )
    snap = tmp_path / "memory_snapshot.pickle"
    assert r.memory_snapshot == str(snap) and snap.stat().st_size > 0
    assert r.precision.used == "16-mixed" and r.peak_gpu_mem_mb is not None


@pytest.mark.gpu
def test_fused_layer_matches_gat_conv_on_the_gpu() -> None:
    if layers.fused_gat_problem() is not None:
        pytest.skip(f"fused layer cannot run: {layers.fused_gat_problem()}")
    torch.manual_seed(0)
    ref = GATConv(9, 4, heads=3, edge_dim=11, add_self_loops=False).cuda()
    fused = EdgeFeatureCuGraphGATConv(9, 4, heads=3, edge_dim=11).cuda()
    with torch.no_grad():
        fused.lin.weight.copy_(ref.lin.weight)
        fused.lin_edge.weight.copy_(ref.lin_edge.weight)
        fused.att.copy_(torch.cat([ref.att_src.flatten(), ref.att_dst.flatten(), ref.att_edge.flatten()]))
        fused.bias.copy_(ref.bias)
    g = graph(9, 30).cuda()
    x = torch.randn(9, 9, device="cuda")
    assert torch.allclose(fused(x, g.edge_index, g.edge_attr), ref(x, g.edge_index, g.edge_attr), atol=1e-3)


def test_loader_workers_are_forked_beside_cuda_and_read_every_graph(
    pipeline_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Spawned workers re-imported torch and PyG each: on an H200 that made one epoch 15-24x slower
    than workers=0 (bench/train-throughput/README.md). With CUDA present the workers are forked, and
    they still hand over every graph of the memory-mapped cache."""
    from kdgat.training.loader import make_loader

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    cfg = build_config("small", {"data.num_workers": 1, "data.pin_memory": False})
    train = load_graphs(DATASET, graph_params(cfg)).train
    loader = make_loader(train, cfg, 16, shuffle=False)
    assert loader.num_workers == 1
    assert loader.multiprocessing_context is None  # the platform default: fork on Linux
    seen = sum(batch.num_graphs for batch in loader)
    assert seen == len(train)
