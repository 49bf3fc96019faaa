"""Conservative Q-learning (CQL), continuous (SAC-based) and discrete (double-DQN-based)."""

from offlinerl.algorithms.cql.config import CQLConfig
from offlinerl.algorithms.cql.learner import CQLLearner
from offlinerl.algorithms.cql.losses import cql_continuous_loss, cql_discrete_loss
from offlinerl.algorithms.cql.module import CQLRLModule
from offlinerl.algorithms.registry import register_algorithm

register_algorithm("cql", CQLConfig, CQLLearner, CQLRLModule)

__all__ = ["CQLConfig", "CQLLearner", "CQLRLModule", "cql_continuous_loss", "cql_discrete_loss"]
