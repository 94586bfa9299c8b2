"""Test-only fault injection: a simulated CUDA out-of-memory error, so the OOM back-off of
:func:`kdgat.training.fit.fit` and the trial batch search (P3) run their GPU branches on a machine
without a GPU.

Off unless a test turns it on, with :func:`simulate_oom` in-process or, for a pipeline started as a
subprocess, ``HPC_TEST_OOM_ABOVE=<graphs>[:<after training forwards>]`` (read by
:func:`kdgat.cli.main`, which then calls :func:`install_from_env`). When on, every training forward
pass of a model with more than ``above`` graphs in its batch raises ``torch.OutOfMemoryError``
(once ``after`` training forward passes have run), as a GPU would. It is installed as the models'
:mod:`~kdgat.models.forward_check`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import Tensor

from kdgat.models import forward_check

ENV = "HPC_TEST_OOM_ABOVE"


@dataclass
class SimulatedOom:
    """The forward check: raises ``torch.OutOfMemoryError`` for a batch of more than ``above``
    graphs once ``after`` training forwards have run."""

    above: int
    after: int = 0
    forwards: int = 0

    def __call__(self, batch: Tensor) -> None:
        self.forwards += 1
        graphs = int(batch.max()) + 1 if batch.numel() else 0
        if graphs > self.above and self.forwards > self.after:
            raise torch.OutOfMemoryError(
                f"CUDA out of memory (simulated by {ENV}: a batch of {graphs} graphs > {self.above})"
            )


def _from_env() -> SimulatedOom | None:
    text = os.environ.get(ENV, "").strip()
    if not text:
        return None
    above, _, after = text.partition(":")
    try:
        return SimulatedOom(int(above), int(after or 0))
    except ValueError:
        raise ValueError(f"{ENV}={text!r}: expected <graphs>[:<forwards>], e.g. 16 or 16:5") from None


def install_from_env() -> None:
    """``HPC_TEST_OOM_ABOVE`` set: training forwards from now on run into the simulated OOM."""
    injection = _from_env()
    if injection is not None:
        forward_check.install(injection)


@contextmanager
def simulate_oom(above: int, *, after: int = 0) -> Iterator[None]:
    """Within the block, training forwards of batches with more than ``above`` graphs raise
    ``torch.OutOfMemoryError`` once ``after`` training forwards have run."""
    saved = forward_check.install(SimulatedOom(above, after))
    try:
        yield
    finally:
        forward_check.install(saved)
