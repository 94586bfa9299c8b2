"""OOM back-off: after a CUDA out-of-memory error the fit halves its batch size and resumes from
the last epoch checkpoint, at most ``training.max_oom_retries`` times (every attempt is recorded in
``metrics.json`` ``fit_attempts``; the count in ``oom_backoffs``).

Across jobs: when the retries run out the back-off logs the run contract's give-up line with the
batch size (``CUDA out of memory at batch size 16, …``) and the stage fails; the runner's recovery
resubmits the job with ``KD_GAT_OOM_BATCH_SIZE`` (the contract's variable) set to half of it, and
:func:`start_batch_size` makes the next fit start there, resuming from ``checkpoints/last.ckpt``."""

from __future__ import annotations

import gc
import logging
import os
from pathlib import Path
from typing import Any

import torch

from kdgat.contract import OOM_BATCH_SIZE_ENV, OOM_GAVE_UP_LINE

log = logging.getLogger("kdgat.training")


def start_batch_size(chosen: int) -> int:
    """The batch size a fit starts from: ``chosen``, at most ``$KD_GAT_OOM_BATCH_SIZE`` (set by the
    runner when it resubmits a job whose back-off gave up). Raises ValueError naming the variable
    when it is not a positive integer."""
    text = os.environ.get(OOM_BATCH_SIZE_ENV, "").strip()
    if not text:
        return chosen
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"{OOM_BATCH_SIZE_ENV}={text!r}: expected a positive batch size, e.g. 16")
    cap = int(text)
    if cap < chosen:
        log.warning(
            "batch size %d from %s (an earlier job ran out of GPU memory), not %d",
            cap,
            OOM_BATCH_SIZE_ENV,
            chosen,
        )
    return min(chosen, cap)


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
            # The runner reads the batch size from this line (the contract's give-up line).
            log.error(
                "%s %d, epoch %d: no retries left (training.max_oom_retries=%d)",
                OOM_GAVE_UP_LINE,
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
