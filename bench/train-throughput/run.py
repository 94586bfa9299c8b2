"""Training throughput: graphs/s and the share of the training loop spent waiting on the DataLoader,
for DataLoader settings (workers, persistent workers, prefetch), interleaved and repeated.

Two modes:

- ``emulate`` (default): the model step is replaced by a fixed-duration wait that frees the CPU, as
  waiting on a GPU kernel does, so the loader's overlap with the "GPU" can be measured on any
  machine. Step times 2, 10 and 50 ms. Ground truth for the DataWaitCallback figure: the time the
  training process spent blocked in the loader's iterator (measured around ``iter``/``next``), and
  the known step time.
- ``model``: the real large GAT (on the GPU when there is one; on a CPU the model and the loader
  compete for the same cores, which says little about a GPU node).

Run (under the shared lock): cd python && uv run python ../bench/train-throughput/run.py [--reps 5]
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lightning as L
import torch


@dataclass(frozen=True)
class Variant:
    workers: int
    persistent: bool
    prefetch: int

    @property
    def label(self) -> str:
        if self.workers == 0:
            return "workers=0"
        extra = "persistent, prefetch 3" if self.persistent else "not persistent, prefetch 1"
        return f"workers={self.workers} ({extra})"


class TimedLoader:
    """Wraps a DataLoader; ``blocked`` is the time the training process spent in ``iter``/``next``."""

    def __init__(self, loader: Any, clock: LoopClock) -> None:
        self.loader = loader
        self.clock = clock
        self.blocked = 0.0

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self) -> Iterator[Any]:
        t = time.perf_counter()
        it = iter(self.loader)
        if self.clock.in_epoch:  # epoch 0's iterator is made before the loop starts (not waiting)
            self.blocked += time.perf_counter() - t
        while True:
            t = time.perf_counter()
            try:
                batch = next(it)
            except StopIteration:
                self.blocked += time.perf_counter() - t
                return
            self.blocked += time.perf_counter() - t
            yield batch


class EmulatedStep(L.LightningModule):
    """A training step that waits ``step_s`` without using the CPU (a GPU kernel's duration)."""

    def __init__(self, step_s: float) -> None:
        super().__init__()
        self.step_s = step_s
        self.w = torch.nn.Parameter(torch.zeros(1))

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        time.sleep(self.step_s)
        return self.w.sum() * 0.0

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.0)


class LoopClock(L.Callback):
    """Wall time of the training loops: epoch start to the end of its last training batch."""

    def __init__(self) -> None:
        self.loop = 0.0
        self.in_epoch = False
        self._start = 0.0
        self._end = 0.0

    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._start = self._end = time.perf_counter()
        self.in_epoch = True

    def on_train_batch_end(self, *args: Any, **kwargs: Any) -> None:
        self._end = time.perf_counter()

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.loop += self._end - self._start
        self.in_epoch = False


def one_run(
    train: Any,
    variant: Variant,
    *,
    mode: str,
    step_ms: float,
    epochs: int,
    batch_size: int,
    vocab_size: int,
    root: Path,
) -> dict[str, float]:
    from kdgat.config import build_config
    from kdgat.models import build_model
    from kdgat.training.callbacks import DataWaitCallback
    from kdgat.training.fit import make_trainer
    from kdgat.training.loader import make_loader
    from kdgat.training.modules import ClassifierModule

    cfg = build_config(
        "large",
        {
            "training.max_epochs": epochs,
            "training.patience": 0,
            "training.precision": "32" if mode == "emulate" else "16-mixed",
            "data.num_workers": variant.workers,
            "data.persistent_workers": variant.persistent,
            "data.prefetch_factor": variant.prefetch,
        },
    )
    torch.manual_seed(0)
    module: L.LightningModule
    if mode == "emulate":
        module = EmulatedStep(step_ms / 1000)
    else:
        module = ClassifierModule(build_model("gat", cfg, vocab_size=vocab_size), cfg.training.lr)  # type: ignore[arg-type]
    wait, clock = DataWaitCallback(), LoopClock()
    run_dir = Path(tempfile.mkdtemp(dir=root))
    trainer = make_trainer(cfg, run_dir, [wait, clock])
    loader = TimedLoader(make_loader(train, cfg, batch_size, shuffle=True), clock)
    trainer.fit(module, loader)
    steps = wait.steps
    not_step = (clock.loop - steps * step_ms / 1000) / clock.loop if mode == "emulate" else float("nan")
    return {
        "graphs_per_sec": wait.graphs / clock.loop,
        "callback_wait": wait.fraction,
        "truth_wait": loader.blocked / clock.loop,  # time blocked in the loader's iterator
        "not_step": not_step,  # all but the known step time: loader + Lightning's own per-step work
        "steps": steps,
        "loop_s": clock.loop,
    }


