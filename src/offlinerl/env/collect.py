"""Recording new episode datasets with EnvRunners (``offlinerl collect``)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from offlinerl.core.metrics import episode_metrics
from offlinerl.env.config import EnvRunnerConfig
from offlinerl.env.env_runner import ConnectorsFactory, PolicyFactory, random_policy_factory
from offlinerl.env.env_runner_group import EnvRunnerGroup
from offlinerl.episodes.info import DatasetInfo
from offlinerl.episodes.io import load_episodes, write_dataset
from offlinerl.progress import progress_bar
from offlinerl.trusted import env_spec_of, is_pettingzoo

__all__ = ["CollectConfig", "collect", "collect_team", "check_collected_dataset", "env_spec_json"]


@dataclass(frozen=True, kw_only=True)
class CollectConfig:
    """What to record, with which policy, and where to write it."""

    env: str
    """Gymnasium env id, or a PettingZoo parallel env's ``pettingzoo:MODULE`` (each agent's episode recorded:
    :func:`collect_team`)."""
    output: str
    """Dataset directory to create."""
    num_episodes: int
    """Complete episodes to record (the first ones each runner starts, so short ones are not favoured)."""
    policy: str = "random"
    """``"random"`` (uniform actions, exact ``action_logp``) or the path of a training checkpoint."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments for ``gym.make``."""
    max_episode_steps: int | None = None
    """Override of the env's time limit."""
    num_env_runners: int = 0
    """EnvRunner Ray actors (0: sample in this process)."""
    num_envs: int = 1
    """Vector-env width per runner."""
    explore: bool = True
    """Act with ``forward_exploration`` (sampled actions, logp recorded) or ``forward_inference``."""
    epsilon: float = 0.0
    """Probability of a uniformly random action instead of the policy's."""
    seed: int | None = None
    """Seed of envs and random actions (same seed, same policy: same dataset)."""
    overwrite: bool = False
    """Replace an existing ``output`` dataset (never the policy checkpoint, a file or another directory)."""
    episodes_per_round: int = 0
    """Episodes requested from the runners per round (0: 4 per sub-env); bounds memory."""

    def __post_init__(self) -> None:
        if self.num_episodes < 1:
            raise ValueError(f"num_episodes must be >= 1, got {self.num_episodes}")
        if self.num_env_runners < 0:
            raise ValueError(f"num_env_runners must be >= 0, got {self.num_env_runners}")
        if self.episodes_per_round < 0:
            raise ValueError(f"episodes_per_round must be >= 0, got {self.episodes_per_round}")
        if self.seed is not None and self.seed < 0:
            raise ValueError(f"--seed must be >= 0 (gymnasium's reset seeds), got {self.seed}")
        limit = self.env_kwargs.get("max_episode_steps")
        if limit is not None and self.max_episode_steps is not None and limit != self.max_episode_steps:
            raise ValueError(f"two time limits: --max-episode-steps {self.max_episode_steps} and --env-kwargs "
                             f"max_episode_steps {limit}; give one")
        if self.policy == "random" and not self.explore:
            raise ValueError("--greedy acts with a checkpoint's deterministic action; the random policy has none "
                             "(and greedy data records no action_logp for the importance-sampling estimators)")

    @property
    def inputs(self) -> list[str]:
        """What the recording reads (the policy checkpoint), which the output may not replace, hold or lie in."""
        return [self.policy] if self.policy != "random" else []

    def runner_config(self) -> EnvRunnerConfig:
        return EnvRunnerConfig(
            env=self.env, env_kwargs=dict(self.env_kwargs), max_episode_steps=self.max_episode_steps,
            num_envs=self.num_envs, seed=self.seed, explore=self.explore, epsilon=self.epsilon,
        )


def env_spec_json(env_id: str, env_kwargs: dict[str, Any] | None = None, *,
                  max_episode_steps: int | None = None) -> dict[str, Any] | None:
    """The registered ``EnvSpec`` of ``env_id`` with the task's ``env_kwargs`` and time limit, as a JSON object
    (None if it does not serialise): what training and evaluation later rebuild the task from."""
    from dataclasses import replace

    try:
        spec = env_spec_of(env_id, explicit=True)
        kwargs = dict(env_kwargs or {})
        steps = kwargs.pop("max_episode_steps", None) if max_episode_steps is None else max_episode_steps
        spec = replace(spec, kwargs={**spec.kwargs, **kwargs},
                       max_episode_steps=spec.max_episode_steps if steps is None else steps)
        return json.loads(spec.to_json())
    except Exception:  # noqa: BLE001 - a spec with a callable entry point does not serialise; it is optional
        return None


