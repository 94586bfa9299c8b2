"""Test-only fault injection: a simulated CUDA out-of-memory error, so the OOM back-off of
:func:`kdgat.training.fit.fit` and the trial batch search (P3) run their GPU branches on a machine
without a GPU.

Off unless a test turns it on, with :func:`simulate_oom` in-process or, for a pipeline started as a
subprocess, ``KDGAT_TEST_OOM_ABOVE=<graphs>[:<after training forwards>]``. When on, every training
forward pass of a model with more than ``above`` graphs in its batch raises
``torch.OutOfMemoryError`` (once ``after`` training forward passes have run), as a GPU would.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import Tensor

ENV = "KDGAT_TEST_OOM_ABOVE"


@dataclass
class _Injection:
    above: int
    after: int = 0
    forwards: int = 0


def _from_env() -> _Injection | None:
    text = os.environ.get(ENV, "").strip()
    if not text:
        return None
    above, _, after = text.partition(":")
    try:
        return _Injection(int(above), int(after or 0))
    except ValueError:
        raise ValueError(f"{ENV}={text!r}: expected <graphs>[:<forwards>], e.g. 16 or 16:5") from None


_active: _Injection | None = _from_env()


@contextmanager
def simulate_oom(above: int, *, after: int = 0) -> Iterator[None]:
    """Within the block, training forwards of batches with more than ``above`` graphs raise
    ``torch.OutOfMemoryError`` once ``after`` training forwards have run."""
    global _active
    saved, _active = _active, _Injection(above, after)
    try:
        yield
    finally:
        _active = saved


def active() -> bool:
    return _active is not None


def check_forward(batch: Tensor, *, training: bool) -> None:
    """Called at the start of a model's forward with its ``batch`` vector (graph of each node)."""
    inj = _active
    if inj is None or not training:
        return
    inj.forwards += 1
    graphs = int(batch.max()) + 1 if batch.numel() else 0
    if graphs > inj.above and inj.forwards > inj.after:
        raise torch.OutOfMemoryError(
            f"CUDA out of memory (simulated by {ENV}: a batch of {graphs} graphs > {inj.above})"
        )
