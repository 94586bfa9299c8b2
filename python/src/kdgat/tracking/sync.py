"""Uploads the W&B runs a job wrote offline (compute nodes have no network) from where there is
one: ``python -m kdgat tracking-sync --run-dir DIR`` (the runner's ``runner sync`` calls it). It
runs W&B's own ``wandb sync`` on every offline run below ``DIR``; the files of one run (a stage
and its requeued lives share one id) are uploaded as that one run, in the order they started."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

#: Where W&B leaves an offline run: ``<stage run dir>/wandb/offline-run-<time>-<id>/``.
OFFLINE_GLOB = "offline-run-*"


def offline_runs(run_dir: Path) -> list[Path]:
    """The offline W&B run directories below ``run_dir``, oldest first (by their names' time)."""
    found = [p for p in run_dir.rglob(OFFLINE_GLOB) if p.is_dir() and p.parent.name == "wandb"]
    return sorted(found, key=lambda p: (p.name.split("-")[2] if p.name.count("-") >= 3 else "", str(p)))


def wandb_sync(run_dir: Path, *, dry_run: bool = False, extra_args: tuple[str, ...] = ()) -> int:
    """Runs ``wandb sync`` on the offline runs below ``run_dir``; returns its exit status (0 when
    there is nothing to sync). ``dry_run``: W&B lists what it would upload and uploads nothing."""
    runs = offline_runs(run_dir)
    if not runs:
        print(f"kdgat: no offline W&B runs below {run_dir}")
        return 0
    cmd = [sys.executable, "-m", "wandb", "sync", *(["--dry-run"] if dry_run else []), *extra_args]
    cmd += [str(p) for p in runs]
    print(f"kdgat: wandb sync of {len(runs)} offline run director{'y' if len(runs) == 1 else 'ies'}")
    return subprocess.run(cmd, check=False, stdin=subprocess.DEVNULL).returncode
