"""``EnvRunnerGroup``: n EnvRunners as Ray actors (or one in-process runner),
weight/connector-state syncing, crash recovery, and evaluation.

A runner whose actor dies (killed, OOM, a crashing env) is replaced by a new
actor with the same index — seeded differently, loaded with the latest synced
state — and its share of the sample request is run again, so the iteration
completes. ``env_runners/num_restarts`` counts replacements.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from offlinerl.core import metrics as M
from offlinerl.core.metrics import episode_metrics
from offlinerl.env.config import EnvRunnerConfig
from offlinerl.env.env_runner import ConnectorsFactory, EnvRunner, PolicyFactory
from offlinerl.episodes.episode import SingleAgentEpisode

__all__ = ["EnvRunnerGroup", "gather_restarting"]


def _split(total: int, parts: int) -> list[int]:
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


class EnvRunnerGroup:
    """``num_env_runners`` EnvRunner actors; ``0`` runs one EnvRunner in this process.

    Each actor reserves ``num_cpus_per_env_runner`` CPUs (scaled down when the
    runners would need more than the cluster has); ``max_restarts`` bounds how
    many dead runners are replaced over the group's life.
    """

    def __init__(
        self,
        config: EnvRunnerConfig,
        policy_factory: PolicyFactory | None = None,
        connectors_factory: ConnectorsFactory | None = None,
        *,
        num_env_runners: int = 0,
        num_cpus_per_env_runner: float = 1.0,
        max_restarts: int = 10,
    ) -> None:
        if num_env_runners < 0:
            raise ValueError(f"num_env_runners must be >= 0, got {num_env_runners}")
        self.config = config
        self._policy_factory = policy_factory
        self._connectors_factory = connectors_factory
        self.num_env_runners = num_env_runners
        self._num_cpus = num_cpus_per_env_runner
        self.max_restarts = max_restarts
        self.num_restarts = 0
        self._state: dict[str, Any] = {}
        self._incarnations = [0] * max(num_env_runners, 1)
        self._returns: list[float] = []
        self._lengths: list[int] = []
        self._num_env_steps = 0
        self.local: EnvRunner | None = None
        self._actors: list[Any] = []
        if num_env_runners == 0:
            self.local = EnvRunner(config, policy_factory, connectors_factory, worker_index=0)
            self.observation_space = self.local.observation_space
            self.action_space = self.local.action_space
        else:
            import ray

            from offlinerl.ray_utils import init_ray

            init_ray()
            cpus = float(ray.cluster_resources().get("CPU", 1.0))
            if num_cpus_per_env_runner * num_env_runners > cpus:
                # More runners than CPUs: share them rather than wait forever for actors that cannot start.
                num_cpus_per_env_runner = cpus / num_env_runners
            self._num_cpus = num_cpus_per_env_runner
            self._remote_cls = ray.remote(num_cpus=num_cpus_per_env_runner, max_restarts=0)(EnvRunner)
            self._actors = [self._new_actor(i) for i in range(num_env_runners)]
            probe = config.make_env()
            self.observation_space, self.action_space = probe.observation_space, probe.action_space
            probe.close()

    # --- actors ------------------------------------------------------------------------------------
    def _new_actor(self, index: int) -> Any:
        actor = self._remote_cls.remote(
            self.config, self._policy_factory, self._connectors_factory,
            worker_index=index + 1, incarnation=self._incarnations[index],
        )
        if self._state:
            actor.set_state.remote(self._state)  # ordered before any later call on this actor
        return actor

    def _restart(self, index: int, error: BaseException) -> None:
        import ray

        if self.num_restarts >= self.max_restarts:
            raise RuntimeError(
                f"env runner {index + 1} died and the restart budget ({self.max_restarts}) is spent: {error}"
            ) from error
        try:
            ray.kill(self._actors[index], no_restart=True)
        except Exception:  # already gone
            pass
        self._incarnations[index] += 1
        self.num_restarts += 1
        self._actors[index] = self._new_actor(index)

    def _call_all(self, method: str, per_runner_args: list[tuple[tuple, dict]] | None = None) -> list[Any]:
        """Call ``method`` on every actor; an actor that dies is restarted and the call re-run."""
        n = len(self._actors)
        args = per_runner_args or [((), {})] * n

        def submit(i: int) -> Any:
            a, kw = args[i]
            return getattr(self._actors[i], method).remote(*a, **kw)

        return gather_restarting(submit, range(n), self._restart, n)

    # --- public API --------------------------------------------------------------------------------
    def sample(
        self,
        num_timesteps: int | None = None,
        num_episodes: int | None = None,
        explore: bool | None = None,
        episode_seed: int | None = None,
    ) -> list[SingleAgentEpisode]:
        """Episodes from all runners (the budget is split across them), in runner order.

        ``episode_seed``: a runner with no episode in progress first resets its envs with a seed derived from
        it and the runner's index (``EnvRunner.sample``)."""
        if (num_timesteps is None) == (num_episodes is None):
            raise ValueError("pass exactly one of num_timesteps or num_episodes")
        if self.local is not None:
            episodes = self.local.sample(num_timesteps=num_timesteps, num_episodes=num_episodes, explore=explore,
                                         episode_seed=episode_seed)
            self._collect_metrics([self.local.get_metrics()])
            return episodes
        n = len(self._actors)
        if num_timesteps is not None:
            shares = [{"num_timesteps": math.ceil(num_timesteps / n)}] * n
        else:
            shares = [{"num_episodes": k} if k else None for k in _split(num_episodes, n)]
        args = [((), {**(s or {"num_episodes": 0}), "explore": explore, "episode_seed": episode_seed})
                for s in shares]
        results = self._call_all("sample_and_metrics", args)
        self._collect_metrics([m for _, m in results])
        return [ep for eps, _ in results for ep in eps]

    def sync_state(self, state: dict[str, Any]) -> None:
        """Send ``{"policy": weights, "connectors": state, "weights_seq_no": n}`` (any subset) to every runner."""
        self._state = {**self._state, **state}
        if self.local is not None:
            self.local.set_state(state)
            return
        import ray

        ref = ray.put(state)
        self._call_all("set_state", [((ref,), {})] * len(self._actors))

    def reset(self, seed: int | None = None) -> None:
        """Reset every runner's envs (runner ``w`` with ``seed + 1000 * w``; ``None``: its config seed)."""
        if self.local is not None:
            self.local.reset(seed)
            return
        args = [((None if seed is None else seed + 1000 * (i + 1),), {}) for i in range(len(self._actors))]
        self._call_all("reset", args)

    def evaluate(self, num_episodes: int, seed: int = 10_000, prefix: str = M.EVAL) -> dict[str, float]:
        """``num_episodes`` ``forward_inference`` episodes, episode ``j`` reset with ``seed + j``.

        The same weights and seed always give the same episodes, whatever the
        number of runners or envs: every runner runs the one evaluation loop
        (``offlinerl.env.evaluation.run_episodes``) that offline evaluation runs.
        """
        return episode_metrics(*self.evaluate_episodes(num_episodes, seed), prefix)

    def evaluate_episodes(self, num_episodes: int, seed: int = 10_000) -> tuple[list[float], list[int]]:
        """Returns and lengths of ``evaluate``'s episodes, in seed order."""
        seeds = [seed + j for j in range(num_episodes)]
        if self.local is not None:
            results = [self.local.evaluate(seeds)]
        else:
            bounds = np.linspace(0, num_episodes, len(self._actors) + 1).astype(int)
            args = [((seeds[bounds[i]:bounds[i + 1]],), {}) for i in range(len(self._actors))]
            results = self._call_all("evaluate", args)
        returns = [r for res in results for r in res["episode_returns"]]
        lengths = [n for res in results for n in res["episode_lengths"]]
        return returns, lengths

    def _collect_metrics(self, metrics: list[dict[str, Any]]) -> None:
        for m in metrics:
            self._returns += m["episode_returns"]
            self._lengths += m["episode_lengths"]
            self._num_env_steps += m["num_env_steps"]

    def get_metrics(self) -> dict[str, float]:
        """Episodes completed and env steps since the last call, plus the cumulative restart count."""
        out = episode_metrics(self._returns, self._lengths, M.RUNNER_EPISODE)
        out[M.RUNNER_ENV_STEPS] = self._num_env_steps
        out[M.RUNNER_RESTARTS] = self.num_restarts
        self._returns, self._lengths, self._num_env_steps = [], [], 0
        return out

    def node_ids(self) -> list[str | None]:
        """The Ray node of each runner (in-process: the driver's node; None without Ray)."""
        return [self.local.node_id()] if self.local is not None else self._call_all("node_id")

    def stop(self) -> None:
        if self.local is not None:
            self.local.stop()
            return
        import ray

        for actor in self._actors:
            try:
                ray.kill(actor, no_restart=True)
            except Exception:
                pass
        self._actors = []


def gather_restarting(submit: Any, indices: Any, restart: Any, n: int) -> list[Any]:
    """``ray.get`` of ``submit(i)`` (a call on actor ``i``) for each of ``indices``, as they finish: a call whose
    actor died runs ``restart(i, error)`` (which replaces the actor, or raises) and is submitted again. Returns the
    results by actor index (None for indices not called), ``n`` long."""
    import ray

    results: list[Any] = [None] * n
    pending = {submit(i): i for i in indices}
    while pending:
        ready, _ = ray.wait(list(pending), num_returns=1)
        i = pending.pop(ready[0])
        try:
            results[i] = ray.get(ready[0])
        except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError) as exc:
            restart(i, exc)
            pending[submit(i)] = i
    return results
