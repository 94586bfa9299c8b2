"""What every stage gets: the config, the run's identity (dataset, model, scale, stage), the run
root it reads earlier stages' outputs from and its own run dir,
``<run_root>/<dataset>/<model>_<scale>_<stage>/``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kdgat import paths
from kdgat.config import PipelineConfig


@dataclass(frozen=True)
class StageContext:
    stage: str
    cfg: PipelineConfig
    dataset: str
    model: str
    scale: str
    #: As given (``--run-root``), None for ``$KD_GAT_RUN_ROOT`` or the default.
    run_root: str | None

    @property
    def run_dir(self) -> Path:
        return paths.run_dir(self.run_root, self.dataset, self.model, self.scale, self.stage)

    def identity(self) -> dict[str, Any]:
        """The first keys of ``metrics.json``."""
        return {"stage": self.stage, "model": self.model, "scale": self.scale, "dataset": self.dataset}
