"""SAC configuration (Haarnoja et al. 2018, "Soft Actor-Critic Algorithms and Applications").

Defaults are the paper's MuJoCo settings: Adam 3e-4 for actor, critics and temperature, batch 256,
τ = 0.005, γ = 0.99, two 256×256 critics, automatic temperature with target entropy −|A|. SAC is an
online algorithm: run it from scratch with an online job (docs/online.md, "Online from scratch");
offline it is plain off-policy SAC on the dataset (no conservatism). Continuous (1-D Box) actions only.
The shared ``lr`` of ``AlgorithmConfig`` is not used: each optimizer has its own rate below.
"""

from __future__ import annotations

from dataclasses import dataclass

import gymnasium as gym

from offlinerl.algorithms.algorithm_config import AlgorithmConfig, ConfigError
from offlinerl.config_io import check

__all__ = ["SACConfig"]


@dataclass(frozen=True, kw_only=True)
class SACConfig(AlgorithmConfig):
    tau: float = 0.005
    """Polyak rate of the target critics, applied after every update."""
    reward_scale: float = 1.0
    """Rewards are multiplied by this in the TD target."""
    actor_lr: float = 3e-4
    """Adam learning rate of the tanh-Gaussian policy."""
    critic_lr: float = 3e-4
    """Adam learning rate of the Q ensemble."""
    alpha_lr: float = 3e-4
    """Adam learning rate of the entropy temperature log α."""
    initial_alpha: float = 1.0
    """Initial entropy temperature α."""
    target_entropy: float | None = None
    """Entropy target H̄ of the temperature loss; None means −|A| (action dimensions)."""
    num_critics: int = 2
    """Members of the Q ensemble (2 = twin Q; the target and the actor take the member-wise minimum)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check(0.0 < self.tau <= 1.0, "tau", f"must lie in (0, 1], got {self.tau!r}")
        for name in ("reward_scale", "actor_lr", "critic_lr", "alpha_lr", "initial_alpha"):
            check(getattr(self, name) > 0, name, f"must be > 0, got {getattr(self, name)!r}")
        check(self.num_critics >= 1, "num_critics", f"must be >= 1, got {self.num_critics!r}")

    def module_config(self) -> dict:
        return {**super().module_config(), "num_critics": self.num_critics}

    def entropy_target(self, action_dim: int) -> float:
        """H̄: ``target_entropy``, or −|A|."""
        return -float(action_dim) if self.target_entropy is None else float(self.target_entropy)

    def learner_connectors(self, observation_space: gym.Space, action_space: gym.Space) -> list:
        """Refuses anything but continuous actions before any model is built."""
        if not (isinstance(action_space, gym.spaces.Box) and len(action_space.shape) == 1):
            raise ConfigError(f"algorithm sac: SAC needs continuous actions (a 1-D Box action space); this "
                              f"dataset's action space is {action_space}. For discrete actions use cql, iql, marwil or bc")
        return super().learner_connectors(observation_space, action_space)
