"""Multi-agent episodes in PettingZoo parallel envs: the team loop that evaluation and recording share.

    {agent: obs} -> joint policy -> {agent: action} -> env.step -> {agent: reward}, ...

A *joint policy* maps the live agents' observations of one env step to their actions (and, when it can,
each action's ``action_logp``); :class:`ModuleJointPolicy` acts with a ``MultiRLModule``: the agents that share
a module (``MultiRLModule.module_for_agent``) go through it in one batched forward, each module with its own
env-to-module pipeline (its own normalisation statistics). :class:`RandomJointPolicy` samples each agent's
action space uniformly, with exact log-probabilities.

:func:`run_team_episodes` plays one episode per seed (``env.reset(seed=s)``) in one env and returns the team
return (the sum of every agent's rewards: what ``eval/return_mean`` reports for a multi-agent job), the
length, each agent's own return, and - with ``record=True`` - each agent's episode as a
``SingleAgentEpisode`` with ``agent_id`` (episode ids shared by the agents of one env episode), the rows a
multi-agent dataset holds. An agent's episode ends when the env reports it terminated or truncated (its last
observation is the one that step returned); the env episode ends when no agent is left.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, Protocol, Sequence

import numpy as np
import torch

from offlinerl.connectors import ConnectorPipeline, module_to_env_pipeline
from offlinerl.core import columns as C
from offlinerl.core import metrics as M
from offlinerl.core.rl_module import MultiRLModule
from offlinerl.env.policies import RandomPolicy, act
from offlinerl.env.recorder import EpisodeRecorder
from offlinerl.episodes.episode import SingleAgentEpisode
from offlinerl.trusted import make_parallel_env

__all__ = ["JointPolicy", "ModuleJointPolicy", "RandomJointPolicy", "TeamEpisodes", "run_team_episodes",
           "team_episodes", "team_metrics", "env_spaces"]

#: Longest env episode played (a PettingZoo env without a time limit would otherwise run forever).
MAX_EPISODE_STEPS = 100_000


class JointPolicy(Protocol):
    """Actions of the live agents of one env step: ``{agent: obs} -> ({agent: action}, {agent: {column: value}})``
    (the second mapping holds per-step extras such as ``action_logp``; empty when the policy has none)."""

    def __call__(self, observations: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]: ...


def env_spaces(env: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """``({agent: observation space}, {agent: action space})`` of a PettingZoo parallel env's possible agents."""
    agents = list(env.possible_agents)
    return ({a: env.observation_space(a) for a in agents}, {a: env.action_space(a) for a in agents})


