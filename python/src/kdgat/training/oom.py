"""OOM back-off: after a CUDA out-of-memory error the fit halves its batch size and resumes from
the last epoch checkpoint, at most ``training.max_oom_retries`` times (every attempt is recorded in
``metrics.json`` ``fit_attempts``; the count in ``oom_backoffs``)."""

from __future__ import annotations

import gc
import logging
from pathlib import Path
from typing import Any

import torch

log = logging.getLogger("kdgat.training")


class OomBackoff:
    def __init__(self, batch_size: int, max_retries: int) -> None:
        self.batch_size = batch_size
        self.max_retries = max_retries

    def attempts(self) -> range:
        """The fit attempts: the first, then one per retry."""
        return range(self.max_retries + 1)

    def after_oom(
        self,
        error: torch.OutOfMemoryError,
        *,
        attempt: int,
        record: dict[str, Any],
        epoch: int,
        global_step: int,
        resume: Path,
    ) -> bool:
        """Records the OOM in the attempt's ``record``; True with the batch size halved when another
        attempt is left, False (the caller re-raises) when not."""
        reason = str(error).splitlines()[0][:300]
        record.update(epoch=epoch, global_step=global_step, outcome="oom", reason=reason)
        if attempt == self.max_retries or self.batch_size <= 1:
            log.error(
                "CUDA out of memory at batch size %d, epoch %d: no retries left "
                "(training.max_oom_retries=%d)",
                self.batch_size,
                epoch,
                self.max_retries,
            )
            return False
        self.batch_size = max(1, self.batch_size // 2)
        log.warning(
            "CUDA out of memory at epoch %d (step %d): retrying with batch size %d from %s",
            epoch,
            global_step,
            self.batch_size,
            resume if resume.exists() else "the start",
        )
        return True

    @staticmethod
    def free_memory() -> None:
        """What the failed attempt held (call after dropping its trainer)."""
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
