"""Acting in real environments: EnvRunners that act in gymnasium envs and record
episodes, the EnvRunnerGroup that runs them as Ray actors, data collection, and
evaluation."""

from offlinerl.env.config import EnvRunnerConfig
from offlinerl.env.env_runner import EnvRunner, random_policy_factory
from offlinerl.env.env_runner_group import EnvRunnerGroup
from offlinerl.env.evaluation import episode_metrics, evaluate_module, run_episodes
from offlinerl.env.policies import ActingPolicy, RandomPolicy, epsilon_mix, uniform_log_prob

__all__ = [
    "ActingPolicy",
    "EnvRunner",
    "EnvRunnerConfig",
    "EnvRunnerGroup",
    "RandomPolicy",
    "episode_metrics",
    "epsilon_mix",
    "evaluate_module",
    "random_policy_factory",
    "run_episodes",
    "uniform_log_prob",
]
