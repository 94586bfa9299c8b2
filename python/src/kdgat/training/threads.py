"""Compute threads that match the allocation.

PyTorch starts one intra-op (OpenMP) thread per core of the machine, not per core of the job. Where
the scheduler does not pin a job to its cores (SLURM with ``TaskPlugin=task/none``, the local
scheduler, a shared node), two 1-core jobs on a 2-core node then run four spinning threads, and
small-tensor GNN steps slow down many times over. Under an allocation that names its cores
(``SLURM_CPUS_PER_TASK``) the pipeline uses that many threads, unless the user chose with
``OMP_NUM_THREADS``.
"""

from __future__ import annotations

import logging
import os

import torch

from kdgat.config import slurm_cpus

log = logging.getLogger(__name__)


def match_threads_to_allocation() -> int | None:
    """Set torch's intra-op threads to the allocation's cores; returns the number set, or None
    when nothing was changed (no allocation, or ``OMP_NUM_THREADS`` set)."""
    if os.environ.get("OMP_NUM_THREADS"):
        return None
    cpus = slurm_cpus()
    if cpus is None:
        return None
    torch.set_num_threads(cpus)
    log.info("compute threads: %d (SLURM_CPUS_PER_TASK; set OMP_NUM_THREADS to choose)", cpus)
    return cpus
