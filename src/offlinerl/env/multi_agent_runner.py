"""Recording seeded multi-agent episodes in this process or on ``MultiAgentEnvRunner`` Ray actors.

    episodes 0..n-1 -> rounds -> each round split into contiguous runs, one per runner
                    -> runner w: record_team_episodes(its env, its joint policy, seed, its run)
                    -> runs merged back in episode order

Episode ``k`` resets its env with ``seed + k`` (its id is ``str(seed + k)``), and every random draw it makes
comes from streams started from ``(seed, k)`` alone: :class:`RandomJointPolicy`'s agents (``reseed``), the
torch stream a module samples from (``forward_exploration``), and epsilon mixing. So an episode does not
depend on which runner plays it, nor on the episodes that runner played before, and a dataset is the same
whatever the number of runners (0: this process). A runner that dies is replaced once (its episodes played
again, identically); a second death of the same runner stops the recording with an error naming it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import torch

from offlinerl.env.env_runner_group import gather_restarting
from offlinerl.env.multi_agent import (JointPolicy, ModuleJointPolicy, RandomJointPolicy, TeamEpisodes, env_spaces,
                                       run_team_episodes)

__all__ = ["TeamRunnerConfig", "team_policy", "record_team_episodes", "LiveTeamPolicyFactory", "MultiAgentEnvRunner",
           "MultiAgentEnvRunnerGroup"]


@dataclass(frozen=True, kw_only=True)
class TeamRunnerConfig:
    """What every runner of a multi-agent recording builds: its env and its joint policy."""

    env: str
    """A PettingZoo parallel env, ``pettingzoo:MODULE`` (made in each runner, as the user typed it)."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments of ``MODULE.parallel_env``."""
    seed: int
    """Episode ``k`` resets with ``seed + k``; its random draws start from ``(seed, k)``."""
    policy_factory: Any = None
    """A picklable ``(observation_spaces, action_spaces) -> JointPolicy`` called in each runner (e.g. rebuilding a
    checkpoint's modules there: ``offlinerl.evaluation.acting.TeamPolicyFactory``); None: uniformly random."""
    epsilon: float = 0.0
    """Probability of each agent's action being replaced by a uniform one (``action_logp`` then not recorded)."""
    torch_threads: int = 1
    """``torch.set_num_threads`` inside each runner actor."""


def team_policy(config: TeamRunnerConfig, observation_spaces: Mapping[str, Any],
                action_spaces: Mapping[str, Any]) -> JointPolicy:
    """The joint policy of ``config``: ``config.policy_factory(observation_spaces, action_spaces)`` (e.g. a
    checkpoint's modules, ``offlinerl.evaluation.acting.TeamPolicyFactory``), else uniformly random."""
    if config.policy_factory is not None:
        return config.policy_factory(observation_spaces, action_spaces)
    return RandomJointPolicy(observation_spaces, action_spaces)


def record_team_episodes(env: Any, policy: JointPolicy, seed: int, indices: Sequence[int], *, epsilon: float = 0.0,
                         action_spaces: Mapping[str, Any] | None = None) -> TeamEpisodes:
    """Episodes ``indices`` of a recording (module docstring), each agent's episode with id ``str(seed + k)``.

    The process's torch stream is left as it was. ``action_spaces`` (needed with ``epsilon > 0``): each agent's."""
    out = TeamEpisodes(agent_returns={a: [] for a in env.possible_agents})
    with torch.random.fork_rng():
        for k in indices:
            entropy = [int(seed), int(k)]
            torch.manual_seed(int(np.random.SeedSequence(entropy).generate_state(1)[0]))
            if hasattr(policy, "reseed"):
                policy.reseed(entropy)
            acting = policy if epsilon <= 0 else _EpsilonJoint(policy, action_spaces or env_spaces(env)[1], epsilon,
                                                               np.random.default_rng([*entropy, 2**31]))
            played = run_team_episodes(env, acting, [seed + k], record=True)
            out.episodes.extend(replace(e, id=str(seed + k)) for e in played.episodes)
            out.returns += played.returns
            out.lengths += played.lengths
            for agent, returns in played.agent_returns.items():
                out.agent_returns[agent] += returns
    return out