def collect(
    config: CollectConfig,
    progress: bool = True,
    *,
    policy_factory: PolicyFactory | None = None,
    connectors_factory: ConnectorsFactory | None = None,
    policy_info: dict[str, Any] | None = None,
) -> DatasetInfo:
    """Record ``config.num_episodes`` episodes into a new dataset, atomically, and check it.

    Raises ``OutputExistsError`` (a refused output, before any episode is sampled) and ``OutputWriteError``
    (a read-only or full disk: nothing half-written is left).

    ``config.policy == "random"`` needs no factories; for a checkpoint, the
    caller passes the factories that rebuild its module and connectors (see
    ``offlinerl.evaluation.acting``), and ``policy_info``
    (e.g. algorithm, iteration) for the provenance.
    """
    import gymnasium as gym

    if is_pettingzoo(config.env):
        if policy_factory is not None:
            raise ValueError(f"{config.env}: a multi-agent env records with a joint policy (collect_team)")
        return collect_team(config, progress, policy_info=policy_info)
    if policy_factory is None:
        if config.policy != "random":
            raise ValueError(f"policy {config.policy!r} needs a policy_factory (use offlinerl collect, or pass one)")
        policy_factory = random_policy_factory(config.seed)
    policy_info = {"policy": config.policy, **(policy_info or {})}
    group = EnvRunnerGroup(
        config.runner_config(), policy_factory, connectors_factory,
        num_env_runners=config.num_env_runners, num_cpus_per_env_runner=1.0,
    )
    per_round = config.episodes_per_round or 4 * config.num_envs * max(config.num_env_runners, 1)
    started = time.time()
    bar = progress_bar(total=config.num_episodes, desc="collect", unit="ep", enabled=progress)
    returns: list[float] = []
    lengths: list[int] = []
    provenance = {
        "collector": "offlinerl collect",
        **policy_info,
        "explore": config.explore,
        "epsilon": config.epsilon,
        "seed": config.seed,
        "num_env_runners": config.num_env_runners,
        "num_envs": config.num_envs,
        "env_kwargs": config.env_kwargs,
        "max_episode_steps": config.max_episode_steps,
        "env_runner_restarts": group.num_restarts,
        "gymnasium_version": gym.__version__,
        "seconds": None,
    }

    def episodes() -> Iterator:
        remaining = config.num_episodes
        while remaining > 0:
            batch = group.sample(num_episodes=min(per_round, remaining))
            remaining -= len(batch)
            returns.extend(e.episode_return for e in batch)
            lengths.extend(len(e) for e in batch)
            bar.update(len(batch))
            yield from batch
        # Every episode is sampled: the totals join the provenance before write_dataset builds dataset.json from
        # it, inside its temporary directory, so the dataset is complete when it appears (no rewrite after).
        provenance["seconds"] = round(time.time() - started, 2)
        provenance["env_runner_restarts"] = group.num_restarts
        provenance.update({k.split("/", 1)[1]: v for k, v in episode_metrics(returns, lengths, "episode").items()})

    try:
        info = write_dataset(
            episodes(), config.output,
            observation_space=group.observation_space, action_space=group.action_space,
            env_id=config.env,
            env_spec=env_spec_json(config.env, config.env_kwargs, max_episode_steps=config.max_episode_steps),
            provenance=provenance,
            overwrite=config.overwrite,
            inputs=config.inputs,
        )
    finally:
        bar.close()
        group.stop()
    check_collected_dataset(config.output, config.num_episodes)
    return info


