"""The online experience an ``Algorithm`` owns when it is given an ``OnlineConfig``.

The mechanics, not the schedule (``Algorithm.training_step`` decides what
happens when)::

    EnvRunnerGroup.sample (forward_exploration, episodes seeded per iteration)
        -> [complete episodes only, where the learner pipeline computes returns]
        -> the learner connector pipeline (the offline data's, same statistics)
        -> equal consecutive parts, one per learner  -> LearnerGroup.add_online

Every add is remembered (its episodes and the transitions each learner got) for
as long as any of those transitions may still be in a learner's replay: a
checkpoint writes them as an episode dataset (``ReplayEpisodes``), and
``rebuild`` runs them through the same pipeline and split again, in the same
order, so every replay gets back exactly what it held.

Restart rule: a runner with no episode in progress resets its envs with a seed
derived from the config seed and the iteration (``episode_seed``), every
iteration. A job resumed from a checkpoint has fresh runners: they start new
episodes that way, and episodes that were running when the checkpoint was
written are not continued (their chunks so far stay in the replay and in the
recording, which closes them as truncated). Where iterations end on episode
boundaries (e.g. Pendulum-v1: 200-step episodes, ``env_steps_per_iteration`` a
multiple of 200, one env per runner) the resumed job samples exactly what the
uninterrupted one did.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import gymnasium as gym
import numpy as np

from offlinerl.connectors import ConnectorPipeline, EpisodeColumns, module_to_env_pipeline
from offlinerl.core import columns as C
from offlinerl.core.rl_module import RLModuleSpec
from offlinerl.env import EnvRunnerConfig, EnvRunnerGroup
from offlinerl.env.module_policy import ModulePolicyFactory, PipelineConnectors, module_weights
from offlinerl.episodes import SingleAgentEpisode
from offlinerl.training.checkpoint_replay import ReplayEpisodes
from offlinerl.training.online_config import OnlineConfig
from offlinerl.training.recording import OnlineRecording

__all__ = ["ReplayLedger", "OnlineExperience", "episode_seed"]

Columns = dict[str, np.ndarray]


def episode_seed(seed: int, iteration: int) -> int:
    """The seed runners start new episodes from in ``iteration`` (1 = the first) of a job seeded ``seed``."""
    return int(np.random.SeedSequence([seed, iteration]).generate_state(1)[0])


@dataclass
class _Add:
    """One add to the replays: its iteration, its episodes, and the transitions each learner got."""

    iteration: int
    episodes: list[SingleAgentEpisode]
    rows: list[int]


def _split(transitions: Mapping[str, np.ndarray], parts: int) -> list[Columns]:
    """``parts`` consecutive slices of (nearly) equal size."""
    n = len(next(iter(transitions.values())))
    bounds = np.linspace(0, n, parts + 1).astype(int)
    return [{k: v[bounds[i]:bounds[i + 1]] for k, v in transitions.items()} for i in range(parts)]


def _concat(parts: list[Mapping[str, Any]]) -> dict[str, Any]:
    """Columns (or ``{module_id: columns}``) of consecutive parts joined, oldest first."""
    keyed: dict[str, list[Any]] = {}
    for part in parts:
        for k, v in part.items():
            keyed.setdefault(k, []).append(v)
    return {k: _concat(v) if isinstance(v[0], Mapping) else np.concatenate(v) for k, v in keyed.items()}


class ReplayLedger:
    """The adds to the learners' replays, kept while any of their transitions may still be in one (module
    docstring): what a checkpoint writes (``replay_episodes``) and what ``rebuild`` turns back into every
    replay's transitions. A subclass says how episodes become each learner's part (``_shards``)."""

    def __init__(self, *, observation_space: gym.Space, action_space: gym.Space, num_learners: int,
                 capacity_per_learner: int, agent_spaces: Any = None) -> None:
        self.observation_space, self.action_space = observation_space, action_space
        self.agent_spaces = agent_spaces
        """Agents of different spaces (``episodes.agent_spaces``): what replays and recordings are written with."""
        self.num_learners = num_learners
        self.capacity = capacity_per_learner
        self.replay_size = 0
        """Transitions the learners' replays hold (all learners)."""
        self._adds: list[_Add] = []
        self._totals: list[int] = []

    def _shards(self, episodes: list[SingleAgentEpisode]) -> tuple[list[Columns], list[int]]:
        """Each learner's part of the transitions ``episodes`` make, and the rows each replay (a learner's, or a
        learner's module's) gets from them."""
        raise NotImplementedError

    def _usable(self, chunks: list[SingleAgentEpisode]) -> list[SingleAgentEpisode]:
        """The experience the learner may use now."""
        return chunks

    def to_learners(self, chunks: list[SingleAgentEpisode], iteration: int) -> list[Columns] | None:
        """Each learner's part of the transitions the chunks ``iteration`` sampled make (None: nothing usable yet)."""
        usable = self._usable(chunks)
        if not usable:
            return None
        shards, rows = self._shards(usable)
        self._remember(_Add(iteration, usable, rows))
        return shards

    def _remember(self, add: _Add) -> None:
        """Keep the adds whose transitions may still be in some replay (the newest ``capacity`` of each)."""
        self._adds.append(add)
        self._totals = [t + r for t, r in zip(self._totals or [0] * len(add.rows), add.rows)]
        first = len(self._adds)
        for replay, total in enumerate(self._totals):
            need, held = min(total, self.capacity), 0
            for i in range(len(self._adds) - 1, -1, -1):
                if held >= need:
                    break
                held += self._adds[i].rows[replay]
                first = min(first, i)
        del self._adds[:first]

    # -- checkpoints ----------------------------------------------------------------------------------
    def replay_episodes(self) -> ReplayEpisodes:
        """What a checkpoint keeps to rebuild the replays (episodes still waiting to complete are not kept)."""
        return ReplayEpisodes([a.episodes for a in self._adds], [a.iteration for a in self._adds],
                              self.observation_space, self.action_space, self.agent_spaces)

    def rebuild(self, replay: ReplayEpisodes) -> list[Columns]:
        """Every learner's transitions, oldest first, from a checkpoint's episodes (the same pipeline and split)."""
        self._adds, self._totals = [], []
        parts: list[list[Columns]] = [[] for _ in range(self.num_learners)]
        for iteration, episodes in zip(replay.iterations, replay.groups):
            shards, rows = self._shards(list(episodes))
            self._remember(_Add(int(iteration), list(episodes), rows))
            for learner, shard in enumerate(shards):
                parts[learner].append(shard)
        return [_concat(part) for part in parts]