class LiveTeamPolicyFactory:
    """Picklable: an online job's joint policy, built in each runner from ``module_spec`` (inference-only modules,
    sampled actions with ``explore``); its weights and each module's observation statistics arrive with
    ``MultiAgentEnvRunner.set_state`` before it acts."""

    def __init__(self, module_spec: Any, normalize: bool, explore: bool = True) -> None:
        self.module_spec = module_spec
        self.normalize, self.explore = normalize, explore

    def env_to_module(self, states: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
        """Each module's env-to-module pipeline with its connector state (``{module_id: state}``)."""
        from offlinerl.connectors import env_to_module_pipeline

        return {mid: env_to_module_pipeline(spec.observation_space, self.normalize, states.get(mid))
                for mid, spec in self.module_spec.specs.items()}

    def __call__(self, observation_spaces: Mapping[str, Any], action_spaces: Mapping[str, Any]) -> JointPolicy:
        module = self.module_spec.build(inference_only=True).eval()
        return ModuleJointPolicy(module, self.env_to_module({}), action_spaces, explore=self.explore)


class _EpsilonJoint:
    """A joint policy whose agents each act uniformly at random with probability ``epsilon`` (no ``action_logp``)."""

    def __init__(self, policy: Any, action_spaces: Mapping[str, Any], epsilon: float, rng: Any) -> None:
        self.policy, self.action_spaces, self.epsilon, self.rng = policy, action_spaces, epsilon, rng

    def __call__(self, observations: Any) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        from offlinerl.env.policies import epsilon_mix

        actions, _ = self.policy(observations)
        out = {}
        for agent, action in actions.items():
            mixed, _ = epsilon_mix(np.asarray(action)[None], self.action_spaces[agent], self.epsilon, self.rng, None)
            out[agent] = mixed[0]
        return out, {}


class MultiAgentEnvRunner:
    """One PettingZoo parallel env and one joint policy, both built from a :class:`TeamRunnerConfig` (in a Ray
    actor: nothing live is shipped to it). In this process (``worker_index`` 0) a live joint ``policy`` may
    replace ``config.policy_factory``."""

    num_restarts = 0
    """Never restarted (the attribute :class:`MultiAgentEnvRunnerGroup` counts its restarts in)."""

    def __init__(self, config: TeamRunnerConfig, worker_index: int = 0, policy: JointPolicy | None = None) -> None:
        from offlinerl.trusted import make_parallel_env

        if worker_index > 0:  # a Ray actor: stay within its CPU share
            torch.set_num_threads(config.torch_threads)
        self.config, self.worker_index = config, worker_index
        self.env = make_parallel_env(config.env, config.env_kwargs, explicit=True)
        observation_spaces, self.action_spaces = env_spaces(self.env)
        self.policy = policy if policy is not None else team_policy(config, observation_spaces, self.action_spaces)

    def record(self, indices: Sequence[int], seed: int | None = None) -> TeamEpisodes:
        """Episodes ``indices`` of the recording (:func:`record_team_episodes`); ``seed``: instead of the config's
        (an online job's iteration)."""
        return record_team_episodes(self.env, self.policy, self.config.seed if seed is None else seed, indices,
                                    epsilon=self.config.epsilon, action_spaces=self.action_spaces)

    def set_state(self, state: Mapping[str, Any]) -> bool:
        """An online job's sync: ``{"policy": inference-only weights, "connectors": {module_id: state}}`` into the
        joint policy (built by a :class:`LiveTeamPolicyFactory`)."""
        self.policy.set_state(state["policy"], self.config.policy_factory.env_to_module(state["connectors"]))
        return True

    def node_id(self) -> str | None:
        """The Ray node this runner runs on (None without Ray)."""
        from offlinerl.ray_utils import node_id

        return node_id()

    def node_ids(self) -> list[str | None]:
        """As a group of one (in this process): the driver's node."""
        return [self.node_id()]

    def stop(self) -> None:
        self.env.close()


class MultiAgentEnvRunnerGroup:
    """``num_env_runners`` :class:`MultiAgentEnvRunner` actors, each reserving ``num_cpus_per_env_runner`` CPUs
    (shared out when the cluster has fewer); each builds its joint policy from ``config.policy_factory``."""

    def __init__(self, config: TeamRunnerConfig, num_env_runners: int, *,
                 num_cpus_per_env_runner: float = 1.0) -> None:
        import ray

        from offlinerl.ray_utils import init_ray

        if num_env_runners < 1:
            raise ValueError(f"num_env_runners must be >= 1, got {num_env_runners}")
        init_ray()
        cpus = float(ray.cluster_resources().get("CPU", 1.0))
        self.num_cpus_per_env_runner = min(num_cpus_per_env_runner, cpus / num_env_runners)
        self.config = config
        self.num_restarts = 0
        self._restarted = [False] * num_env_runners
        self._state: dict[str, Any] | None = None
        self._remote_cls = ray.remote(num_cpus=self.num_cpus_per_env_runner, max_restarts=0)(MultiAgentEnvRunner)
        self._actors = [self._remote_cls.remote(config, worker_index=i + 1) for i in range(num_env_runners)]

    @property
    def num_env_runners(self) -> int:
        return len(self._actors)

    def record(self, indices: Sequence[int], seed: int | None = None) -> TeamEpisodes:
        """Episodes ``indices``, split into contiguous runs over the runners and merged back in their order
        (``seed``: instead of the config's)."""
        indices = list(indices)
        bounds = np.linspace(0, len(indices), len(self._actors) + 1).astype(int)
        runs = [indices[bounds[i]:bounds[i + 1]] for i in range(len(self._actors))]
        results = gather_restarting(lambda i: self._actors[i].record.remote(runs[i], seed),
                                    [i for i, run in enumerate(runs) if run], self._restart, len(runs))
        out = TeamEpisodes()
        for played in (r for r in results if r is not None):
            out.episodes += played.episodes
            out.returns += played.returns
            out.lengths += played.lengths
            for agent, returns in played.agent_returns.items():
                out.agent_returns.setdefault(agent, []).extend(returns)
        return out

    def node_ids(self) -> list[str | None]:
        """The Ray node of each runner."""
        import ray

        return ray.get([actor.node_id.remote() for actor in self._actors])

    def sync_state(self, state: Mapping[str, Any]) -> None:
        """``MultiAgentEnvRunner.set_state`` on every runner (kept for a runner that is restarted)."""
        import ray

        self._state = dict(state)
        ray.get([actor.set_state.remote(self._state) for actor in self._actors])

    def _restart(self, index: int, error: BaseException) -> None:
        import ray

        first_line = (str(error).strip().splitlines() or [type(error).__name__])[0]
        if self._restarted[index]:
            raise RuntimeError(f"multi-agent env runner {index + 1} died again after a restart: {first_line}") \
                from error
        try:
            ray.kill(self._actors[index], no_restart=True)
        except Exception:  # noqa: BLE001 - already gone
            pass
        self._restarted[index] = True
        self.num_restarts += 1
        self._actors[index] = self._remote_cls.remote(self.config, worker_index=index + 1)
        if self._state is not None:  # an online job's runner acts with the weights it had
            self._actors[index].set_state.remote(self._state)

    def stop(self) -> None:
        import ray

        for actor in self._actors:
            try:
                ray.kill(actor, no_restart=True)
            except Exception:  # noqa: BLE001 - already gone
                pass
        self._actors = []
