"""``SACRLModule``: the shared actor-critic module (tanh-Gaussian policy, Q ensemble, Polyak target Q) plus
``log_alpha``, the entropy temperature SAC learns.

Keeping the temperature in the module puts it in checkpoints and keeps DDP replicas identical.
``forward_exploration`` samples the squashed Gaussian (what online jobs act with);
``forward_inference`` acts with its mode (evaluation).
"""

from __future__ import annotations

import torch
from torch import nn

from offlinerl.algorithms.actor_critic import ActorCriticRLModule

__all__ = ["SACRLModule"]


class SACRLModule(ActorCriticRLModule):
    def setup(self) -> None:
        self.model_config["policy"] = True
        super().setup()
        if self.discrete:
            raise TypeError(f"SAC needs continuous actions (a 1-D Box action space), got {self.action_space}")
        if not self.inference_only:
            self.log_alpha = nn.Parameter(torch.zeros(()))
