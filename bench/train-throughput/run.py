"""Training throughput: graphs/s and the share of step time spent waiting on the DataLoader, with
``num_workers=0`` (the original pipeline's setting) vs the tuned loader (workers = cores - 1,
persistent, prefetch 3). Same data, model and epochs in one run.

Run: cd python && uv run python ../bench/train-throughput/run.py [--messages N] [--epochs E]
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import torch


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=300_000)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=64)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="kdgat-bench-"))
    os.environ.update(KD_GAT_DATA_ROOT=str(root / "raw"), KD_GAT_CACHE_ROOT=str(root / "cache"))

    from kdgat.config import build_config, default_num_workers
    from kdgat.data import GraphParams, load_graphs, preprocess_dataset, write_synthetic_dataset
    from kdgat.models import build_model
    from kdgat.training.batch_size import BatchSizeChoice
    from kdgat.training.modules import ClassifierModule
    from kdgat.training.run import fit

    write_synthetic_dataset(root / "raw" / "bench", n_messages=args.messages, seed=0)
    preprocess_dataset("bench", GraphParams(), workers=1)
    splits = load_graphs("bench")
    tuned_workers = default_num_workers()
    print(f"data: {len(splits.train)} training graphs; cores {os.cpu_count()}; CUDA {torch.cuda.is_available()}")
    results = {}
    for label, workers in (("num_workers=0 (original)", 0), (f"tuned (workers={tuned_workers}, persistent, prefetch 3)", tuned_workers)):
        cfg = build_config(
            "large",
            {
                "training.max_epochs": args.epochs,
                "training.patience": 0,
                "data.num_workers": workers,
                "data.persistent_workers": True,
                "data.prefetch_factor": 3,
            },
        )
        torch.manual_seed(0)
        net = build_model("gat", cfg, vocab_size=splits.vocab_size)
        module = ClassifierModule(net, cfg.training.lr)  # type: ignore[arg-type]
        run_dir = root / "runs" / str(workers)
        run_dir.mkdir(parents=True)
        r = fit(module, cfg=cfg, run_dir=run_dir, train=splits.train, val=None, batch=BatchSizeChoice(args.batch_size, "fixed"))
        results[label] = r
        print(f"{label:45s} {r.graphs_per_sec:9.1f} graphs/s   data-wait {100 * r.data_wait_fraction:5.1f}%")
    (a, b) = results.values()
    print(f"ratio tuned/original: {b.graphs_per_sec / a.graphs_per_sec:.2f}x graphs/s")


if __name__ == "__main__":
    main()
