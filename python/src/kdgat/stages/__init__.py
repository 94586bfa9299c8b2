"""The pipeline's stages (see :mod:`kdgat.stages.run`)."""

from kdgat.stages.common import StageInputError
from kdgat.stages.run import run_stage

STAGES = ("preprocess", "autoencoder", "curriculum", "distillation", "evaluation")

__all__ = ["STAGES", "StageInputError", "run_stage"]
