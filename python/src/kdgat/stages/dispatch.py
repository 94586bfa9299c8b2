"""Runs a stage by name: ``python -m kdgat <stage>`` and every trial of a study come through here.

preprocess   raw CAN files -> graph cache (:mod:`kdgat.stages.preprocess`)
autoencoder  VGAE on benign training windows (:mod:`kdgat.stages.autoencoder`)
curriculum   GAT classifier trained easy -> hard (:mod:`kdgat.stages.curriculum`)
distillation small GAT student from the large GAT teacher (:mod:`kdgat.stages.distillation`)
evaluation   scores overall and per attack type (:mod:`kdgat.stages.evaluation`)

Each reads its inputs from the run-dir layout (``<run_root>/<dataset>/<model>_<scale>_<stage>/``) and
writes ``metrics.json`` there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import lightning as L

from kdgat.config import PipelineConfig
from kdgat.stages import autoencoder, curriculum, distillation, evaluation, preprocess
from kdgat.stages.context import StageContext
from kdgat.tracking.session import stage_tracking

#: One entry per stage of the run contract (``kdgat.contract.STAGES``).
RUNNERS: dict[str, Callable[[StageContext], dict[str, Any]]] = {
    "preprocess": preprocess.run,
    "autoencoder": autoencoder.run,
    "curriculum": curriculum.run,
    "distillation": distillation.run,
    "evaluation": evaluation.run,
}


def run_stage(
    stage: str, cfg: PipelineConfig, *, dataset: str, model: str, scale: str, run_root: str | None
) -> dict[str, Any]:
    if stage not in RUNNERS:
        raise ValueError(f"stage {stage!r} is unknown")
    ctx = StageContext(stage=stage, cfg=cfg, dataset=dataset, model=model, scale=scale, run_root=run_root)
    ctx.run_dir.mkdir(parents=True, exist_ok=True)
    L.seed_everything(cfg.training.seed, workers=True, verbose=False)
    # TensorBoard always, MLflow and W&B when asked (kdgat.tracking): opened by the stage's first
    # fit, ended here with the stage, its metrics.json logged.
    with stage_tracking(cfg, ctx.run_dir, ctx.identity()):
        return RUNNERS[stage](ctx)
