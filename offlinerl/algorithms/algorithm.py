"""``Algorithm``: the thin control plane of a training job.

It owns the ``OfflineData``, the ``LearnerGroup`` and an inference-only copy of
the module for evaluation. ``train()`` runs one iteration: ``training_step()``
(sample, update: by default ``updates_per_iteration`` updates in one call per
learner), then - always, even for a custom ``training_step`` - syncs the
evaluation module's weights, adds counters and timing, and evaluates every
``evaluation.interval`` iterations.

Checkpoints (``offlinerl.algorithms.checkpoint``, the one place that writes and
reads them) hold the module, optimizers, learner RNG states and sampler state
(tensors) plus the config, counters, connector state and spaces (JSON):
``from_checkpoint`` resumes a job so that it continues exactly as the
uninterrupted job would (in-memory data mode).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Mapping

from offlinerl.algorithms.algorithm_config import AlgorithmConfig
from offlinerl.algorithms.checkpoint import Checkpoint, allow_class, class_path, load_checkpoint, write_checkpoint
from offlinerl.algorithms.registry import AlgorithmSpec, get_algorithm
from offlinerl.core.learner_group import LearnerGroup
from offlinerl.core.rl_module import MultiRLModuleSpec, RLModuleSpec
from offlinerl.data.offline_data import OfflineData
from offlinerl.env.env_check import check_env
from offlinerl.env.evaluation import evaluate_module
from offlinerl.episodes.spaces import space_to_json
from offlinerl.episodes.validate import require_valid

__all__ = ["Algorithm"]


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
    ) -> None:
        """``validate_data``: run the validator on ``dataset`` first and raise ``InvalidDatasetError`` with its
        report if it finds errors (False: for data already validated, e.g. by ``offlinerl validate``)."""
        from offlinerl.ray_utils import init_ray

        spec: AlgorithmSpec = get_algorithm(algorithm)
        if not isinstance(config, spec.config_cls):
            raise TypeError(f"{algorithm} needs a {spec.config_cls.__name__}, got {type(config).__name__}")
        init_ray()
        if validate_data:
            require_valid(dataset)
        self.name = algorithm
        self.config = config
        self.dataset = str(dataset)
        # Classes given here are trusted in this process: checkpoints naming them load again.
        self.learner_class = allow_class(learner_class or spec.learner_cls)
        self.module_class = allow_class(module_class or spec.module_cls)
        self.offline_data = OfflineData(dataset, config)
        self._check_eval_env()  # before any expensive setup: a wrong env must not cost a training run
        if connector_state:
            self.offline_data.set_connector_state(connector_state)
        self._check_cpus()
        obs_space, act_space = self.offline_data.observation_space, self.offline_data.action_space
        self.module_spec = MultiRLModuleSpec({
            mid: RLModuleSpec(self.module_class, obs_space, act_space, config.module_config())
            for mid in self.offline_data.module_ids
        })
        t0 = time.perf_counter()
        specs = self.offline_data.source_specs(max(1, config.num_learners), config.train_batch_size, config.seed)
        self.learner_group = LearnerGroup(config, self.learner_class, self.module_spec)
        self.learner_group.set_sources(specs)
        self.setup_time_s = time.perf_counter() - t0
        self.env_to_module = self.offline_data.env_to_module_pipeline()
        self.eval_module = self.module_spec.build(inference_only=True)
        self.iteration = 0
        self.num_updates = 0
        self.best_eval_return: float | None = None
        self.last_eval: dict[str, float] = {}
        self.sync_weights()

    def _check_cpus(self) -> None:
        """Streaming needs CPUs for Ray Data besides the learners, or the readers never start."""
        import ray

        cfg = self.config
        if self.offline_data.mode != "streaming" or cfg.num_learners == 0:
            return
        cpus = ray.cluster_resources().get("CPU", 0)
        left = cpus - cfg.num_learners * cfg.num_cpus_per_learner
        if left < 1:
            raise ValueError(
                f"streaming mode with {cfg.num_learners} learners x {cfg.num_cpus_per_learner} CPUs leaves {left:g} of "
                f"{cpus:g} CPUs for Ray Data (needs >= 1); lower num_cpus_per_learner (e.g. 0.5) or use data.mode=in_memory"
            )

    # -- the loop -----------------------------------------------------------------------------------
    def training_step(self) -> dict[str, float]:
        """One iteration's sampling and updates; returns metrics (override for custom schedules)."""
        return self.learner_group.update(self.config.updates_per_iteration)

    def train(self) -> dict[str, float]:
        t0 = time.perf_counter()
        metrics = dict(self.training_step())
        elapsed = time.perf_counter() - t0
        self.iteration += 1
        updates = int(metrics.get("learner/updates", self.num_updates + self.config.updates_per_iteration))
        done = updates - self.num_updates
        self.num_updates = updates
        metrics.update({
            "iteration": float(self.iteration),
            "learner/updates": float(updates),
            "perf/updates_per_s": done / elapsed if elapsed > 0 else 0.0,
            "perf/samples_per_s": done * self.config.train_batch_size * max(1, self.config.num_learners) / elapsed if elapsed > 0 else 0.0,
            "perf/iteration_s": elapsed,
        })
        self.sync_weights()
        interval = self.config.evaluation.interval
        if interval and self.iteration % interval == 0 and self.can_evaluate:
            metrics.update(self.evaluate())
        return metrics

    def sync_weights(self) -> None:
        """Copy the learners' weights into the inference-only evaluation module."""
        self.eval_module.load_state_dict(self.learner_group.get_weights())

    def eval_env_id(self) -> str:
        env = self.config.evaluation.env or self.offline_data.info.env_id
        if not env:
            raise ValueError("no evaluation env: the dataset has no env_id; set evaluation.env")
        return env

    @property
    def can_evaluate(self) -> bool:
        """Evaluation runs single-agent gymnasium envs: one module, and an env named by the config or the dataset."""
        return not self.offline_data.multi_module and bool(self.config.evaluation.env or self.offline_data.info.env_id)

    def _check_eval_env(self) -> None:
        """Make the evaluation env once and compare its spaces with the dataset's (``EnvMismatchError``)."""
        if not self.can_evaluate:
            return
        ev, data = self.config.evaluation, self.offline_data
        check_env(self.eval_env_id(), data.observation_space, data.action_space, ev.env_kwargs,
                  trusted=ev.env is not None, what=f"the dataset {self.dataset}")

    def evaluate(self, episodes: int | None = None) -> dict[str, float]:
        if self.offline_data.multi_module:
            raise ValueError(f"cannot evaluate {len(self.offline_data.module_ids)} modules in a single-agent env; "
                             "set evaluation.interval=0")
        ev = self.config.evaluation
        out = evaluate_module(self.eval_module, self.eval_env_id(), self.env_to_module,
                              episodes=episodes or ev.episodes, seed=ev.seed, env_kwargs=ev.env_kwargs)
        ret = out["eval/return_mean"]
        self.best_eval_return = ret if self.best_eval_return is None else max(self.best_eval_return, ret)
        self.last_eval = out
        return out

    # -- checkpoints ----------------------------------------------------------------------------------
    def metadata(self) -> dict[str, Any]:
        """What ``algorithm.json`` holds besides the format fields (see ``offlinerl.algorithms.checkpoint``)."""
        info = self.offline_data.info
        return {
            "algorithm": self.name,
            "config": self.config.to_dict(),
            "dataset": self.dataset,
            "env_id": info.env_id,
            "observation_space": space_to_json(info.observation_space),
            "action_space": space_to_json(info.action_space),
            "module_class": class_path(self.module_class),
            "module_ids": list(self.offline_data.module_ids),
            "learner_class": class_path(self.learner_class),
            "connector_state": self.offline_data.connector_state(),
            "iteration": self.iteration,
            "num_updates": self.num_updates,
            "best_eval_return": self.best_eval_return,
            "last_eval": self.last_eval,
        }

    def save_checkpoint(self, path: str | Path, overwrite: bool = False) -> Path:
        """Write a checkpoint directory atomically (temp dir + rename)."""
        return write_checkpoint(path, self.learner_group.get_state(), self.metadata(), overwrite=overwrite)

    @classmethod
    def from_checkpoint(cls, path: str | Path | Checkpoint, *, dataset: str | Path | None = None,
                        overrides: Mapping[str, Any] | None = None, **kwargs: Any) -> "Algorithm":
        """Rebuild the job from a checkpoint (a path or a loaded ``Checkpoint``) and restore every piece of its state."""
        ckpt = load_checkpoint(path)
        ckpt.trained_module  # noqa: B018 - a bad tensors file fails here, before any setup
        ckpt.env_to_module()  # and bad connector state (e.g. normaliser statistics), before the data uses it
        config = type(ckpt.config).from_dict({**ckpt.meta["config"], **dict(overrides or {})}) if overrides else ckpt.config
        algo = cls(ckpt.algorithm, config, dataset or ckpt.meta["dataset"], learner_class=ckpt.learner_class,
                   module_class=ckpt.module_class, connector_state=ckpt.connector_state, **kwargs)
        algo.restore(ckpt)
        return algo

    def restore(self, checkpoint: str | Path | Checkpoint) -> None:
        ckpt = load_checkpoint(checkpoint)
        ckpt.trained_module  # noqa: B018 - shapes and finiteness, with a clear message, before the learners
        ckpt.env_to_module()  # checks the connector state (e.g. normaliser statistics) before the data uses it
        self.offline_data.set_connector_state(ckpt.connector_state)
        self.env_to_module = self.offline_data.env_to_module_pipeline()
        self.learner_group.set_state(ckpt.state)
        meta = ckpt.meta
        self.iteration = int(meta["iteration"])
        self.num_updates = int(meta["num_updates"])
        self.best_eval_return = meta.get("best_eval_return")
        self.last_eval = meta.get("last_eval") or {}
        self.sync_weights()

    def stop(self) -> None:
        self.learner_group.shutdown()
