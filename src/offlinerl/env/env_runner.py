"""``EnvRunner``: steps a gymnasium vector env with a policy and returns
``SingleAgentEpisode``s (complete episodes and chunks of running ones).

    env obs → [env-to-module] → policy.forward_exploration / forward_inference
            → [module-to-env] → (epsilon mixing) → env.step

Gymnasium 1.x vector envs reset a finished sub-env on the step *after* it
ended (``next_step`` autoreset): that step ignores its action and returns the
first observation of a new episode, so it starts a recorder and is never
recorded as a transition. In ``same_step`` mode the last observation comes
from ``infos["final_obs"]``. ``terminated`` and ``truncated`` are copied from
the env exactly.

A seeded runner also owns the random stream its policy samples actions from
(``forward_exploration``): seeded at every seeded ``reset`` and kept apart from
the process's global torch stream (an in-process learner's), so what a runner
does depends only on its seeds and the weights it was sent. ``sample(...,
episode_seed=s)`` starts new episodes from ``s`` whenever the runner has none in
progress: an online job passes a seed derived from its iteration, so a job
resumed from a checkpoint at an episode boundary samples what the uninterrupted
job sampled.
"""

from __future__ import annotations

import uuid
from typing import Any, Callable, Sequence

import gymnasium as gym
import numpy as np
import torch

from offlinerl.connectors import env_to_module_pipeline, module_to_env_pipeline
from offlinerl.core.columns import ACTION_DIST_INPUTS, ACTION_LOGP, WEIGHTS_SEQ_NO
from offlinerl.env.config import EnvRunnerConfig
from offlinerl.env.evaluation import run_episodes
from offlinerl.env.policies import ActingPolicy, RandomPolicy, epsilon_mix, forward, module_inputs, to_env
from offlinerl.env.recorder import EpisodeRecorder
from offlinerl.episodes.arrow import batch_slice
from offlinerl.episodes.episode import SingleAgentEpisode

__all__ = ["EnvRunner", "PolicyFactory", "ConnectorsFactory", "random_policy_factory"]

#: ``(observation_space, action_space) -> ActingPolicy`` (built inside each runner).
PolicyFactory = Callable[[gym.Space, gym.Space], ActingPolicy]
#: ``(observation_space, action_space) -> (env_to_module, module_to_env)``.
ConnectorsFactory = Callable[[gym.Space, gym.Space], tuple[Callable, Callable]]



def random_policy_factory(seed: int | None = None) -> PolicyFactory:
    """A picklable factory of :class:`RandomPolicy` (seeded per runner by the runner)."""
    return _RandomPolicyFactory(seed)


class _RandomPolicyFactory:
    def __init__(self, seed: int | None) -> None:
        self.seed = seed

    def __call__(self, observation_space: gym.Space, action_space: gym.Space) -> RandomPolicy:
        return RandomPolicy(observation_space, action_space, seed=self.seed)


def _default_connectors(observation_space: gym.Space, action_space: gym.Space) -> tuple[Callable, Callable]:
    """The learner side's own pipelines, without normalisation: flatten observations; actions to the env's
    dtype (Box clipped)."""
    return env_to_module_pipeline(observation_space), module_to_env_pipeline(action_space)


