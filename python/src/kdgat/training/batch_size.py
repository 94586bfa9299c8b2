"""P3: the batch size, chosen as configured (fixed), estimated (heuristic) or measured (trial).

Trial mode runs real forward + backward passes on batches of real sample graphs and searches like
Lightning's ``BatchSizeFinder(mode="binsearch")``: double until a batch does not fit, then bisect.
On a GPU "does not fit" is ``torch.OutOfMemoryError`` (``probe="oom"``); on a CPU it is the
activation memory kept for backward (measured exactly with autograd's saved-tensor hooks) exceeding
the configured budget (``probe="budget"``), so the same search logic runs, and is tested, on machines
without a GPU. The ``oom`` probe itself is tested on a CPU with a simulated OOM
(:mod:`kdgat.testing.faults`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn
from torch_geometric.data import Batch, Data

log = logging.getLogger("kdgat.training")


@dataclass(frozen=True)
class BatchSizeChoice:
    batch_size: int
    mode: str
    max_fit: int | None = None
    trials: int = 0


def binsearch(fits: Callable[[int], bool], *, start: int = 2, limit: int = 65536) -> tuple[int, int]:
    """Largest ``b`` with ``fits(b)`` (0 if none), by doubling then bisecting; returns ``(b, trials)``."""
    trials = 0
    low, high = 0, None
    b = start
    while b <= limit:
        trials += 1
        if fits(b):
            low = b
            b *= 2
        else:
            high = b
            break
    if high is None:
        return low, trials
    while high - low > 1:
        mid = (low + high) // 2
        trials += 1
        if fits(mid):
            low = mid
        else:
            high = mid
    return low, trials


def _saved_bytes(model: nn.Module, batch: Batch, loss_fn: Callable[[nn.Module, Batch], torch.Tensor]) -> int:
    """Bytes of the tensors autograd keeps for backward in one forward pass (activation memory)."""
    total = 0

    def pack(t: torch.Tensor) -> torch.Tensor:
        nonlocal total
        total += t.numel() * t.element_size()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = loss_fn(model, batch)
    loss.backward()
    model.zero_grad(set_to_none=True)
    return total


def trial_batch_size(
    model: nn.Module,
    samples: Sequence[Data],
    loss_fn: Callable[[nn.Module, Batch], torch.Tensor],
    *,
    device: torch.device,
    budget_mb: int,
    safety: float = 0.85,
    max_batch: int = 8192,
    probe: Literal["oom", "budget"] | None = None,
) -> BatchSizeChoice:
    """``probe``: how "does not fit" is decided; default ``oom`` on CUDA, ``budget`` elsewhere."""
    probe = probe or ("oom" if device.type == "cuda" else "budget")
    model = model.to(device).train()
    state_bytes = sum(p.numel() * p.element_size() for p in model.parameters()) * 4  # params, grads, Adam m+v

    def batch_of(b: int) -> Batch:
        graphs = [samples[i % len(samples)] for i in range(b)]
        return Batch.from_data_list(graphs).to(device)

    def fits(b: int) -> bool:
        if probe == "oom":
            try:
                loss = loss_fn(model, batch_of(b))
                loss.backward()
                return True
            except torch.OutOfMemoryError:
                return False
            finally:
                model.zero_grad(set_to_none=True)
                if device.type == "cuda":
                    torch.cuda.empty_cache()
        return state_bytes + _saved_bytes(model, batch_of(b), loss_fn) <= budget_mb * 2**20

    max_fit, trials = binsearch(fits, start=2, limit=max_batch)
    if max_fit == 0:
        if probe == "oom":
            raise RuntimeError(f"not even a batch of 2 graphs fits in the memory of {device}")
        raise RuntimeError(
            f"not even a batch of 2 graphs fits in {budget_mb} MB: raise training.memory_budget_mb"
        )
    safe = max(1, int(max_fit * safety))
    log.info("Trial batch size: max_fit=%d, safe=%d (probe: %s)", max_fit, safe, probe)
    return BatchSizeChoice(safe, "trial", max_fit=max_fit, trials=trials)


def heuristic_batch_size(
    model: nn.Module, samples: Sequence[Data], *, budget_mb: int, safety: float
) -> BatchSizeChoice:
    """Activation estimate from mean graph size and layer widths (no passes run)."""
    nodes = sum(int(d.num_nodes or 0) for d in samples) / max(1, len(samples))
    edges = sum(int(d.edge_index.shape[1]) for d in samples) / max(1, len(samples))
    width = sum(p.shape[0] for p in model.parameters() if p.dim() == 2)
    per_graph = 4 * 3 * (nodes * width + edges * width / 8)  # fwd + bwd + optimizer slack, float32
    b = int(budget_mb * 2**20 * safety / max(per_graph, 1))
    return BatchSizeChoice(max(8, min(b, 4096)), "heuristic")
