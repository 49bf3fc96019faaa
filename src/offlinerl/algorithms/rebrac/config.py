"""ReBRAC configuration (Tarasov et al. 2023, "Revisiting the Minimalist Approach to Offline
Reinforcement Learning").

ReBRAC is TD3+BC with the BC penalty decoupled into the actor (β1) and the critic's target (β2),
LayerNorm in the critics, 3 hidden layers of 256, batches of 1024 and Adam 1e-3. Defaults are those of
the paper's reference implementation (CORL ``algorithms/offline/rebrac.py`` and its Gym-MuJoCo configs),
except β1 and β2: CORL's script says 1.0, but none of its 39 tuned D4RL configs goes above 0.1 / 0.5, and
0.01 / 0.01 is the commonest Gym-MuJoCo pair, the family whose rates and batch size are the defaults
(docs/training.md lists the other families). Continuous (1-D Box) actions only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import gymnasium as gym

from offlinerl.algorithms.algorithm_config import AlgorithmConfig, ConfigError, ModelConfig
from offlinerl.config_io import check

__all__ = ["ReBRACConfig"]


@dataclass(frozen=True, kw_only=True)
class ReBRACConfig(AlgorithmConfig):
    train_batch_size: int = 1024
    """Transitions per gradient update, per learner (the paper's 1024)."""
    model: ModelConfig = field(default_factory=lambda: ModelConfig(hidden=(256, 256, 256)))
    """Actor and critic hidden layers (the paper's 3 x 256). A ``model`` block in a file replaces this
    whole default, and ``ModelConfig``'s own ``hidden`` is 256 x 2: give ``hidden`` there too."""
    tau: float = 0.005
    """Polyak rate of the target actor and target critics, applied after every actor update."""
    reward_scale: float = 1.0
    """Rewards are multiplied by this in the TD target."""
    actor_lr: float = 1e-3
    """Adam learning rate of the deterministic actor."""
    critic_lr: float = 1e-3
    """Adam learning rate of the Q ensemble."""
    num_critics: int = 2
    """Members of the Q ensemble; the TD target and the actor's Q take the member-wise minimum."""
    actor_bc_coef: float = 0.01
    """β1: weight of the actor's BC penalty ``Σ_a ((π(s) − a)/h)²`` against the (normalised) Q term."""
    critic_bc_coef: float = 0.01
    """β2: the TD target subtracts ``β2 · Σ_a ((a' − a'_data)/h)²``, a' the smoothed target action at s'."""
    normalize_q: bool = True
    """Divide the actor's Q term by mean|min_e Q_e(s, π(s))| (a constant per batch, no gradient)."""
    policy_noise: float = 0.2
    """Std of the target policy smoothing noise, in units of the action half-range."""
    noise_clip: float = 0.5
    """The smoothing noise is clipped to ±noise_clip, in units of the action half-range."""
    policy_freq: int = 2
    """The actor and the target networks are updated every policy_freq-th update (critics every update)."""
    actor_layer_norm: bool = False
    """LayerNorm after each hidden layer's activation in the actor (off in the paper's runs)."""
    critic_layer_norm: bool = True
    """LayerNorm after each hidden layer's activation in every critic."""
    paper_init: bool = True
    """Initialise as the paper's code does: hidden biases 0.1, output layers U(±1e-3) (actor) and U(±3e-3)
    (critics), so the first actions sit mid-range and the first Q values near 0; false: ``nn.Linear``'s."""
    exploration_noise: float = 0.1
    """Std of the Gaussian noise ``forward_exploration`` adds (online use), in units of the action half-range."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check(0.0 < self.tau <= 1.0, "tau", f"must lie in (0, 1], got {self.tau!r}")
        for name in ("reward_scale", "actor_lr", "critic_lr"):
            check(getattr(self, name) > 0, name, f"must be > 0, got {getattr(self, name)!r}")
        for name in ("actor_bc_coef", "critic_bc_coef", "policy_noise", "noise_clip", "exploration_noise"):
            check(getattr(self, name) >= 0, name, f"must be >= 0, got {getattr(self, name)!r}")
        check(self.num_critics >= 1, "num_critics", f"must be >= 1, got {self.num_critics!r}")
        check(self.policy_freq >= 1, "policy_freq", f"must be >= 1, got {self.policy_freq!r}")
        check(self.model.encoder != "cnn", "model.encoder",
              f"ReBRAC builds MLPs over flattened observations; use 'auto' or 'mlp', got {self.model.encoder!r}")

    def module_config(self) -> dict:
        return {**super().module_config(), "num_critics": self.num_critics, "exploration_noise": self.exploration_noise,
                "actor_layer_norm": self.actor_layer_norm, "critic_layer_norm": self.critic_layer_norm,
                "paper_init": self.paper_init}

    def learner_connectors(self, observation_space: gym.Space, action_space: gym.Space) -> list:
        """Transitions, next observations and the data's next actions; anything but continuous actions is
        refused before any model is built."""
        from offlinerl.connectors import AddNextActions

        if not (isinstance(action_space, gym.spaces.Box) and len(action_space.shape) == 1):
            raise ConfigError(f"algorithm rebrac: ReBRAC needs continuous actions (a 1-D Box action space); this "
                              f"dataset's action space is {action_space}. For discrete actions use cql, iql, marwil or bc")
        return [*super().learner_connectors(observation_space, action_space), AddNextActions()]
