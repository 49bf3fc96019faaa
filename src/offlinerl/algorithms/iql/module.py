"""``IQLRLModule``: the actor-critic module with a state-value network V (IQL)."""

from __future__ import annotations

from offlinerl.algorithms.actor_critic import ActorCriticRLModule

__all__ = ["IQLRLModule"]


class IQLRLModule(ActorCriticRLModule):
    def setup(self) -> None:
        self.model_config.setdefault("value_head", True)
        super().setup()
