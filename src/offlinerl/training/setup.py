"""What an ``Algorithm`` checks before it builds anything expensive: the envs it will play and the CPUs its actors
need.

The evaluation env is ``evaluation.env``, else the dataset's (with the task it recorded: its env spec's kwargs
and time limit, updated by ``evaluation.env_kwargs``); online experience comes from ``online.env``, else the
evaluation env. Each env is made once and its spaces compared with the dataset's (``EnvMismatchError``), so a
wrong env never costs a training run; learner and EnvRunner actors must fit the cluster (or they never start),
and streaming needs a CPU for Ray Data besides them (or the readers never start).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from offlinerl.algorithms.algorithm_config import AlgorithmConfig, ConfigError
from offlinerl.data.offline_data import OfflineData, data_mode
from offlinerl.episodes.info import DatasetInfo, DatasetInfoError, read_info
from offlinerl.env.env_check import check_env, check_team_env
from offlinerl.trusted import is_pettingzoo
from offlinerl.training.online_config import OnlineConfig

__all__ = ["ray_reason", "job_ray_reason", "can_evaluate", "check_cpus", "check_eval_env", "check_online_env", "team_evaluation", "eval_env_id", "eval_env_kwargs",
           "online_env_id", "online_env_kwargs"]


def ray_reason(config: AlgorithmConfig, online: OnlineConfig | None, dataset: str | Path,
               address: str | None = None) -> str | None:
    """What of a job needs Ray, in a few words; None when nothing does. A job with its data in memory, its one
    learner in this process, no env runners and no cluster (``address`` or ``$RAY_ADDRESS``) runs without Ray:
    the same reads, transforms and updates, seconds sooner. A dataset whose ``dataset.json`` cannot be read needs
    none either: the validation in this process reports what is wrong with it."""
    if address or os.environ.get("RAY_ADDRESS"):
        return "a Ray cluster to join"
    try:
        info = read_info(dataset)
    except DatasetInfoError:
        info = None
    return job_ray_reason(config, online, info)


def job_ray_reason(config: AlgorithmConfig, online: OnlineConfig | None, info: DatasetInfo | None) -> str | None:
    """``ray_reason`` without the cluster: what the job itself needs Ray for (remote learners, env runners,
    streaming data: ``info``, the dataset's ``dataset.json``, decides ``data.mode: auto``), or None."""
    if config.num_learners > 0:
        return f"{config.num_learners} remote learner{'s' * (config.num_learners != 1)}"
    if online is not None:
        return "online experience (env runners)"
    if info is not None and data_mode(config, info) == "streaming":
        return "streaming data"
    return None


def can_evaluate(config: AlgorithmConfig, data: OfflineData) -> bool:
    """Whether the job has an evaluation env: one named by the config or the dataset; for several modules, a
    multi-agent one (``pettingzoo:MODULE``)."""
    env = config.evaluation.env or data.info.env_id
    return bool(env) and (not data.multi_module or is_pettingzoo(env))


def team_evaluation(config: AlgorithmConfig, data: OfflineData) -> bool:
    """Whether evaluation plays a multi-agent (PettingZoo) env: the team loop (``offlinerl.env.multi_agent``)."""
    return is_pettingzoo(config.evaluation.env or data.info.env_id)


def eval_env_id(config: AlgorithmConfig, data: OfflineData) -> str:
    env = config.evaluation.env or data.info.env_id
    if not env:
        raise ValueError("no evaluation env: the dataset has no env_id; set evaluation.env")
    return env


def eval_env_kwargs(config: AlgorithmConfig, data: OfflineData) -> dict[str, Any]:
    """``gymnasium.make`` kwargs of the evaluation env: for the dataset's own env, the task it recorded (its
    env spec's kwargs and time limit, e.g. a maze map and a fixed goal) updated by ``evaluation.env_kwargs``;
    for an env named by ``evaluation.env``, ``evaluation.env_kwargs`` alone."""
    ev = config.evaluation
    if ev.env is not None:
        return dict(ev.env_kwargs)
    return {**data.info.env_kwargs, **ev.env_kwargs}


def online_env_id(config: AlgorithmConfig, online: OnlineConfig | None, data: OfflineData) -> str:
    """The env online experience comes from: ``online.env``, else the evaluation env."""
    return (online.env if online is not None else None) or eval_env_id(config, data)


def online_env_kwargs(config: AlgorithmConfig, online: OnlineConfig, data: OfflineData) -> dict[str, Any]:
    """``online.env_kwargs``; for the evaluation env (no ``online.env``) the evaluation env's kwargs if none."""
    if online.env is None:
        return dict(online.env_kwargs or eval_env_kwargs(config, data))
    return dict(online.env_kwargs)


def check_eval_env(config: AlgorithmConfig, data: OfflineData, dataset: str) -> None:
    """Make the evaluation env once and compare its spaces with the dataset's (``EnvMismatchError``)."""
    if not can_evaluate(config, data):
        return
    if team_evaluation(config, data):
        check_team_env(eval_env_id(config, data), data.observation_space, data.action_space, list(data.module_ids),
                       eval_env_kwargs(config, data), policy_mapping=config.policy_mapping,
                       trusted=config.evaluation.env is not None, what=f"the dataset {dataset}",
                       module_spaces=data.module_spaces)
        return
    check_env(eval_env_id(config, data), data.observation_space, data.action_space, eval_env_kwargs(config, data),
              trusted=config.evaluation.env is not None, what=f"the dataset {dataset}")


def check_online_env(config: AlgorithmConfig, online: OnlineConfig, data: OfflineData, dataset: str) -> None:
    """Online experience comes from an env with the dataset's spaces: a gymnasium env for one module, or a
    PettingZoo env (``pettingzoo:MODULE``) whose agents the job's modules act for (``EnvMismatchError``)."""
    evaluable = can_evaluate(config, data)
    if online.env is None and not evaluable:
        raise ConfigError("online.env: the dataset names no env and evaluation.env is not set")
    if online.promotion == "gated" and not evaluable:
        raise ConfigError("online.promotion: gated scores policies in the evaluation env; the dataset names none "
                          "and evaluation.env is not set")
    if is_pettingzoo(online_env_id(config, online, data)):
        if online.num_envs != 1:
            raise ConfigError("online.num_envs: a multi-agent runner plays one PettingZoo env at a time; set it to 1 "
                              "(online.num_env_runners runs more of them)")
        if online.env is not None:
            check_team_env(online.env, data.observation_space, data.action_space, list(data.module_ids),
                           online.env_kwargs, policy_mapping=config.policy_mapping, trusted=True,
                           what=f"the dataset {dataset}", module_spaces=data.module_spaces)
        return
    if data.multi_module:
        raise ConfigError(f"online.env: the dataset trains {len(data.module_ids)} modules; their online experience "
                          "comes from a multi-agent env (pettingzoo:MODULE), not a gymnasium env")
    if config.policy_mapping is not None:
        raise ConfigError("policy_mapping: maps the agents of a multi-agent env (pettingzoo:MODULE); online.env is "
                          "a gymnasium env: drop the mapping or name a PettingZoo env")
    if online.env is not None:
        check_env(online.env, data.observation_space, data.action_space, online.env_kwargs,
                  trusted=True, what=f"the dataset {dataset}")


def check_cpus(config: AlgorithmConfig, online: OnlineConfig | None, data: OfflineData) -> None:
    """Learner and EnvRunner actors must fit the cluster (or they never start), and streaming needs a CPU for
    Ray Data besides them (or the readers never start)."""
    cfg = config
    learners = cfg.num_learners * cfg.num_cpus_per_learner
    runners = 0 if online is None else (online.num_env_runners + online.num_eval_env_runners) * online.num_cpus_per_env_runner
    streaming = data.mode == "streaming"
    if not runners and not learners:
        return
    import ray

    cpus = ray.cluster_resources().get("CPU", 0)
    left = cpus - learners - runners
    if not runners and not streaming:  # in memory: the learner actors alone must fit
        if left < 0:
            raise ConfigError(
                f"num_cpus_per_learner: {cfg.num_learners} learners x {cfg.num_cpus_per_learner:g} CPUs need "
                f"{learners:g} CPUs, the Ray cluster has {cpus:g} (the learners would wait forever); lower "
                "num_learners or num_cpus_per_learner (e.g. 0.5)")
        return
    if not runners and left < 1:
        raise ValueError(
            f"streaming mode with {cfg.num_learners} learners x {cfg.num_cpus_per_learner} CPUs leaves {left:g} of "
            f"{cpus:g} CPUs for Ray Data (needs >= 1); lower num_cpus_per_learner (e.g. 0.5) or use data.mode=in_memory"
        )
    if left < (1 if streaming else 0):
        raise ConfigError(
            f"online.num_cpus_per_env_runner: {cfg.num_learners} learners x {cfg.num_cpus_per_learner} CPUs and "
            f"{online.num_env_runners + online.num_eval_env_runners} env runners x {online.num_cpus_per_env_runner} "
            f"CPUs leave {left:g} of {cpus:g} CPUs" + (" for Ray Data (streaming needs >= 1)" if streaming else "")
            + "; lower online.num_cpus_per_env_runner or num_cpus_per_learner (e.g. 0.5), or use fewer actors"
        )