class OnlineExperience(ReplayLedger):
    """Sampling runners (and evaluation runners), episodes waiting to complete, and the adds to the replays."""

    def __init__(
        self,
        online: OnlineConfig,
        *,
        seed: int,
        module_spec: RLModuleSpec,
        learner_pipeline: ConnectorPipeline,
        env_to_module: ConnectorPipeline,
        observation_space: gym.Space,
        action_space: gym.Space,
        env: str,
        env_kwargs: Mapping[str, Any],
        eval_env: str,
        eval_env_kwargs: Mapping[str, Any],
        eval_episodes: int,
        num_learners: int,
        capacity_per_learner: int,
    ) -> None:
        super().__init__(observation_space=observation_space, action_space=action_space, num_learners=num_learners,
                         capacity_per_learner=capacity_per_learner)
        self.online = online
        self.seed = seed
        self.learner_pipeline = learner_pipeline
        self.needs_complete_episodes = learner_pipeline.needs_complete_episodes
        policy = ModulePolicyFactory(module_spec)
        # Only what acting needs travels to the runners (no critics, no target networks).
        self._acting_keys = set(module_spec.build(inference_only=True).state_dict())
        connectors = PipelineConnectors(env_to_module, module_to_env_pipeline(action_space))
        self.runners = EnvRunnerGroup(
            EnvRunnerConfig(env=env, env_kwargs=dict(env_kwargs), num_envs=online.num_envs, seed=seed,
                            explore=online.explore, record_weights_seq_no=True),
            policy, connectors, num_env_runners=online.num_env_runners,
            num_cpus_per_env_runner=online.num_cpus_per_env_runner,
        )
        self.eval_runners = None
        if online.num_eval_env_runners:
            self.eval_runners = EnvRunnerGroup(
                EnvRunnerConfig(env=eval_env, env_kwargs=dict(eval_env_kwargs), num_envs=min(eval_episodes, 16),
                                explore=False),
                policy, connectors, num_env_runners=online.num_eval_env_runners,
                num_cpus_per_env_runner=online.num_cpus_per_env_runner,
            )
        self._state: dict[str, Any] = {}
        self.recording: OnlineRecording | None = None
        """Where sampled chunks are also written (``offlinerl finetune --record``); None: nowhere."""
        self._pending: dict[str, list[SingleAgentEpisode]] = {}

    # -- sampling -----------------------------------------------------------------------------------
    def sample(self, iteration: int) -> list[SingleAgentEpisode]:
        """``env_steps_per_iteration`` steps from the runners in ``iteration`` (1 = the first), recorded if asked."""
        chunks = self.runners.sample(num_timesteps=self.online.env_steps_per_iteration,
                                     episode_seed=episode_seed(self.seed, iteration))
        if self.recording is not None:
            self.recording.add(iteration, chunks)
        return chunks

    def _usable(self, chunks: list[SingleAgentEpisode]) -> list[SingleAgentEpisode]:
        """The experience the learner may use now (complete episodes only where returns are computed)."""
        if not self.needs_complete_episodes:
            return chunks
        done = []
        for c in chunks:
            self._pending.setdefault(c.id, []).append(c)
            if c.terminated or c.truncated:
                done.append(SingleAgentEpisode.concat(self._pending.pop(c.id)))
        return done

    def _shards(self, episodes: list[SingleAgentEpisode]) -> tuple[list[Columns], list[int]]:
        shards = _split(self.learner_pipeline({}, EpisodeColumns.from_episodes(episodes)), self.num_learners)
        return shards, [len(s[C.OBS]) for s in shards]

    def rebuild(self, replay: ReplayEpisodes) -> list[Columns]:
        self._pending = {}
        return super().rebuild(replay)

    def steps(self, chunks: list[SingleAgentEpisode]) -> int:
        """Env steps the sampled ``chunks`` took."""
        return sum(len(c) for c in chunks)

    # -- weights and connector state --------------------------------------------------------------------
    def _acting(self, weights: Mapping[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in module_weights(weights, C.DEFAULT_MODULE_ID).items() if k in self._acting_keys}

    def sync(self, weights: Mapping[str, Any], connector_state: Mapping[str, Any], weights_seq_no: int) -> None:
        """Send the inference-only part of ``weights`` (a MultiRLModule state), the env-to-module connector state
        and ``weights_seq_no`` to every runner."""
        self._state = {"policy": self._acting(weights), "connectors": dict(connector_state),
                       "weights_seq_no": weights_seq_no}
        self.runners.sync_state(self._state)

    def evaluate_episodes(self, episodes: int, seed: int, weights: Mapping[str, Any] | None = None
                          ) -> tuple[list[float], list[int]]:
        """Returns and lengths (in seed order) of ``episodes`` ``forward_inference`` episodes on the evaluation
        runners, with the last synced state (``weights``: with these weights instead, e.g. a gated job's
        deployed policy)."""
        assert self.eval_runners is not None
        state = self._state if weights is None else {**self._state, "policy": self._acting(weights)}
        self.eval_runners.sync_state(state)
        return self.eval_runners.evaluate_episodes(episodes, seed=seed)

    def metrics(self) -> dict[str, float]:
        """The runners' episodes and env steps since the last call, and their restarts."""
        return self.runners.get_metrics()

    def stop(self) -> None:
        self.runners.stop()
        if self.eval_runners is not None:
            self.eval_runners.stop()

