"""Soft actor-critic (Haarnoja et al. 2018): the online agent that makes the locomotion datasets; continuous actions."""

from offlinerl.algorithms.registry import register_algorithm
from offlinerl.algorithms.sac.config import SACConfig
from offlinerl.algorithms.sac.learner import SACLearner
from offlinerl.algorithms.sac.losses import actor_loss, critic_loss, sac_loss
from offlinerl.algorithms.sac.module import SACRLModule

register_algorithm("sac", SACConfig, SACLearner, SACRLModule)

__all__ = ["SACConfig", "SACLearner", "SACRLModule", "actor_loss", "critic_loss", "sac_loss"]
