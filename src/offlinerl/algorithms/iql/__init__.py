"""Implicit Q-learning (IQL), continuous and discrete actions."""

from offlinerl.algorithms.iql.config import IQLConfig
from offlinerl.algorithms.iql.learner import IQLLearner
from offlinerl.algorithms.iql.losses import iql_loss
from offlinerl.algorithms.iql.module import IQLRLModule
from offlinerl.algorithms.registry import register_algorithm

register_algorithm("iql", IQLConfig, IQLLearner, IQLRLModule)

__all__ = ["IQLConfig", "IQLLearner", "IQLRLModule", "iql_loss"]
