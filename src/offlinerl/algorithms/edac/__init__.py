"""EDAC and SAC-N (An et al. 2021, "Uncertainty-Based Offline RL with Diversified Q-Ensemble"): SAC with a large
Q ensemble whose minimum is the pessimism, and (EDAC) a term that diversifies the members' action gradients;
continuous actions. SAC-N is ``eta: 0``."""

from offlinerl.algorithms.edac.config import EDACConfig
from offlinerl.algorithms.edac.learner import EDACLearner
from offlinerl.algorithms.edac.losses import diversity_loss, edac_loss
from offlinerl.algorithms.edac.module import EDACRLModule
from offlinerl.algorithms.registry import register_algorithm

register_algorithm("edac", EDACConfig, EDACLearner, EDACRLModule)

__all__ = ["EDACConfig", "EDACLearner", "EDACRLModule", "diversity_loss", "edac_loss"]
