"""MARWIL (advantage-weighted imitation with a learned value baseline), discrete and continuous."""

from offlinerl.algorithms.marwil.config import MARWILConfig
from offlinerl.algorithms.marwil.learner import MARWILLearner
from offlinerl.algorithms.marwil.losses import marwil_loss, update_sq_adv_norm
from offlinerl.algorithms.registry import register_algorithm
from offlinerl.core.default_module import DefaultRLModule

register_algorithm("marwil", MARWILConfig, MARWILLearner, DefaultRLModule)

__all__ = ["MARWILConfig", "MARWILLearner", "marwil_loss", "update_sq_adv_norm"]
