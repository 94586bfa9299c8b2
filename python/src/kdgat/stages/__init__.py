"""The pipeline's stages, one module each, run by name through :func:`run_stage`
(:mod:`kdgat.stages.dispatch`); their names and order come from the run contract (:mod:`kdgat.contract`)."""

from kdgat.contract import STAGES
from kdgat.stages.common import StageInputError
from kdgat.stages.dispatch import run_stage

__all__ = ["STAGES", "StageInputError", "run_stage"]
