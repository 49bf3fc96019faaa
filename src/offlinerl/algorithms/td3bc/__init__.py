"""TD3+BC (Fujimoto & Gu 2021): TD3 with a behaviour-cloning term in the actor loss; continuous actions."""

from offlinerl.algorithms.registry import register_algorithm
from offlinerl.algorithms.td3bc.config import TD3BCConfig
from offlinerl.algorithms.td3bc.learner import TD3BCLearner
from offlinerl.algorithms.td3bc.losses import actor_loss, critic_loss, smoothed_target_actions
from offlinerl.algorithms.td3bc.module import TD3BCRLModule

register_algorithm("td3bc", TD3BCConfig, TD3BCLearner, TD3BCRLModule)

__all__ = ["TD3BCConfig", "TD3BCLearner", "TD3BCRLModule", "actor_loss", "critic_loss", "smoothed_target_actions"]
