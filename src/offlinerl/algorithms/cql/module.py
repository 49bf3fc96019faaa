"""``CQLRLModule``: the actor-critic module plus the temperatures CQL learns.

Continuous actions: policy, twin Q, target twin Q, ``log_alpha`` (entropy temperature)
and ``log_cql_alpha`` (Lagrange multiplier α', used when ``lagrangian``). Keeping the
temperatures in the module puts them in checkpoints and keeps DDP replicas identical.
Discrete actions: Q ensemble and its target only; acting is greedy on min_e Q.
"""

from __future__ import annotations

import gymnasium as gym
import torch
from torch import nn

from offlinerl.algorithms.actor_critic import ActorCriticRLModule

__all__ = ["CQLRLModule"]


class CQLRLModule(ActorCriticRLModule):
    def setup(self) -> None:
        discrete = isinstance(self.action_space, gym.spaces.Discrete)
        self.model_config.setdefault("policy", not discrete)
        super().setup()
        if not self.inference_only and self.has_policy and not self.discrete:
            self.log_alpha = nn.Parameter(torch.zeros(()))
            self.log_cql_alpha = nn.Parameter(torch.zeros(()))