def collect_team(config: CollectConfig, progress: bool = True, *, policy: Any = None, policy_factory: Any = None,
                 policy_info: dict[str, Any] | None = None) -> DatasetInfo:
    """Record ``config.num_episodes`` episodes of the PettingZoo env ``config.env`` (``pettingzoo:MODULE``) into a
    new dataset, atomically, one row per agent episode (``agent_id``; ``offlinerl.env.multi_agent``), and check it.

    The joint policy: uniformly random (exact ``action_logp``), or what ``policy_factory`` builds in each runner
    (a checkpoint's modules: ``offlinerl.evaluation.acting.checkpoint_team_policy``, which checks the checkpoint
    against the env and returns the factory and the provenance). ``policy``: a live joint policy (``offlinerl.env.multi_agent.JointPolicy``) instead, played in
    this process only. ``config.epsilon`` replaces each agent's action by a uniform one with that probability
    (``action_logp`` is then not recorded: the mixture's is unknown). Episodes run in this process
    (``num_env_runners == 0``) or on that many ``MultiAgentEnvRunner`` actors of 1 CPU each; episode ``k`` resets
    with ``seed + k`` and draws its random numbers from ``(seed, k)``, so the dataset is the same whatever the
    number of runners (``offlinerl.env.multi_agent_runner``). Agents of different spaces (1-D Boxes of different
    sizes, Discretes of different ``n``) are stored in padded columns with each agent's spaces recorded
    (``offlinerl.episodes.agent_spaces``); other differences are refused, naming the two spaces."""
    import gymnasium as gym

    from offlinerl.env.multi_agent import env_spaces
    from offlinerl.episodes.agent_spaces import storage_spaces
    from offlinerl.env.multi_agent_runner import MultiAgentEnvRunner, MultiAgentEnvRunnerGroup, TeamRunnerConfig
    from offlinerl.trusted import make_parallel_env

    if config.max_episode_steps is not None:
        raise ValueError(f"{config.env}: a PettingZoo env's time limit is one of its own kwargs (e.g. MPE's "
                         "max_cycles in --env-kwargs), not max_episode_steps")
    if config.num_envs != 1:
        raise ValueError(f"{config.env}: --num-envs is a gymnasium env's vector width; a PettingZoo env runs one env "
                         "per runner (use --num-env-runners N)")
    if policy is not None and config.num_env_runners:
        raise ValueError(f"{config.env}: a live joint policy is played in this process (num_env_runners=0); "
                         "runners rebuild config.policy (random or a checkpoint path)")
    env = make_parallel_env(config.env, config.env_kwargs, explicit=True)
    obs_spaces, act_spaces = env_spaces(env)
    agents = list(obs_spaces)
    try:  # agents of different spaces share padded columns (episodes.agent_spaces)
        obs_storage, act_storage, agent_spaces = storage_spaces(obs_spaces, act_spaces, what=config.env)
    finally:
        env.close()
    seed = int(np.random.SeedSequence().generate_state(1)[0] % 2**31) if config.seed is None else config.seed
    if policy is None and policy_factory is None and config.policy != "random":
        raise ValueError(f"policy {config.policy!r} needs a policy_factory (use offlinerl collect, or pass one: "
                         "offlinerl.evaluation.acting.checkpoint_team_policy)")
    runner_config = TeamRunnerConfig(env=config.env, env_kwargs=dict(config.env_kwargs), seed=seed,
                                     policy_factory=policy_factory, epsilon=config.epsilon)
    if config.num_env_runners:
        runners: Any = MultiAgentEnvRunnerGroup(runner_config, config.num_env_runners)
    else:
        runners = MultiAgentEnvRunner(runner_config, policy=policy)
    started = time.time()
    bar = progress_bar(total=config.num_episodes, desc="collect", unit="ep", enabled=progress)
    returns: list[float] = []
    lengths: list[int] = []
    provenance = {
        "collector": "offlinerl collect", "policy": config.policy, **(policy_info or {}), "explore": config.explore,
        "epsilon": config.epsilon, "seed": seed, "agents": agents, "env_kwargs": config.env_kwargs,
        "num_env_runners": config.num_env_runners, "env_runner_restarts": 0,
        "return": "team return: every agent's rewards summed", "gymnasium_version": gym.__version__,
        "seconds": None,
    }
    per_round = config.episodes_per_round or 16 * max(config.num_env_runners, 1)

    def episodes() -> Iterator:
        for start in range(0, config.num_episodes, per_round):
            played = runners.record(range(start, min(start + per_round, config.num_episodes)))
            returns.extend(played.returns)
            lengths.extend(played.lengths)
            bar.update(len(played.returns))
            yield from played.episodes
        provenance["seconds"] = round(time.time() - started, 2)
        provenance["env_runner_restarts"] = runners.num_restarts
        provenance.update({k.split("/", 1)[1]: v for k, v in episode_metrics(returns, lengths, "episode").items()})

    try:
        info = write_dataset(
            episodes(), config.output, observation_space=obs_storage, action_space=act_storage,
            env_id=config.env, env_spec={"id": config.env, "kwargs": dict(config.env_kwargs)},
            provenance=provenance, overwrite=config.overwrite, inputs=config.inputs, agent_spaces=agent_spaces,
        )
    finally:
        bar.close()
        runners.stop()
    check_collected_dataset(config.output, config.num_episodes * len(agents), local=True)
    return info


def check_collected_dataset(path: str | Path, num_episodes: int, *, local: bool = False) -> None:
    """Validate a freshly written dataset (the full validator if present, else a structural check); ``local``:
    in this process, without Ray."""
    try:
        from offlinerl.episodes.validate import validate_dataset  # type: ignore[import-not-found]
    except ImportError:
        validate_dataset = None
    if validate_dataset is not None:
        report = validate_dataset(path, local=local)
        if not report.ok:
            text = report.format() if hasattr(report, "format") else str(report)
            raise RuntimeError(f"{path}: the collected dataset does not validate:\n{text}")
    episodes = load_episodes(path)
    for ep in episodes:
        ep.check()
        if not (ep.terminated or ep.truncated):
            raise RuntimeError(f"{path}: episode {ep.id!r} was written without an end flag")
    if len(episodes) != num_episodes:
        raise RuntimeError(f"{path}: expected {num_episodes} episodes, found {len(episodes)}")
