"""The online experience of a multi-agent job: team episodes in a PettingZoo env, each agent's to its module.

    MultiAgentEnvRunner(s) (forward_exploration, the modules' inference-only copies)
        -> whole team episodes until env_steps_per_iteration env steps, episode k of iteration i reset with
           episode_seed(seed, i) + k
        -> each agent's episode to the module acting for it (policy_mapping, as the data was read)
        -> that module's learner connector pipeline (its own statistics)
        -> equal consecutive parts per module, one per learner  -> LearnerGroup.add_online ({module_id: columns})

Team episodes are played whole, so every add is complete episodes (returns can be computed). Episode ``k`` of
iteration ``i`` has the id ``online-<i>-<k>``, shared by its agents. An episode does not depend on which runner
plays it (``offlinerl.env.multi_agent_runner``), so the experience is the same for any number of runners. The
adds are remembered per (learner, module) replay for checkpoints, as single-agent experience is
(``offlinerl.training.experience``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Mapping

import gymnasium as gym
import numpy as np

from offlinerl.connectors import ConnectorPipeline, EpisodeColumns, split_module_states
from offlinerl.core import columns as C
from offlinerl.core import metrics as M
from offlinerl.core.rl_module import MultiRLModuleSpec
from offlinerl.env.multi_agent import TeamEpisodes
from offlinerl.env.multi_agent_runner import (LiveTeamPolicyFactory, MultiAgentEnvRunner, MultiAgentEnvRunnerGroup,
                                              TeamRunnerConfig)
from offlinerl.episodes import SingleAgentEpisode
from offlinerl.training.experience import ReplayLedger, _split, episode_seed
from offlinerl.training.online_config import OnlineConfig
from offlinerl.training.recording import OnlineRecording

__all__ = ["TeamExperience"]

Columns = dict[str, Any]


class TeamExperience(ReplayLedger):
    """Multi-agent runners (one in this process, or ``online.num_env_runners`` Ray actors), each module's
    learner pipeline, and the adds to the replays (module docstring). The same interface as
    ``OnlineExperience``; evaluation is the job's team loop (no evaluation runners)."""

    eval_runners: MultiAgentEnvRunnerGroup | None = None
    """``online.num_eval_env_runners`` runners playing the team evaluation (None: it plays in the driver)."""

    def __init__(
        self,
        online: OnlineConfig,
        *,
        seed: int,
        module_spec: MultiRLModuleSpec,
        learner_pipelines: Mapping[str, ConnectorPipeline],
        module_of: Callable[[SingleAgentEpisode], str],
        normalize: bool,
        observation_space: gym.Space,
        action_space: gym.Space,
        agent_spaces: Any = None,
        env: str,
        env_kwargs: Mapping[str, Any],
        num_learners: int,
        capacity_per_learner: int,
        eval_env: str | None = None,
        eval_env_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(observation_space=observation_space, action_space=action_space, num_learners=num_learners,
                         capacity_per_learner=capacity_per_learner, agent_spaces=agent_spaces)
        self.online, self.seed = online, seed
        self.learner_pipelines = dict(sorted(learner_pipelines.items()))
        self.module_of = module_of
        factory = LiveTeamPolicyFactory(module_spec, normalize, explore=online.explore)
        self._acting_keys = set(module_spec.build(inference_only=True).state_dict())
        config = TeamRunnerConfig(env=env, env_kwargs=dict(env_kwargs), seed=seed, policy_factory=factory)
        self.runners: MultiAgentEnvRunner | MultiAgentEnvRunnerGroup = (
            MultiAgentEnvRunnerGroup(config, online.num_env_runners,
                                     num_cpus_per_env_runner=online.num_cpus_per_env_runner)
            if online.num_env_runners else MultiAgentEnvRunner(config))
        if online.num_eval_env_runners and eval_env is not None:
            eval_factory = LiveTeamPolicyFactory(module_spec, normalize, explore=False)
            self.eval_runners = MultiAgentEnvRunnerGroup(
                TeamRunnerConfig(env=eval_env, env_kwargs=dict(eval_env_kwargs or {}), seed=0,
                                 policy_factory=eval_factory),
                online.num_eval_env_runners, num_cpus_per_env_runner=online.num_cpus_per_env_runner)
        self.recording: OnlineRecording | None = None
        """Where sampled episodes are also written (``offlinerl finetune --record``); None: nowhere."""
        self._played = TeamEpisodes()
        self._steps = self._last_steps = 0

    # -- sampling -----------------------------------------------------------------------------------
    def sample(self, iteration: int) -> list[SingleAgentEpisode]:
        """Whole team episodes until ``env_steps_per_iteration`` env steps in ``iteration`` (1 = the first): every
        agent's episode, the agents of one env episode together, recorded if asked."""
        seed = episode_seed(self.seed, iteration) % 2**31  # + k stays a valid env seed
        width = getattr(self.runners, "num_env_runners", 1)
        target = self.online.env_steps_per_iteration
        played, steps, k = TeamEpisodes(), 0, 0
        while steps < target:
            n = width if not k else max(width, -(-(target - steps) * k // steps))  # the episodes still needed, about
            got = self.runners.record(range(k, k + n), seed=seed)
            by_id: dict[str, list[SingleAgentEpisode]] = {}
            for e in got.episodes:
                by_id.setdefault(e.id, []).append(e)
            for j in range(n):  # in episode order, up to the target: the same episodes for any number of runners
                if steps >= target:
                    break
                played.episodes += [replace(e, id=f"online-{iteration}-{k + j}") for e in by_id.get(str(seed + k + j), [])]
                played.returns.append(got.returns[j])
                played.lengths.append(got.lengths[j])
                steps += got.lengths[j]
            k += n
        self._played.returns += played.returns
        self._played.lengths += played.lengths
        self._steps += steps
        self._last_steps = steps
        if self.recording is not None:
            self.recording.add(iteration, played.episodes)
        return played.episodes

    def steps(self, chunks: list[SingleAgentEpisode]) -> int:
        """Env steps (team steps, not agent steps) of the last ``sample``."""
        return self._last_steps

    def _shards(self, episodes: list[SingleAgentEpisode]) -> tuple[list[Columns], list[int]]:
        """Each learner's ``{module_id: columns}``; rows per (learner, module) replay, learner-major."""
        by_module: dict[str, list[SingleAgentEpisode]] = {mid: [] for mid in self.learner_pipelines}
        for ep in episodes:
            by_module[self.module_of(ep)].append(ep)
        shards: list[Columns] = [{} for _ in range(self.num_learners)]
        rows = np.zeros((self.num_learners, len(by_module)), dtype=int)
        for j, (mid, eps) in enumerate(by_module.items()):
            if not eps:
                continue
            parts = _split(self.learner_pipelines[mid]({}, EpisodeColumns.from_episodes(eps)), self.num_learners)
            for i, part in enumerate(parts):
                shards[i][mid] = part
                rows[i, j] = len(part[C.OBS])
        return shards, [int(r) for r in rows.reshape(-1)]

    # -- weights and connector state --------------------------------------------------------------------
    def sync(self, weights: Mapping[str, Any], connector_state: Mapping[str, Any], weights_seq_no: int) -> None:
        """Send the inference-only part of ``weights`` (the MultiRLModule's state) and each module's connector
        state to every runner."""
        state = {"policy": {k: v for k, v in weights.items() if k in self._acting_keys},
                 "connectors": split_module_states(connector_state, list(self.learner_pipelines)),
                 "weights_seq_no": weights_seq_no}
        if isinstance(self.runners, MultiAgentEnvRunnerGroup):
            self.runners.sync_state(state)
        else:
            self.runners.set_state(state)

    def evaluate_team(self, episodes: int, seed: int, weights: Mapping[str, Any],
                      connector_state: Mapping[str, Any]) -> TeamEpisodes:
        """The team evaluation on the evaluation runners: ``episodes`` deterministic episodes of the policy with
        ``weights`` (an inference-only module's state) and each module's ``connector_state``, episode ``j`` reset
        with ``seed + j``: the episodes the driver's team loop plays (``env.multi_agent.team_episodes``)."""
        self.eval_runners.sync_state({"policy": {k: v for k, v in weights.items() if k in self._acting_keys},
                                      "connectors": split_module_states(connector_state, list(self.learner_pipelines)),
                                      "weights_seq_no": 0})
        return self.eval_runners.record(range(episodes), seed=seed)

    def metrics(self) -> dict[str, float]:
        """The team episodes and env steps sampled since the last call (team returns: every agent's rewards)."""
        out = M.episode_metrics(self._played.returns, self._played.lengths, M.RUNNER_EPISODE)
        out[M.RUNNER_ENV_STEPS] = self._steps
        out[M.RUNNER_RESTARTS] = getattr(self.runners, "num_restarts", 0)
        self._played, self._steps = TeamEpisodes(), 0
        return out

    def stop(self) -> None:
        self.runners.stop()
        if self.eval_runners is not None:
            self.eval_runners.stop()
