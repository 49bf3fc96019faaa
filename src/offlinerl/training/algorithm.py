"""``Algorithm``: the thin control plane of a training job, offline or online.

It owns the ``OfflineData``, the ``LearnerGroup``, an inference-only copy of the
module for evaluation and, given an ``OnlineConfig``, online experience
(``offlinerl.training.experience``: EnvRunners, episodes waiting to
complete, the split of transitions over learners). ``train()`` runs one
iteration: ``training_step()``, then - always, even for a custom
``training_step`` - syncs weights (the evaluation module; online, the runners:
inference-only weights, env-to-module connector state, ``weights_seq_no``),
adds counters and timing, and evaluates every ``evaluation.interval``
iterations. ``training_step`` offline: ``updates_per_iteration`` updates in one
call per learner; online: sample ``env_steps_per_iteration`` env steps -> the
learner connector pipeline -> each learner's replay (its shard) ->
``updates_per_iteration`` updates on batches mixing replay and offline data ->
``weights_seq_no + 1``. A gated online job (``online.promotion: gated``) evaluates
and checkpoints the deployed policy instead of the learners' latest, and every
``online.gate_interval`` iterations plays both on the same fresh starts to decide
whether to replace it (``offlinerl.training.gate``).

Checkpoints (``offlinerl.training.checkpoint``, the one place that writes and
reads them; ``offlinerl.training.resume`` turns this object's state into one and
back) hold the module, optimizers, learner RNG states and sampler state
(tensors), the config, counters (iterations, updates, env steps,
``weights_seq_no``), connector state and spaces (JSON) and, online, the replay's
episodes (an episode dataset): ``from_checkpoint`` resumes a job so that it
continues exactly as the uninterrupted job would (in-memory data mode; online,
where iterations end on episode boundaries: see ``offlinerl.training.experience``).
"""

from __future__ import annotations

import math
import time
from functools import partial
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from offlinerl.algorithms.algorithm_config import AlgorithmConfig
from offlinerl.algorithms.registry import AlgorithmSpec, get_algorithm
from offlinerl.config_io import merge
from offlinerl.core import columns as C
from offlinerl.core import metrics as M
from offlinerl.core.learner import POLICY_OPTIMIZERS
from offlinerl.core.learner_group import LearnerGroup
from offlinerl.core.policy_mapping import mapped_module_id
from offlinerl.data.errors import unwrap_read_errors
from offlinerl.data.offline_data import OfflineData
from offlinerl.data.replay import MixedSpec
from offlinerl.env.evaluation import check_evaluation, module_episodes
from offlinerl.env.multi_agent import team_episodes, team_metrics
from offlinerl.episodes.validate import require_valid
from offlinerl.training import resume as _resume
from offlinerl.training import setup as _setup
from offlinerl.training.checkpoint import DEPLOYED_KEY, Checkpoint, allow_class, load_checkpoint, write_checkpoint
from offlinerl.training.experience import OnlineExperience
from offlinerl.training.gate import PolicyGate
from offlinerl.training.online_config import OnlineConfig
from offlinerl.training.team_experience import TeamExperience
from offlinerl.trusted import is_pettingzoo

__all__ = ["Algorithm"]


def _row_module(policy_mapping: Any, episode: Any) -> str:
    """The module an agent's online episode trains: as its rows would be read from a dataset."""
    return mapped_module_id(policy_mapping, episode.module_id, episode.agent_id)


