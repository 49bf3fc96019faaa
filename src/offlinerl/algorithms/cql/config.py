"""CQL configuration (Kumar et al. 2020, "Conservative Q-Learning for Offline RL").

Defaults follow the paper's MuJoCo settings and the common reference
implementations (critic lr 3e-4, actor lr 1e-4, τ = 0.005, 10 sampled actions,
conservative weight 5, fixed weight unless `lagrangian`). The shared ``lr`` of
``AlgorithmConfig`` is not used: each optimizer has its own rate below.
"""

from __future__ import annotations

from dataclasses import dataclass

from offlinerl.algorithms.algorithm_config import AlgorithmConfig
from offlinerl.config_io import check

__all__ = ["CQLConfig"]


@dataclass(frozen=True, kw_only=True)
class CQLConfig(AlgorithmConfig):
    tau: float = 0.005
    """Polyak rate of the target critics, applied after every update."""
    reward_scale: float = 1.0
    """Rewards are multiplied by this in the TD target (the IQL paper rescales MuJoCo returns to a ~1000 range)."""
    actor_lr: float = 1e-4
    """Adam learning rate of the policy (continuous actions only)."""
    critic_lr: float = 3e-4
    """Adam learning rate of the Q ensemble."""
    alpha_lr: float = 1e-4
    """Adam learning rate of the entropy temperature log α (continuous only)."""
    initial_alpha: float = 1.0
    """Initial entropy temperature α."""
    target_entropy: float | None = None
    """Entropy target of the temperature loss; None means −|A| (action dimensions)."""
    num_critics: int = 2
    """Members of the Q ensemble (2 = twin Q; targets take the member-wise minimum)."""
    cql_weight: float = 5.0
    """Weight α' of the conservative penalty (a multiplier on the Lagrangian α' if `lagrangian`)."""
    num_sampled_actions: int = 10
    """Actions N drawn per state from each of uniform, π(·|s) and π(·|s') for the penalty."""
    cql_temperature: float = 1.0
    """Temperature of the logsumexp in the penalty."""
    lagrangian: bool = False
    """Tune α' by dual gradient ascent so that the penalty gap approaches `target_action_gap`."""
    target_action_gap: float = 10.0
    """Target value of the conservative gap when `lagrangian` is on."""
    cql_alpha_lr: float = 3e-4
    """Adam learning rate of log α' when `lagrangian` is on."""
    initial_cql_alpha: float = 1.0
    """Initial Lagrange multiplier α' when `lagrangian` is on."""
    max_cql_alpha: float = 1e6
    """Upper clamp of the Lagrange multiplier α'."""
    bc_warmup_updates: int = 0
    """Updates at the start during which the actor maximises log π(a_data|s) instead of Q."""
    backup_entropy: bool = False
    """Subtract α·log π(a'|s') in the TD target (SAC-style soft backup)."""
    calibrated: bool = False
    """Cal-QL (Nakamoto et al. 2023): the penalty pushes the Q of the policy's actions (continuous) or of every
    action (discrete) down no further than the data's discounted return-to-go from s (within the stored episode
    row, no bootstrap), so values stay on the scale of real returns when online experience arrives (with
    ``online.critic_warmup_iterations`` it removed pendulum-cql's fine-tuning dip; docs/online.md)."""

    SHARED_ENCODERS = ("pi_encoder",)  # share_encoder: the policy's encoder (continuous actions); Q stays per module

    def __post_init__(self) -> None:
        super().__post_init__()
        check(0.0 < self.tau <= 1.0, "tau", f"must lie in (0, 1], got {self.tau!r}")
        check(self.reward_scale > 0, "reward_scale", f"must be > 0, got {self.reward_scale!r}")
        for name in ("actor_lr", "critic_lr", "alpha_lr", "cql_alpha_lr", "initial_alpha",
                     "initial_cql_alpha", "cql_temperature", "max_cql_alpha"):
            check(getattr(self, name) > 0, name, f"must be > 0, got {getattr(self, name)!r}")
        check(self.cql_weight >= 0, "cql_weight", f"must be >= 0, got {self.cql_weight!r}")
        check(self.num_critics >= 1, "num_critics", f"must be >= 1, got {self.num_critics!r}")
        check(self.num_sampled_actions >= 1, "num_sampled_actions", f"must be >= 1, got {self.num_sampled_actions!r}")
        check(self.bc_warmup_updates >= 0, "bc_warmup_updates", f"must be >= 0, got {self.bc_warmup_updates!r}")

    def module_config(self) -> dict:
        return {**super().module_config(), "num_critics": self.num_critics}

    def learner_connectors(self, observation_space, action_space):
        from offlinerl.connectors import ComputeReturnsToGo

        episode = super().learner_connectors(observation_space, action_space)
        return [*episode, ComputeReturnsToGo(self.gamma)] if self.calibrated else episode