class RandomJointPolicy:
    """Every agent acts uniformly at random in its own action space (``action_logp`` exact), seeded per agent."""

    def __init__(self, observation_spaces: Mapping[str, Any], action_spaces: Mapping[str, Any],
                 seed: int | None = None) -> None:
        self.observation_spaces, self.action_spaces = dict(observation_spaces), dict(action_spaces)
        self.policies = {a: RandomPolicy(observation_spaces[a], space, seed=None if seed is None else seed + i)
                         for i, (a, space) in enumerate(sorted(action_spaces.items()))}

    def reseed(self, entropy: Sequence[int]) -> None:
        """Restart every agent's stream from ``entropy`` (agent ``i`` in sorted order: ``[*entropy, i]``), e.g.
        ``[seed, k]`` before episode ``k``, so its actions depend on nothing played before."""
        self.policies = {a: RandomPolicy(self.observation_spaces[a], space, seed=[*map(int, entropy), i])
                         for i, (a, space) in enumerate(sorted(self.action_spaces.items()))}

    def __call__(self, observations: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        actions, extras = {}, {}
        for agent, obs in observations.items():
            out = self.policies[agent].forward_exploration({C.OBS: np.asarray(obs)[None]})
            actions[agent] = np.asarray(out[C.ACTIONS])[0]
            extras[agent] = {C.ACTION_LOGP: np.float32(np.asarray(out[C.ACTION_LOGP]).reshape(-1)[0])}
        return actions, extras


class ModuleJointPolicy:
    """A ``MultiRLModule`` acting for every agent: the agents one module acts for in one batched forward.

    ``env_to_module``: one pipeline for every module, or ``{module_id: pipeline}`` (each module's own
    statistics). ``explore``: ``forward_exploration`` (sampled actions, ``action_logp`` recorded) instead of
    ``forward_inference``."""

    def __init__(self, module: MultiRLModule, env_to_module: ConnectorPipeline | Mapping[str, ConnectorPipeline],
                 action_spaces: Mapping[str, Any], *, explore: bool = False,
                 device: torch.device | str | None = None) -> None:
        self.module = module
        self.env_to_module = env_to_module
        self.to_env = {a: module_to_env_pipeline(space) for a, space in action_spaces.items()}
        self.explore = explore
        self.device = device
        self._module_of: dict[str, str] = {}

    def set_state(self, weights: Mapping[str, Any], env_to_module: Mapping[str, ConnectorPipeline]) -> None:
        """Act with ``weights`` (the module's inference-only state) and each module's ``env_to_module`` pipeline
        from now on (an online job's runner, after every update)."""
        self.module.load_state_dict(dict(weights))
        self.env_to_module = dict(env_to_module)

    def _pipeline(self, module_id: str) -> ConnectorPipeline:
        if isinstance(self.env_to_module, Mapping):
            return self.env_to_module[module_id]
        return self.env_to_module

    def module_id(self, agent: str) -> str:
        if agent not in self._module_of:
            self._module_of[agent] = self.module.module_for_agent(agent)
        return self._module_of[agent]

    def __call__(self, observations: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        groups: dict[str, list[str]] = {}
        for agent in observations:
            groups.setdefault(self.module_id(agent), []).append(agent)
        actions, extras = {}, {}
        for mid, agents in groups.items():
            obs = np.stack([np.asarray(observations[a]) for a in agents])
            out = act(self.module[mid], self._pipeline(mid), self.to_env[agents[0]], obs, explore=self.explore,
                      device=self.device)
            for k, agent in enumerate(agents):
                actions[agent] = out[C.ACTIONS][k]
                extras[agent] = {C.ACTION_LOGP: np.float32(out[C.ACTION_LOGP][k])} if C.ACTION_LOGP in out else {}
        return actions, extras


@dataclass
class TeamEpisodes:
    """What :func:`run_team_episodes` played, one entry per seed, in seed order."""

    returns: list[float] = field(default_factory=list)
    """Team return of each episode: the sum of every agent's rewards."""
    lengths: list[int] = field(default_factory=list)
    """Env steps of each episode."""
    agent_returns: dict[str, list[float]] = field(default_factory=dict)
    """Each agent's own return per episode (0 for an episode it was not part of)."""
    episodes: list[SingleAgentEpisode] = field(default_factory=list)
    """Per-agent episodes (``record=True``), agents of one env episode together, in agent order."""


def run_team_episodes(env: Any, policy: JointPolicy | Callable, seeds: Sequence[int], *, record: bool = False,
                      id_prefix: str = "ep") -> TeamEpisodes:
    """One episode of the PettingZoo parallel ``env`` per seed with the joint ``policy`` (module docstring)."""
    out = TeamEpisodes(agent_returns={a: [] for a in env.possible_agents})
    for k, seed in enumerate(seeds):
        observations, _ = env.reset(seed=int(seed))
        episode_id = f"{id_prefix}-{k}"
        recorders = {a: EpisodeRecorder(episode_id, k, _one(o)) for a, o in observations.items()} if record else {}
        finished: list[SingleAgentEpisode] = []
        returns = dict.fromkeys(env.possible_agents, 0.0)
        steps = 0
        while env.agents and steps < MAX_EPISODE_STEPS:
            live = {a: observations[a] for a in env.agents}
            actions, extras = policy(live)
            observations, rewards, terminations, truncations, _ = env.step(actions)
            steps += 1
            for agent in live:
                reward = float(rewards.get(agent, 0.0))
                returns[agent] += reward
                if agent not in recorders:
                    continue
                step_extras = {name: np.asarray(v)[None] for name, v in extras.get(agent, {}).items()}
                recorders[agent].add_step(_one(actions[agent]), reward, _one(observations[agent]), step_extras)
                terminated, truncated = bool(terminations.get(agent)), bool(truncations.get(agent))
                if terminated or truncated or steps >= MAX_EPISODE_STEPS:
                    finished.append(replace(recorders.pop(agent).finish(terminated, truncated or not terminated),
                                            agent_id=str(agent)))
        for agent, recorder in recorders.items():  # left without an end flag (the env dropped it): cut short
            finished.append(replace(recorder.finish(False, True), agent_id=str(agent)))
        order = {a: i for i, a in enumerate(env.possible_agents)}
        out.episodes.extend(sorted((e for e in finished if len(e)), key=lambda e: order[e.agent_id]))
        out.returns.append(float(sum(returns.values())))
        out.lengths.append(steps)
        for agent, value in returns.items():
            out.agent_returns[agent].append(value)
    return out


def _one(value: Any) -> Any:
    """A length-1 batch of one observation or action (``EpisodeRecorder`` takes batches)."""
    return np.asarray(value)[None]


@torch.no_grad()
def team_episodes(module: MultiRLModule, env_id: str, env_to_module: ConnectorPipeline | Mapping[str, ConnectorPipeline],
                  *, episodes: int = 10, seed: int = 10_000, env_kwargs: Mapping[str, Any] | None = None,
                  explicit: bool = True) -> TeamEpisodes:
    """``episodes`` deterministic (``forward_inference``) episodes of ``module`` in the PettingZoo env ``env_id``
    (``pettingzoo:MODULE``), episode ``j`` reset with ``seed + j``."""
    from offlinerl.env.evaluation import check_evaluation  # here: evaluation imports this module's neighbours

    check_evaluation(episodes, seed)
    module.eval()
    env = make_parallel_env(env_id, env_kwargs, explicit=explicit)
    try:
        _, action_spaces = env_spaces(env)
        device = next(module.parameters()).device
        policy = ModuleJointPolicy(module, env_to_module, action_spaces, device=device)
        return run_team_episodes(env, policy, [seed + j for j in range(episodes)])
    finally:
        env.close()


def team_metrics(played: TeamEpisodes, prefix: str = M.EVAL) -> dict[str, float]:
    """``episode_metrics`` of the team returns under ``prefix``, and each agent's ``<prefix>/<agent>/return_mean``."""
    out = M.episode_metrics(played.returns, played.lengths, prefix)
    for agent, returns in sorted(played.agent_returns.items()):
        if returns:
            out[f"{prefix}/{agent}/return_mean"] = float(np.mean(returns))
    return out
