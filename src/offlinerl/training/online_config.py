"""``OnlineConfig``: what an ``Algorithm`` needs to own online experience (``Algorithm(...,
online=OnlineConfig(...))``); a fine-tuning job spec (``offlinerl.jobs.spec.FinetuneSpec``) adds the job
around it, as its ``online:`` block."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from offlinerl.config_io import check
from offlinerl.data.replay import MIXING

__all__ = ["OnlineConfig"]

PROMOTIONS = ("always", "gated")


@dataclass(frozen=True, kw_only=True)
class OnlineConfig:
    """How online experience is gathered and mixed with the offline dataset."""

    env: str | None = None
    """Env to act in: a gymnasium id, or ``pettingzoo:MODULE`` for a multi-agent job (every agent's experience to
    the module acting for it); None = the checkpoint's evaluation env (else its dataset's env id)."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments for ``gymnasium.make`` (None env: the evaluation config's)."""
    num_env_runners: int = 0
    """EnvRunner Ray actors sampling experience (0 = in this process); ``MultiAgentEnvRunner`` actors for a
    PettingZoo env."""
    num_envs: int = 1
    """Vector-env width per runner (a PettingZoo env: 1)."""
    num_cpus_per_env_runner: float = 1.0
    """CPUs each EnvRunner actor (sampling or evaluation) reserves; fractions share a CPU."""
    env_steps_per_iteration: int = 1000
    """Env steps sampled before each iteration's updates."""
    online_fraction: float = 0.5
    """Share of each train batch drawn from online experience (the rest from the offline dataset); ``mixing="fixed"``."""
    mixing: str = "fixed"
    """``fixed``: ``online_fraction`` of every batch is online; ``proportional``: the online share is the online
    transitions' share of all (offline + online) transitions, as one buffer would give (IQL's fine-tuning)."""
    critic_warmup_iterations: int = 0
    """The first N iterations of the fine-tune update only the value functions: the policy's optimizers (``actor``,
    and SAC's temperature ``alpha``) are held, so the critics see online experience of the pretrained policy before
    the policy follows them (0 = no warm-up)."""
    replay_capacity: int = 200_000
    """Online transitions kept (oldest dropped first), over all learners: each keeps its share of them."""
    explore: bool = True
    """Act with ``forward_exploration`` (sampled actions) when gathering experience."""
    algorithm: str | None = None
    """Continue as this algorithm (e.g. "marwil" from a "bc" checkpoint); None = the checkpoint's."""
    num_eval_env_runners: int = 0
    """EnvRunner actors for evaluation (0 = in this process)."""
    promotion: str = "always"
    """``always``: the learners' latest policy is the job's (evaluated, checkpointed, exported); ``gated``: it is
    deployed only once it beats the deployed policy on the same fresh gate episodes by ``gate_confidence`` standard
    errors (``offlinerl.training.gate``), so a policy that is unlearning is not the job's. The runners
    explore with the learners' latest policy either way."""
    gate_episodes: int = 10
    """``gated``: ``forward_inference`` episodes each of the two policies plays per gate (2 × this many episodes,
    counted in ``online/env_steps``)."""
    gate_interval: int = 1
    """``gated``: iterations between gates."""
    gate_seed: int = 20_000
    """``gated``: gate ``g`` resets episode ``j`` with ``gate_seed + g * gate_episodes + j`` (keep the range apart
    from evaluation.seed's)."""
    gate_margin: float = 0.0
    """``gated``: return (env units) the candidate must add, on average over the gate's starts, to be deployed."""
    gate_confidence: float = 1.0
    """``gated``: standard errors of the mean paired difference subtracted before comparing it with the margin
    (0 = compare the means; 1 = the difference must stand one standard error clear)."""
    save_online_episodes: bool = True
    """``offlinerl finetune`` without ``--record``: write every online episode to ``<run>/online-episodes``."""

    def __post_init__(self) -> None:
        check(self.num_env_runners >= 0, "online.num_env_runners", f"must be >= 0, got {self.num_env_runners}")
        check(self.num_envs >= 1, "online.num_envs", f"must be >= 1, got {self.num_envs}")
        check(self.num_eval_env_runners >= 0, "online.num_eval_env_runners",
              f"must be >= 0, got {self.num_eval_env_runners}")
        check(self.num_cpus_per_env_runner > 0, "online.num_cpus_per_env_runner",
              f"must be positive, got {self.num_cpus_per_env_runner}")
        check(self.env_steps_per_iteration >= 1, "online.env_steps_per_iteration",
              f"must be >= 1, got {self.env_steps_per_iteration}")
        check(0.0 <= self.online_fraction <= 1.0, "online.online_fraction", f"must be in [0, 1], got {self.online_fraction}")
        check(self.mixing in MIXING, "online.mixing", f"one of {', '.join(MIXING)}, got {self.mixing!r}")
        check(self.critic_warmup_iterations >= 0, "online.critic_warmup_iterations",
              f"must be >= 0, got {self.critic_warmup_iterations}")
        check(self.promotion in PROMOTIONS, "online.promotion", f"one of {', '.join(PROMOTIONS)}, got {self.promotion!r}")
        check(self.gate_confidence >= 0, "online.gate_confidence", f"must be >= 0, got {self.gate_confidence}")
        for name in ("gate_episodes", "gate_interval"):
            check(getattr(self, name) >= 1, f"online.{name}", f"must be >= 1, got {getattr(self, name)}")
        check(self.replay_capacity >= 1, "online.replay_capacity", f"must be >= 1, got {self.replay_capacity}")
