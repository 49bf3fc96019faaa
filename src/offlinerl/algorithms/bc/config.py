"""BC settings."""

from __future__ import annotations

from dataclasses import dataclass

from offlinerl.algorithms.algorithm_config import AlgorithmConfig

__all__ = ["BCConfig"]


@dataclass(frozen=True, kw_only=True)
class BCConfig(AlgorithmConfig):
    """Behaviour cloning: maximise the log-likelihood of the dataset's actions."""

    lr: float = 1e-3
    """Learning rate of the policy optimizer ("actor")."""
    entropy_coeff: float = 0.0
    """Bonus on the policy entropy (Categorical: exact; TanhGaussian: pre-squash Gaussian entropy)."""

    SHARED_ENCODERS = ("pi_encoder",)  # share_encoder: the policy's observation encoder

    def learner_connectors(self, observation_space, action_space):
        from offlinerl.connectors import AddTransitions

        return [AddTransitions()]  # BC needs no next observations
