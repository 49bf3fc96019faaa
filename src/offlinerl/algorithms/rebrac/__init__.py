"""ReBRAC (Tarasov et al. 2023): TD3+BC with decoupled actor and critic BC penalties, LayerNorm critics,
deeper nets and larger batches; continuous actions."""

from offlinerl.algorithms.rebrac.config import ReBRACConfig
from offlinerl.algorithms.rebrac.learner import ReBRACLearner
from offlinerl.algorithms.rebrac.losses import actor_loss, bc_penalty, critic_loss
from offlinerl.algorithms.rebrac.module import ReBRACRLModule
from offlinerl.algorithms.registry import register_algorithm

register_algorithm("rebrac", ReBRACConfig, ReBRACLearner, ReBRACRLModule)

__all__ = ["ReBRACConfig", "ReBRACLearner", "ReBRACRLModule", "actor_loss", "bc_penalty", "critic_loss"]