class Algorithm:
    """A training job on one dataset; see the module docstring."""

    def __init__(
        self,
        algorithm: str,
        config: AlgorithmConfig,
        dataset: str | Path,
        *,
        learner_class: type | None = None,
        module_class: type | None = None,
        connector_state: Mapping[str, Any] | None = None,
        validate_data: bool = True,
        online: OnlineConfig | None = None,
        use_ray: bool | None = None,
    ) -> None:
        """``validate_data``: run the validator on ``dataset`` first and raise ``InvalidDatasetError`` with its
        report if it finds errors (False: for data already validated, e.g. by ``offlinerl validate``).
        ``online``: also gather experience in the env and learn from it mixed with ``dataset`` (see the module
        docstring). ``use_ray``: None (default) starts Ray only when the job needs it (``setup.ray_reason``:
        a cluster, remote learners, env runners or streaming data); False runs an in-memory job with its one
        learner entirely in this process (the same arrays and updates as with Ray)."""
        from offlinerl.ray_utils import init_ray

        spec: AlgorithmSpec = get_algorithm(algorithm)
        if not isinstance(config, spec.config_cls):
            raise TypeError(f"{algorithm} needs a {spec.config_cls.__name__}, got {type(config).__name__}")
        if not use_ray:  # None: decide; False: refuse a job that needs Ray (True needs no reason: nothing is read)
            reason = _setup.ray_reason(config, online, dataset)
            if use_ray is False and reason is not None:
                raise ValueError(f"use_ray=False: this job needs Ray for {reason}")
            use_ray = reason is not None
        self.use_ray = use_ray
        if use_ray:
            init_ray()
        if validate_data:
            require_valid(dataset, local=None if use_ray else True)
        self.name = algorithm
        self.config = config
        self.dataset = str(dataset)
        self.online = online
        # Classes given here are trusted in this process: checkpoints naming them load again.
        self.learner_class = allow_class(learner_class or spec.learner_cls)
        self.module_class = allow_class(module_class or spec.module_cls)
        self.offline_data = OfflineData(dataset, config, use_ray=use_ray)
        _setup.check_eval_env(config, self.offline_data, self.dataset)  # a wrong env must not cost a training run
        if online is not None:
            _setup.check_online_env(config, online, self.offline_data, self.dataset)
        if connector_state:
            self.offline_data.set_connector_state(connector_state)
        _setup.check_cpus(config, online, self.offline_data)
        obs_space, act_space = self.offline_data.observation_space, self.offline_data.action_space
        self.module_spec = config.module_spec(self.module_class, obs_space, act_space, self.offline_data.module_ids,
                                              self.offline_data.module_spaces)
        t0 = time.perf_counter()
        specs = self.offline_data.source_specs(max(1, config.num_learners), config.train_batch_size, config.seed)
        capacity = 0
        if online is not None:  # each learner mixes its own offline shard with its own replay
            capacity = math.ceil(online.replay_capacity / len(specs))
            shard_steps = self.offline_data.info.num_steps // len(specs)  # what a streaming shard holds, about
            specs = [MixedSpec(s, capacity, config.train_batch_size, online.online_fraction,
                               getattr(s, "seed", config.seed + i) + 1, mixing=online.mixing, num_offline=shard_steps)
                     for i, s in enumerate(specs)]
        self.learner_group = LearnerGroup(config, self.learner_class, self.module_spec)
        self.learner_group.set_sources(specs)
        self.setup_time_s = time.perf_counter() - t0
        # Several modules: each has its own (offline_data.env_to_module_pipeline(module_id)); None here.
        self.env_to_module = None if self.offline_data.multi_module else self.offline_data.env_to_module_pipeline()
        self.eval_module = self.module_spec.build(inference_only=True)
        self.iteration = 0
        self.num_updates = 0
        self.env_steps = 0
        """Env steps sampled by this job (online)."""
        self.weights_seq_no = 0
        """Weight versions sent to the runners: every step of online experience records the one that acted."""
        self.best_eval_return: float | None = None
        self.last_eval: dict[str, float] = {}
        self.gate = PolicyGate(online.gate_margin, online.gate_confidence) \
            if online is not None and online.promotion == "gated" else None
        """``online.promotion: gated``: the deployed policy (``offlinerl.training.gate``)."""
        try:
            self.experience = None if online is None else self._build_experience(online, capacity)
        except BaseException:  # e.g. an env that cannot be made in a runner: leave no learner actors behind
            self.learner_group.shutdown()
            raise
        self.sync_weights()

    def _build_experience(self, online: OnlineConfig, capacity: int) -> OnlineExperience | TeamExperience:
        ev = self.config.evaluation
        if is_pettingzoo(self.online_env_id()):  # each agent's experience to the module acting for it
            data = self.offline_data
            return TeamExperience(
                online, seed=self.config.seed, module_spec=self.module_spec,
                learner_pipelines={mid: data.learner_pipeline(normalize=True, module_id=mid) for mid in data.module_ids},
                module_of=partial(_row_module, self.config.policy_mapping),
                normalize=self.config.normalize_observations, observation_space=data.observation_space,
                action_space=data.action_space, agent_spaces=data.info.agent_spaces, env=self.online_env_id(),
                env_kwargs=_setup.online_env_kwargs(self.config, online, data), num_learners=self.learner_group.num_shards,
                capacity_per_learner=capacity, eval_env=self.eval_env_id() if self.can_evaluate else None,
                eval_env_kwargs=self.eval_env_kwargs())
        return OnlineExperience(
            online, seed=self.config.seed, module_spec=self.module_spec.specs[C.DEFAULT_MODULE_ID],
            learner_pipeline=self.offline_data.learner_pipeline(normalize=True), env_to_module=self.env_to_module,
            observation_space=self.offline_data.observation_space, action_space=self.offline_data.action_space,
            env=self.online_env_id(), env_kwargs=_setup.online_env_kwargs(self.config, online, self.offline_data), eval_env=self.eval_env_id(),
            eval_env_kwargs=self.eval_env_kwargs(), eval_episodes=ev.episodes, num_learners=self.learner_group.num_shards,
            capacity_per_learner=capacity,
        )

    # -- the loop -----------------------------------------------------------------------------------
    def training_step(self) -> dict[str, float]:
        """One iteration's sampling and updates; returns metrics (override for custom schedules).

        ``train`` then syncs the new weights (and ``weights_seq_no``) to the evaluation module and the runners."""
        if self.experience is None:
            return self.learner_group.update(self.config.updates_per_iteration)
        t0 = time.perf_counter()
        chunks = self.experience.sample(self.iteration + 1)
        t1 = time.perf_counter()
        shards = self.experience.to_learners(chunks, self.iteration + 1)
        if shards is not None:
            self.experience.replay_size = self.learner_group.add_online(shards)
        t2 = time.perf_counter()
        warmup = self.iteration < self.online.critic_warmup_iterations
        metrics = dict(self.learner_group.update(self.config.updates_per_iteration,
                                                 hold=POLICY_OPTIMIZERS if warmup else ()))
        t3 = time.perf_counter()
        self.env_steps += self.experience.steps(chunks)
        self.weights_seq_no += 1
        metrics.update(self.experience.metrics())
        metrics.update({
            M.ENV_STEPS: float(self.env_steps),
            M.REPLAY_SIZE: float(self.experience.replay_size),
            M.WEIGHTS_SEQ_NO: float(self.weights_seq_no),
            M.POLICY_HELD: float(warmup),
            M.SAMPLE_S: t1 - t0,
            M.REPLAY_ADD_S: t2 - t1,
            M.UPDATE_S: t3 - t2,
        })
        return metrics

    def train(self) -> dict[str, float]:
        if self.gate is not None and self.gate.weights is None:  # the policy the job starts from is deployed first
            self.gate.deploy(self.eval_module.state_dict())
        t0 = time.perf_counter()
        with unwrap_read_errors():
            metrics = dict(self.training_step())
        elapsed = time.perf_counter() - t0
        self.iteration += 1
        updates = int(metrics.get(M.UPDATES, self.num_updates + self.config.updates_per_iteration))
        done = updates - self.num_updates
        self.num_updates = updates
        update_s = metrics.get(M.UPDATE_S, elapsed)
        metrics.update({
            M.ITERATION: float(self.iteration),
            M.UPDATES: float(updates),
            M.UPDATES_PER_S: done / update_s if update_s > 0 else 0.0,
            M.SAMPLES_PER_S: done * self.config.train_batch_size * max(1, self.config.num_learners) / elapsed if elapsed > 0 else 0.0,
            M.ITERATION_S: elapsed,
        })
        weights = self.sync_weights()
        if self.gate is not None and self.iteration % self.online.gate_interval == 0:
            metrics.update(self._gate(weights))
        interval = self.config.evaluation.interval
        if interval and self.iteration % interval == 0 and self.can_evaluate:
            metrics.update(self.evaluate())
        return metrics

    def sync_weights(self) -> dict[str, Any]:
        """Copy the learners' weights (a gated job: the deployed policy's, once there is one) into the
        inference-only evaluation module; online, also send the runners the learners' inference-only weights, the
        env-to-module connector state and ``weights_seq_no``. Returns the learners' weights."""
        weights = self.learner_group.get_weights()
        deployed = self.gate.weights if self.gate is not None else None
        self.eval_module.load_state_dict(weights if deployed is None else deployed)
        if self.experience is not None:
            self.experience.sync(weights, self.offline_data.connector_state(), self.weights_seq_no)
        return weights

    def _play(self, episodes: int, seed: int, weights: Mapping[str, Any] | None = None) -> tuple[list[float], list[int]]:
        """Returns and lengths (in seed order) of ``episodes`` ``forward_inference`` episodes in the evaluation env,
        episode ``j`` reset with ``seed + j``: the evaluation module's policy, or ``weights`` (loaded into it)."""
        if weights is not None:
            self.eval_module.load_state_dict(weights)
        if _setup.team_evaluation(self.config, self.offline_data):
            played = self._team_play(episodes, seed)
            return played.returns, played.lengths
        if self.experience is not None and self.experience.eval_runners is not None:
            return self.experience.evaluate_episodes(episodes, seed, weights=self.eval_module.state_dict())
        return module_episodes(self.eval_module, self.eval_env_id(), self.env_to_module, episodes=episodes, seed=seed,
                               env_kwargs=self.eval_env_kwargs())

    def _team_play(self, episodes: int, seed: int) -> Any:
        """The evaluation module's team episodes (``TeamEpisodes``), episode ``j`` reset with ``seed + j``: on the
        evaluation runners (``online.num_eval_env_runners``), else in this process; the same episodes either way."""
        runners = getattr(self.experience, "eval_runners", None)
        if runners is not None:
            return self.experience.evaluate_team(episodes, seed, self.eval_module.state_dict(),
                                                 self.offline_data.connector_state())
        return team_episodes(self.eval_module, self.eval_env_id(), self.team_env_to_module(), episodes=episodes,
                             seed=seed, env_kwargs=self.eval_env_kwargs())

    def _gate(self, weights: Mapping[str, Any]) -> dict[str, float]:
        """Play the deployed and the learners' policy on the same fresh gate episodes; deploy the learners' if their
        paired return difference clears the gate (``PolicyGate.consider``)."""
        on = self.online
        seed = self.gate.seed(on.gate_seed, on.gate_episodes)
        deployed, deployed_lengths = self._play(on.gate_episodes, seed, self.gate.weights)
        candidate, lengths = self._play(on.gate_episodes, seed, weights)
        promoted, diff, se = self.gate.consider(self.eval_module.state_dict(), candidate, deployed)
        self.eval_module.load_state_dict(self.gate.weights)
        steps = sum(deployed_lengths) + sum(lengths)
        self.env_steps += steps
        return {M.ENV_STEPS: float(self.env_steps), M.GATE_ENV_STEPS: float(steps),
                M.CANDIDATE_RETURN: float(np.mean(candidate)), M.DEPLOYED_RETURN: float(np.mean(deployed)),
                M.GATE_DIFF: diff, M.GATE_DIFF_SE: se,
                M.PROMOTED: float(promoted), M.PROMOTIONS: float(self.gate.promotions)}

    def set_weights(self, weights: Mapping[str, Any], strict: bool = True) -> None:
        """Load module weights (a MultiRLModule state; ``strict=False``: a subset, e.g. a BC policy into a MARWIL
        module) into every learner, then sync them. ``ValueError`` names weights the module has no place for."""
        unexpected = self.learner_group.set_weights(weights, strict)
        if unexpected:
            raise ValueError(f"the weights {unexpected[:3]} have no place in a {self.name} module")
        self.sync_weights()

    def eval_env_id(self) -> str:
        return _setup.eval_env_id(self.config, self.offline_data)

    def team_env_to_module(self) -> dict[str, Any]:
        """Each module's env-to-module pipeline (its own observation statistics), for the team loop."""
        return {mid: self.offline_data.env_to_module_pipeline(mid) for mid in self.offline_data.module_ids}

    def eval_env_kwargs(self) -> dict[str, Any]:
        """``gymnasium.make`` kwargs of the evaluation env (``offlinerl.training.setup.eval_env_kwargs``)."""
        return _setup.eval_env_kwargs(self.config, self.offline_data)

    def online_env_id(self) -> str:
        """The env online experience comes from: ``online.env``, else the evaluation env."""
        return _setup.online_env_id(self.config, self.online, self.offline_data)

    @property
    def can_evaluate(self) -> bool:
        """Whether the job has an evaluation env (``offlinerl.training.setup.can_evaluate``): a gymnasium env for
        one module, a PettingZoo env (``pettingzoo:MODULE``) for one or several."""
        return _setup.can_evaluate(self.config, self.offline_data)

    def evaluate(self, episodes: int | None = None, seed: int | None = None, *,
                 record: bool = True) -> dict[str, float]:
        """The evaluation module's deterministic policy over ``episodes`` (default ``evaluation.episodes``) episodes
        of the evaluation env from ``seed`` (default ``evaluation.seed``): ``eval/return_mean`` ...; in a
        multi-agent env the team return (every agent's rewards summed) and each agent's
        ``eval/<agent>/return_mean``. ``record=False``: a side measurement (e.g. a fine-tune's hand-over check
        with the checkpoint's settings) that leaves ``last_eval`` and ``best_eval_return`` alone."""
        ev = self.config.evaluation
        episodes, seed = ev.episodes if episodes is None else episodes, ev.seed if seed is None else seed
        check_evaluation(episodes, seed)  # before any env, on every path (runners, team, this process)
        if _setup.team_evaluation(self.config, self.offline_data):
            out = team_metrics(self._team_play(episodes, seed))
        elif self.offline_data.multi_module:
            raise ValueError(f"cannot evaluate {len(self.offline_data.module_ids)} modules in a single-agent env; "
                             "set evaluation.env to a multi-agent env (pettingzoo:MODULE) or evaluation.interval=0")
        else:
            out = M.episode_metrics(*self._play(episodes, seed), M.EVAL)  # the evaluation module's
        if not record:
            return out
        ret = out[M.EVAL_RETURN_MEAN]
        self.best_eval_return = ret if self.best_eval_return is None else max(self.best_eval_return, ret)
        self.last_eval = out
        return out

    # -- checkpoints ----------------------------------------------------------------------------------
    def metadata(self) -> dict[str, Any]:
        """What ``algorithm.json`` holds besides the format fields (``offlinerl.training.resume.metadata``)."""
        return _resume.metadata(self)

    def save_checkpoint(self, path: str | Path, overwrite: bool = False) -> Path:
        """Write a checkpoint directory atomically (temp dir + rename); online, with the replay's episodes."""
        replay = None if self.experience is None else self.experience.replay_episodes()
        state = self.learner_group.get_state()
        if self.gate is not None and self.gate.weights is not None:
            state = {**state, DEPLOYED_KEY: self.gate.weights}  # what the checkpoint's policy readers load
        return write_checkpoint(path, state, self.metadata(), overwrite=overwrite, replay=replay)

    @classmethod
    def from_checkpoint(cls, path: str | Path | Checkpoint, *, dataset: str | Path | None = None,
                        overrides: Mapping[str, Any] | None = None, online: OnlineConfig | None = None,
                        resume: bool = True, **kwargs: Any) -> "Algorithm":
        """Rebuild the job from a checkpoint (a path or a loaded ``Checkpoint``) and restore its state.

        ``online``: the algorithm owns online experience (see ``__init__``). ``resume``: continue the job that
        wrote the checkpoint (every piece of state: counters, samplers, an online job's replay); False: a new
        job from its weights, optimizers, learner state and connector state (e.g. fine-tuning an offline
        checkpoint): counters start at 0 (updates continue), batch sources and replays start fresh."""
        ckpt = load_checkpoint(path)
        ckpt.trained_module  # noqa: B018 - a bad tensors file fails here, before any setup
        ckpt.env_to_modules()  # and bad connector state (e.g. normaliser statistics), before the data uses it
        if resume and online is not None:
            _resume.check_online_resume(ckpt)
        config = type(ckpt.config).from_dict(merge(ckpt.meta.config, overrides)) if overrides else ckpt.config
        algo = cls(ckpt.algorithm, config, dataset or ckpt.meta.dataset, learner_class=ckpt.learner_class,
                   module_class=ckpt.module_class, connector_state=ckpt.connector_state, online=online, **kwargs)
        try:
            algo.restore(ckpt, resume=resume)
        except BaseException:
            algo.stop()
            raise
        return algo

    def restore(self, checkpoint: str | Path | Checkpoint, *, resume: bool = True) -> None:
        """Load a checkpoint's state (``resume``: as in ``from_checkpoint``)."""
        _resume.restore(self, load_checkpoint(checkpoint), resume=resume)

    def ray_nodes(self, validation: Any = None) -> dict[str, Any]:
        """Where this job runs (Ray node ids): the cluster's alive nodes, the driver's, each learner's by rank
        (``num_learners=0``: the driver's), the tasks of ``validation`` (``require_valid``'s result; none if
        skipped) and, online, each env runner's and evaluation runner's. A job without Ray ran on no Ray node:
        every list is empty and the driver None."""
        from offlinerl.ray_utils import cluster_node_ids, node_id

        if not self.use_ray:
            return {"cluster": [], "driver": None, "learners": [], "validation": []}

        nodes: dict[str, Any] = {"cluster": cluster_node_ids(), "driver": node_id(),
                                 "learners": self.learner_group.node_ids(),
                                 "validation": validation.ray_nodes if validation is not None else []}
        if self.experience is not None:
            nodes["env_runners"] = self.experience.runners.node_ids()
            if self.experience.eval_runners is not None:
                nodes["eval_env_runners"] = self.experience.eval_runners.node_ids()
        return nodes

    def stop(self) -> None:
        if self.experience is not None:
            self.experience.stop()
        self.learner_group.shutdown()