def summary(values: list[float]) -> tuple[float, float, float]:
    return statistics.median(values), min(values), max(values)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["emulate", "model"], default="emulate")
    ap.add_argument("--messages", type=int, default=120_000, help="synthetic CAN messages (100 per graph)")
    ap.add_argument("--graphs", type=int, default=640, help="training graphs used per run")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--step-ms", type=float, nargs="+", default=[2.0, 10.0, 50.0])
    ap.add_argument("--json", type=Path, help="also write the per-run figures here")
    ap.add_argument(
        "--persistent-only",
        action="store_true",
        help="only workers=0 and the persistent-worker variants (the pipeline's default)",
    )
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="kdgat-bench-"))
    os.environ.update(KD_GAT_DATA_ROOT=str(root / "raw"), KD_GAT_CACHE_ROOT=str(root / "cache"))

    import logging

    logging.getLogger("lightning").setLevel(logging.ERROR)
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    from kdgat.config import build_config
    from kdgat.data import load_graphs, preprocess_dataset, write_synthetic_dataset
    from kdgat.stages.common import graph_params

    write_synthetic_dataset(root / "raw" / "bench", n_messages=args.messages, seed=0)
    params = graph_params(build_config("large"))  # the graphs the large GAT of one_run reads
    preprocess_dataset("bench", params, workers=1)
    splits = load_graphs("bench", params)
    n = min(args.graphs, len(splits.train))
    train = splits.train.subset(torch.arange(n))
    cores = os.cpu_count() or 1
    variants = list(
        dict.fromkeys(
            [Variant(0, False, 1)]
            + [
                Variant(w, p, 3 if p else 1)
                for w in (1, max(1, cores - 1))
                for p in ((True,) if args.persistent_only else (False, True))
            ]
        )
    )
    steps = args.step_ms if args.mode == "emulate" else [float("nan")]
    print(
        f"mode {args.mode}; {n} training graphs, batch {args.batch_size}, {args.epochs} epochs, "
        f"{args.reps} interleaved reps; {cores} cores ({platform.processor() or platform.machine()}); "
        f"CUDA {torch.cuda.get_device_name() if torch.cuda.is_available() else 'none'}; "
        f"torch {torch.__version__}",
        flush=True,
    )
    results: dict[tuple[float, Variant], list[dict[str, float]]] = {}
    t0 = time.perf_counter()
    for rep in range(args.reps):
        for step in steps:
            for v in variants:
                r = one_run(
                    train,
                    v,
                    mode=args.mode,
                    step_ms=step,
                    epochs=args.epochs,
                    batch_size=args.batch_size,
                    vocab_size=splits.vocab_size,
                    root=root,
                )
                results.setdefault((step, v), []).append(r)
                # Each run as it ends, so a bench cut short (a device lease) still leaves figures.
                print(
                    f"    {'' if math.isnan(step) else f'{step:.0f}ms '}{v.label}: "
                    f"{r['graphs_per_sec']:.0f} graphs/s, wait {100 * r['callback_wait']:.1f}%",
                    flush=True,
                )
                gc.collect()  # the previous run's loader iterators go before the next run forks
        print(f"  rep {rep + 1}/{args.reps} done ({time.perf_counter() - t0:.0f}s)", flush=True)

    head = f"{'step':>6} {'loader':34} {'graphs/s median [min-max]':>28} {'ratio':>6} "
    head += f"{'wait% callback':>15} {'wait% truth':>12} {'diff pts':>8} {'not-step%':>10}"
    print(head)
    worst = 0.0
    for step in steps:
        base = statistics.median(r["graphs_per_sec"] for r in results[(step, variants[0])])
        for v in variants:
            rs = results[(step, v)]
            g = summary([r["graphs_per_sec"] for r in rs])
            cb = statistics.median(100 * r["callback_wait"] for r in rs)
            truth = statistics.median(100 * r["truth_wait"] for r in rs)
            diff = max(abs(100 * (r["callback_wait"] - r["truth_wait"])) for r in rs)
            not_step = statistics.median(100 * r["not_step"] for r in rs)
            worst = max(worst, diff)
            print(
                f"{step:>4.0f}ms {v.label:34} {g[0]:>9.0f} [{g[1]:.0f}-{g[2]:.0f}]".ljust(73)
                + f"{g[0] / base:>5.2f}x {cb:>14.1f} {truth:>12.1f} {diff:>8.1f} {not_step:>10.1f}"
            )
    print(f"largest |callback - truth| over all runs: {worst:.1f} points")
    if args.json:
        args.json.write_text(
            json.dumps(
                [{"step_ms": s, "variant": v.label, "runs": rs} for (s, v), rs in results.items()],
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
