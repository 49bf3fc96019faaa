"""Online side: EnvRunners that act in gymnasium envs and record episodes,
the EnvRunnerGroup that runs them as Ray actors, and data collection."""

from offlinerl.env.config import EnvRunnerConfig
from offlinerl.env.env_runner import EnvRunner, random_policy_factory
from offlinerl.env.env_runner_group import EnvRunnerGroup, episode_metrics
from offlinerl.env.policies import ActingPolicy, RandomPolicy, epsilon_mix, uniform_log_prob

__all__ = [
    "ActingPolicy",
    "EnvRunner",
    "EnvRunnerConfig",
    "EnvRunnerGroup",
    "episode_metrics",
    "RandomPolicy",
    "epsilon_mix",
    "random_policy_factory",
    "uniform_log_prob",
]
