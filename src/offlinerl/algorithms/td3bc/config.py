"""TD3+BC configuration (Fujimoto & Gu 2021, "A Minimalist Approach to Offline Reinforcement Learning").

Defaults are the paper's: α = 2.5, target policy noise 0.2 clipped at 0.5 (both in units
of the action half-range), actor and targets updated every 2nd update, τ = 0.005, Adam
3e-4 for actor and critics. The shared ``lr`` of ``AlgorithmConfig`` is not used: each
optimizer has its own rate. Continuous (1-D Box) actions only.
"""

from __future__ import annotations

from dataclasses import dataclass

import gymnasium as gym

from offlinerl.algorithms.algorithm_config import AlgorithmConfig, ConfigError
from offlinerl.config_io import check

__all__ = ["TD3BCConfig"]


@dataclass(frozen=True, kw_only=True)
class TD3BCConfig(AlgorithmConfig):
    tau: float = 0.005
    """Polyak rate of the target actor and target critics, applied after every actor update."""
    reward_scale: float = 1.0
    """Rewards are multiplied by this in the TD target."""
    actor_lr: float = 3e-4
    """Adam learning rate of the deterministic actor."""
    critic_lr: float = 3e-4
    """Adam learning rate of the Q ensemble."""
    num_critics: int = 2
    """Members of the Q ensemble (2 = twin Q; the TD target takes the member-wise minimum)."""
    alpha: float = 2.5
    """α of λ = α / mean|Q1(s, π(s))|: the weight of the Q term against the behaviour-cloning term."""
    policy_noise: float = 0.2
    """Std of the target policy smoothing noise, in units of the action half-range."""
    noise_clip: float = 0.5
    """The smoothing noise is clipped to ±noise_clip, in units of the action half-range."""
    policy_freq: int = 2
    """The actor and the target networks are updated every policy_freq-th update (critics every update)."""
    exploration_noise: float = 0.1
    """Std of the Gaussian noise ``forward_exploration`` adds (online use), in units of the action half-range."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check(0.0 < self.tau <= 1.0, "tau", f"must lie in (0, 1], got {self.tau!r}")
        for name in ("reward_scale", "actor_lr", "critic_lr"):
            check(getattr(self, name) > 0, name, f"must be > 0, got {getattr(self, name)!r}")
        for name in ("alpha", "policy_noise", "noise_clip", "exploration_noise"):
            check(getattr(self, name) >= 0, name, f"must be >= 0, got {getattr(self, name)!r}")
        check(self.num_critics >= 1, "num_critics", f"must be >= 1, got {self.num_critics!r}")
        check(self.policy_freq >= 1, "policy_freq", f"must be >= 1, got {self.policy_freq!r}")

    def module_config(self) -> dict:
        return {**super().module_config(), "num_critics": self.num_critics, "exploration_noise": self.exploration_noise}

    def learner_connectors(self, observation_space: gym.Space, action_space: gym.Space) -> list:
        """Refuses anything but continuous actions before any model is built."""
        if not (isinstance(action_space, gym.spaces.Box) and len(action_space.shape) == 1):
            raise ConfigError(f"algorithm td3bc: TD3+BC needs continuous actions (a 1-D Box action space); this "
                              f"dataset's action space is {action_space}. For discrete actions use cql, iql, marwil or bc")
        return super().learner_connectors(observation_space, action_space)
