"""IQL configuration (Kostrikov et al. 2021, "Offline RL with Implicit Q-Learning").

Defaults are the paper's MuJoCo locomotion settings: expectile 0.7,
temperature β = 3, weights clipped at 100, lr 3e-4 everywhere, τ = 0.005. The
shared ``lr`` of ``AlgorithmConfig`` is not used: each optimizer has its own rate.
"""

from __future__ import annotations

from dataclasses import dataclass

from offlinerl.algorithms.algorithm_config import AlgorithmConfig
from offlinerl.config_io import check

__all__ = ["IQLConfig"]


@dataclass(frozen=True, kw_only=True)
class IQLConfig(AlgorithmConfig):
    tau: float = 0.005
    """Polyak rate of the target critics, applied after every update."""
    reward_scale: float = 1.0
    """Rewards are multiplied by this in the TD target (the IQL paper rescales MuJoCo returns to a ~1000 range)."""
    actor_lr: float = 3e-4
    """Adam learning rate of the policy."""
    critic_lr: float = 3e-4
    """Adam learning rate of the Q ensemble."""
    value_lr: float = 3e-4
    """Adam learning rate of the state-value network V."""
    num_critics: int = 2
    """Members of the Q ensemble (2 = twin Q; V regresses on their target minimum)."""
    expectile: float = 0.7
    """Expectile τ of the value regression (0.5 = mean; → 1 approaches max over data actions)."""
    beta: float = 3.0
    """Inverse temperature β of the advantage weights exp(β·A)."""
    max_weight: float = 100.0
    """Clip of the advantage weights exp(β·A)."""

    SHARED_ENCODERS = ("pi_encoder",)  # share_encoder: the policy's encoder; Q (over s and a together) and V per module

    def __post_init__(self) -> None:
        super().__post_init__()
        check(0.0 < self.tau <= 1.0, "tau", f"must lie in (0, 1], got {self.tau!r}")
        check(0.0 < self.expectile < 1.0, "expectile", f"must lie in (0, 1), got {self.expectile!r}")
        check(self.reward_scale > 0, "reward_scale", f"must be > 0, got {self.reward_scale!r}")
        for name in ("actor_lr", "critic_lr", "value_lr", "max_weight"):
            check(getattr(self, name) > 0, name, f"must be > 0, got {getattr(self, name)!r}")
        check(self.beta >= 0, "beta", f"must be >= 0, got {self.beta!r}")
        check(self.num_critics >= 1, "num_critics", f"must be >= 1, got {self.num_critics!r}")

    def module_config(self) -> dict:
        return {**super().module_config(), "num_critics": self.num_critics, "value_head": True}
