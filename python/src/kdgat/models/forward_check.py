"""The check a model runs at the start of every training forward, given its ``batch`` vector (the
graph of each node). None is installed in production, so the call is a no-op; a test installs one:
:mod:`kdgat.testing.faults` simulates a CUDA out-of-memory error this way, so that the OOM back-off
of :func:`kdgat.training.fit.fit` and the trial batch search run their GPU branches on a machine
without a GPU.
"""

from __future__ import annotations

from collections.abc import Callable

from torch import Tensor

#: Called with a training forward's ``batch`` vector; raises to fail that forward.
ForwardCheck = Callable[[Tensor], None]

_check: ForwardCheck | None = None


def install(check: ForwardCheck | None) -> ForwardCheck | None:
    """Make ``check`` the one training forwards run (``None``: none); returns the one it replaces."""
    global _check
    previous, _check = _check, check
    return previous


def installed() -> bool:
    return _check is not None


def check_forward(batch: Tensor, *, training: bool) -> None:
    """Called at the start of a model's forward: runs the installed check, if any, when training."""
    if _check is not None and training:
        _check(batch)