class EnvRunner:
    """One vector env + one inference-only policy + its connector pipelines."""

    def __init__(
        self,
        config: EnvRunnerConfig,
        policy_factory: PolicyFactory | None = None,
        connectors_factory: ConnectorsFactory | None = None,
        worker_index: int = 0,
        incarnation: int = 0,
    ) -> None:
        if worker_index > 0:  # a Ray actor of an EnvRunnerGroup: stay within its CPU share
            torch.set_num_threads(config.torch_threads)
        self.config = config
        self.worker_index = worker_index
        self.incarnation = incarnation
        """How many times this runner slot was restarted (shifts the seeds of a replacement)."""
        self.env = config.make_vector_env()
        self.observation_space = self.env.single_observation_space
        self.action_space = self.env.single_action_space
        self._seed = None if config.seed is None else config.seed + 1000 * worker_index + 1_000_003 * incarnation
        if policy_factory is None:
            policy_factory = random_policy_factory(self._seed)
        self.policy = policy_factory(self.observation_space, self.action_space)
        if isinstance(self.policy, torch.nn.Module):
            self.policy.eval()
        self.env_to_module, self.module_to_env = (connectors_factory or _default_connectors)(
            self.observation_space, self.action_space
        )
        self._rng = np.random.default_rng(None if self._seed is None else self._seed + 7)
        self._torch_rng: torch.Tensor | None = None  # the policy's sampling stream, once seeded
        self.weights_seq_no = 0
        self._run_id = uuid.uuid4().hex[:12]
        self._next_ticket = 0
        self._obs: Any = None
        self._explore: bool | None = None
        self._seeded = False
        self._recorders: list[EpisodeRecorder | None] = [None] * config.num_envs
        self._completed: list[tuple[int, SingleAgentEpisode]] = []
        self._autoreset = np.zeros(config.num_envs, dtype=bool)
        self._metrics: dict[str, list[float]] = {"returns": [], "lengths": []}
        self._num_env_steps = 0
        self._eval_envs: list[gym.Env] | None = None  # built on the first evaluate()

    # --- state -------------------------------------------------------------------------------------
    def get_state(self) -> dict[str, Any]:
        """Policy weights, connector state and ``weights_seq_no``."""
        policy = self.policy.state_dict() if isinstance(self.policy, torch.nn.Module) else self.policy.get_state()
        return {
            "policy": policy,
            "connectors": _pipeline_state(self.env_to_module),
            "weights_seq_no": self.weights_seq_no,
        }

    def set_state(self, state: dict[str, Any]) -> None:
        """Load any of ``policy`` (a full or inference-only state dict), ``connectors``, ``weights_seq_no``."""
        if state.get("policy") is not None:
            if isinstance(self.policy, torch.nn.Module):
                self.policy.load_state_dict(state["policy"])
            else:
                self.policy.set_state(state["policy"])
        if state.get("connectors") is not None:
            _set_pipeline_state(self.env_to_module, state["connectors"])
        if "weights_seq_no" in state:
            self.weights_seq_no = int(state["weights_seq_no"])

    # --- sampling ----------------------------------------------------------------------------------
    def reset(self, seed: int | None = None) -> None:
        """Drop all episodes not yet returned and reset every sub-env (sub-env ``i`` with ``seed + i``).

        Without ``seed`` the first reset uses the runner's seed and later ones
        continue the envs' random streams (no episode start is replayed).
        """
        if seed is None and not self._seeded:
            seed = self._seed
        self._seeded = True
        if seed is not None:
            self._rng = np.random.default_rng(seed + 7)
            self._torch_rng = torch.Generator().manual_seed(seed + 11).get_state()
        obs, _ = self.env.reset(seed=seed)
        self._obs = obs
        self._recorders = [self._start(i, obs) for i in range(self.config.num_envs)]
        self._completed = []
        self._autoreset = np.zeros(self.config.num_envs, dtype=bool)

    def sample(
        self,
        num_timesteps: int | None = None,
        num_episodes: int | None = None,
        explore: bool | None = None,
        episode_seed: int | None = None,
    ) -> list[SingleAgentEpisode]:
        """Step the envs and return episodes, continuing running episodes across calls.

        ``num_timesteps``: at least that many transitions; returns every episode
        completed meanwhile plus a chunk of each running one. ``num_episodes``:
        exactly that many complete episodes (final chunks of episodes begun in
        earlier calls count), the ones that *started* first — stopping at the
        first N to *finish* would favour short episodes. Switching ``explore``
        between calls resets the envs: episodes not yet returned are dropped,
        so no episode (and no call's result) mixes the two ways of acting.
        ``episode_seed``: if no episode is in progress (``idle``), first reset the
        envs with a seed derived from it, this runner's index and its incarnation.
        """
        if (num_timesteps is None) == (num_episodes is None):
            raise ValueError("pass exactly one of num_timesteps or num_episodes")
        if num_episodes == 0 or num_timesteps == 0:
            return []
        explore = self.config.explore if explore is None else explore
        if self._obs is None or explore != self._explore or (episode_seed is not None and self.idle):
            # Episodes never mix the two modes: their extra columns (action_logp, ...) differ.
            self.reset(None if episode_seed is None else self._derived_seed(episode_seed))
            self._explore = explore
        if num_timesteps is not None:
            steps = 0
            while steps < num_timesteps:
                steps += self._step(explore)
            self._completed.sort(key=lambda te: te[0])
            out = [ep for _, ep in self._completed]
            self._completed = []
            out += [rec.cut() for rec in self._recorders if rec is not None and len(rec) > 0]
            return out
        while not self._first_n_done(num_episodes):
            self._step(explore)
        self._completed.sort(key=lambda te: te[0])
        out = [ep for _, ep in self._completed[:num_episodes]]
        self._completed = self._completed[num_episodes:]
        return out

    @property
    def idle(self) -> bool:
        """No episode in progress: never sampled, or every sub-env's episode has ended."""
        return self._obs is None or all(rec is None or len(rec) == 0 for rec in self._recorders)

    def _derived_seed(self, episode_seed: int) -> int:
        words = [episode_seed, self.worker_index, self.incarnation]
        return int(np.random.SeedSequence(words).generate_state(1)[0])

    def _first_n_done(self, n: int) -> bool:
        if len(self._completed) < n:
            return False
        running = [rec.ticket for rec in self._recorders if rec is not None]
        nth = sorted(t for t, _ in self._completed)[n - 1]
        return not running or nth < min(running)

    def _start(self, i: int, obs: Any) -> EpisodeRecorder:
        ticket = self._next_ticket
        self._next_ticket += 1
        episode_id = f"{self._run_id}-w{self.worker_index}-e{i}-{ticket}"
        return EpisodeRecorder(episode_id, ticket, batch_slice(obs, i, i + 1))

    def evaluate(self, seeds: Sequence[int]) -> dict[str, list[float]]:
        """One ``forward_inference`` episode per seed (episode ``j`` reset with ``seeds[j]``); no recording, no epsilon.

        Runs the one evaluation loop (``offlinerl.env.evaluation.run_episodes``) in
        ``num_envs`` separate envs of its own, so the numbers are the ones offline
        evaluation gives, and the sampling envs (and their running episodes) are untouched.
        """
        if self._eval_envs is None:
            self._eval_envs = [self.config.make_env() for _ in range(self.config.num_envs)]
        returns, lengths = run_episodes(self._eval_envs, lambda obs: self._act(obs, False, epsilon=0.0)[0], seeds)
        return {"episode_returns": returns, "episode_lengths": lengths}

    @torch.no_grad()
    def _act(self, obs: Any, explore: bool, epsilon: float | None = None) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        batch = module_inputs(self.env_to_module, obs)  # the act step (offlinerl.env.policies.act), in three parts:
        if self._torch_rng is None:  # the forward samples from the runner's own stream once it is seeded
            fwd = forward(self.policy, batch, explore)
        else:
            with torch.random.fork_rng(devices=[]):  # the runner's own stream; the process's is left as it was
                torch.set_rng_state(self._torch_rng)
                fwd = forward(self.policy, batch, explore)
                self._torch_rng = torch.get_rng_state()
        out = to_env(self.module_to_env, fwd)
        actions = out["actions"]
        extras: dict[str, np.ndarray] = {}
        if explore:
            for name in (ACTION_LOGP, ACTION_DIST_INPUTS):
                if out.get(name) is not None:
                    extras[name] = np.asarray(out[name], dtype=np.float32)
        epsilon = self.config.epsilon if epsilon is None else epsilon
        if epsilon > 0:
            probs = self._discrete_probs(out, explore, actions)
            actions, logp = epsilon_mix(actions, self.action_space, epsilon, self._rng, probs)
            extras.pop(ACTION_LOGP, None)
            if logp is not None:
                extras[ACTION_LOGP] = logp
        if self.config.record_weights_seq_no:
            extras[WEIGHTS_SEQ_NO] = np.full(len(actions), self.weights_seq_no, dtype=np.int64)
        return actions, extras

    def _discrete_probs(self, out: dict[str, Any], explore: bool, actions: np.ndarray) -> np.ndarray | None:
        """The acting policy's action probabilities [B, n] for a Discrete space, if known."""
        space = self.action_space
        if not isinstance(space, gym.spaces.Discrete):
            return None
        n = len(actions)
        if not explore:  # greedy: all mass on the chosen action
            probs = np.zeros((n, space.n))
            probs[np.arange(n), actions - space.start] = 1.0
            return probs
        if isinstance(self.policy, RandomPolicy):
            return np.full((n, space.n), 1.0 / space.n)
        logits = out.get(ACTION_DIST_INPUTS)
        if logits is None or np.shape(logits) != (n, space.n):
            return None
        logits = np.asarray(logits, dtype=np.float64)
        z = np.exp(logits - logits.max(axis=1, keepdims=True))
        return z / z.sum(axis=1, keepdims=True)

    def _step(self, explore: bool) -> int:
        """One vector step; returns the number of transitions recorded."""
        actions, extras = self._act(self._obs, explore)
        obs, rewards, terminated, truncated, infos = self.env.step(actions)
        same_step = self.config.autoreset_mode == "same_step"
        recorded = 0
        for i in range(self.config.num_envs):
            if self._autoreset[i]:  # next_step autoreset: obs[i] starts a new episode, no transition
                self._autoreset[i] = False
                self._recorders[i] = self._start(i, obs)
                continue
            rec = self._recorders[i]
            done = bool(terminated[i]) or bool(truncated[i])
            if same_step and done:
                next_obs = _stack_like(infos["final_obs"][i], obs)
            else:
                next_obs = batch_slice(obs, i, i + 1)
            rec.add_step(
                batch_slice(actions, i, i + 1),
                float(rewards[i]),
                next_obs,
                {k: v[i : i + 1] for k, v in extras.items()},
            )
            recorded += 1
            if done:
                self._completed.append((rec.ticket, rec.finish(bool(terminated[i]), bool(truncated[i]))))
                self._metrics["returns"].append(rec.episode_return)
                self._metrics["lengths"].append(rec.episode_length)
                if same_step:
                    self._recorders[i] = self._start(i, obs)
                else:
                    self._recorders[i] = None
                    self._autoreset[i] = True
        self._obs = obs
        self._num_env_steps += recorded
        return recorded

    # --- metrics / lifecycle -----------------------------------------------------------------------
    def get_metrics(self) -> dict[str, Any]:
        """Returns and lengths of episodes completed since the last call, and env steps sampled."""
        out = {
            "episode_returns": list(self._metrics["returns"]),
            "episode_lengths": list(self._metrics["lengths"]),
            "num_env_steps": self._num_env_steps,
        }
        self._metrics = {"returns": [], "lengths": []}
        self._num_env_steps = 0
        return out

    def sample_and_metrics(self, **kwargs: Any) -> tuple[list[SingleAgentEpisode], dict[str, Any]]:
        """``sample(**kwargs)`` and ``get_metrics()`` in one (remote) call."""
        return self.sample(**kwargs), self.get_metrics()

    def ping(self) -> bool:
        return True

    def node_id(self) -> str | None:
        """The Ray node this runner runs on (None without Ray)."""
        from offlinerl.ray_utils import node_id

        return node_id()

    def stop(self) -> None:
        self.env.close()
        for env in self._eval_envs or []:
            env.close()


def _stack_like(value: Any, batch: Any) -> Any:
    """One observation (as a single env returns it) as a length-1 batch with ``batch``'s nesting and dtypes."""
    if isinstance(batch, dict):
        return {k: _stack_like(value[k], b) for k, b in batch.items()}
    if isinstance(batch, tuple):
        return tuple(_stack_like(v, b) for v, b in zip(value, batch))
    return np.asarray(value, dtype=batch.dtype)[None]


def _pipeline_state(pipeline: Any) -> Any:
    return pipeline.get_state() if hasattr(pipeline, "get_state") else None


def _set_pipeline_state(pipeline: Any, state: Any) -> None:
    if hasattr(pipeline, "set_state"):
        pipeline.set_state(state)
