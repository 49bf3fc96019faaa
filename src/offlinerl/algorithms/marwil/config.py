"""MARWIL settings."""

from __future__ import annotations

from dataclasses import dataclass

from offlinerl.algorithms.algorithm_config import AlgorithmConfig
from offlinerl.config_io import check

__all__ = ["MARWILConfig"]


@dataclass(frozen=True, kw_only=True)
class MARWILConfig(AlgorithmConfig):
    """Monotonic advantage re-weighted imitation learning (Wang et al. 2018)."""

    lr: float = 1e-3
    """Learning rate of the policy ("actor") and value ("value") optimizers."""
    beta: float = 1.0
    """Inverse temperature of the advantage weights exp(beta * A / c); 0 gives plain BC."""
    vf_coeff: float = 1.0
    """Scale of the value loss 0.5 * (R - V)^2."""
    sq_adv_norm_rate: float = 1e-3
    """Update rate of the moving average c^2 of squared advantages."""
    sq_adv_norm_start: float = 100.0
    """Initial value of c^2."""
    max_weight: float = 20.0
    """Upper clip of the advantage weights."""

    SHARED_ENCODERS = ("pi_encoder",)  # share_encoder: the policy's encoder; the value network's stays per module

    def __post_init__(self) -> None:
        super().__post_init__()
        check(self.beta >= 0, "beta", f"must be >= 0, got {self.beta}")
        check(0 < self.sq_adv_norm_rate <= 1, "sq_adv_norm_rate", f"must be in (0, 1], got {self.sq_adv_norm_rate}")
        check(self.sq_adv_norm_start > 0, "sq_adv_norm_start", f"must be positive, got {self.sq_adv_norm_start}")
        check(self.max_weight > 0, "max_weight", f"must be positive, got {self.max_weight}")
        check(self.vf_coeff >= 0, "vf_coeff", f"must be >= 0, got {self.vf_coeff}")

    def module_config(self):
        return {**super().module_config(), "value_head": True}

    def learner_connectors(self, observation_space, action_space):
        from offlinerl.connectors import AddTransitions, ComputeReturnsToGo

        return [AddTransitions(), ComputeReturnsToGo(self.gamma)]
