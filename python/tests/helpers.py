"""What several test files share: the synthetic data set's name, the CLI command line run on it,
the metrics a stage leaves, and a small random graph. Fixtures live in conftest.py."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch_geometric.data import Data

from kdgat.cli import main
from kdgat.config import DataConfig
from kdgat.data.params import node_feature_count

DATASET = "synth"
# No loader workers and no early stopping: short, deterministic stage runs.
FAST = ["-O", "data.num_workers", "0", "-O", "training.patience", "0"]
# The stage most tests train: the VGAE autoencoder at scale small.
AUTOENCODER = ("autoencoder", "--model", "vgae", "--scale", "small")


def cli_args(run_root: Path, *args: str, dataset: str = DATASET) -> list[str]:
    """`python -m kdgat` arguments for ``args`` on a synthetic data set, writing under ``run_root``."""
    return [*args, "--dataset", dataset, "--run-root", str(run_root), *FAST]


def kdgat(run_root: Path, *args: str, dataset: str = DATASET) -> int:
    """Runs the CLI in process; returns its exit status."""
    return main(cli_args(run_root, *args, dataset=dataset))


def metrics(run_root: Path, name: str, dataset: str = DATASET) -> dict:
    """The metrics.json of run ``name`` (e.g. ``vgae_small_autoencoder``)."""
    return json.loads((run_root / dataset / name / "metrics.json").read_text())


def graph(n: int, e: int, seed: int = 0) -> Data:
    """A random graph of ``n`` nodes and ``e`` edges with the default feature set's node features
    and 11 edge features (the node's first feature an ID index below 5), labelled as an attack."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, node_feature_count(DataConfig().features), generator=g)
    x[:, 0] = torch.randint(0, 5, (n,), generator=g).float()
    return Data(
        x=x,
        edge_index=torch.randint(0, n, (2, e), generator=g),
        edge_attr=torch.randn(e, 11, generator=g),
        y=torch.tensor([1]),
    )
