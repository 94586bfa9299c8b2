"""The pipeline's stages (see :mod:`kdgat.stages.run`); their names and order come from the run
contract (:mod:`kdgat.contract`)."""

from kdgat.contract import STAGES
from kdgat.stages.common import StageInputError
from kdgat.stages.run import run_stage

__all__ = ["STAGES", "StageInputError", "run_stage"]
