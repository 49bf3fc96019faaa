"""Behaviour cloning (BC), discrete and continuous."""

from offlinerl.algorithms.bc.config import BCConfig
from offlinerl.algorithms.bc.learner import BCLearner
from offlinerl.algorithms.bc.losses import bc_loss
from offlinerl.algorithms.registry import register_algorithm
from offlinerl.core.default_module import DefaultRLModule

register_algorithm("bc", BCConfig, BCLearner, DefaultRLModule)

__all__ = ["BCConfig", "BCLearner", "bc_loss"]
