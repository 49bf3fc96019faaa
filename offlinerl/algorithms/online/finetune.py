"""Online fine-tuning of an offline checkpoint (``offlinerl finetune``).

    checkpoint (module, optimizers, connector state, config)
        → Algorithm (same learner, same OfflineData connectors and statistics)
        → EnvRunnerGroup acting with the inference-only module (forward_exploration)
        → online episodes → the learner connector pipeline → ReplayBuffer
        → updates on batches mixing offline and online transitions (online_fraction)
        → weights (weights_seq_no + 1) → runners; evaluation on separate runners (forward_inference)

Off-policy algorithms (IQL, CQL) use every chunk of experience at once;
algorithms whose connectors compute returns-to-go (MARWIL) only learn from
complete episodes. The first evaluation runs before any update, with the
checkpoint's evaluation settings, so it reproduces the checkpoint's own
evaluation (``result.json`` reports both).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Mapping

import torch
import yaml

from offlinerl.algorithms.algorithm import Algorithm
from offlinerl.algorithms.checkpoint import load_checkpoint
from offlinerl.algorithms.config_io import ConfigError, to_dict
from offlinerl.algorithms.job import Progress, run_job, write_result
from offlinerl.algorithms.online.config import FinetunePipeline
from offlinerl.algorithms.run_dir import new_run_dir
from offlinerl.algorithms.registry import get_algorithm
from offlinerl.connectors import EpisodeColumns, module_to_env_pipeline
from offlinerl.core import columns as C
from offlinerl.data.replay import MixedBatchSource, ReplayBuffer
from offlinerl.episodes import SingleAgentEpisode, write_dataset
from offlinerl.episodes.validate import require_valid
from offlinerl.env import EnvRunnerConfig, EnvRunnerGroup
from offlinerl.env.module_policy import ModulePolicyFactory, PipelineConnectors, module_weights

__all__ = ["Finetuner", "run_finetune", "close_episodes"]


@dataclass
class MixedSourceSpec:
    """Builds the learner's mixed batch source (in-process learner: the built source is kept here)."""

    offline: Mapping[str, Any]
    capacity: int
    batch_size: int
    online_fraction: float
    mixing: str
    seed: int
    source: MixedBatchSource | None = None

    def build(self, device: torch.device) -> MixedBatchSource:
        self.source = MixedBatchSource(
            self.offline, ReplayBuffer(self.capacity, device), batch_size=self.batch_size,
            online_fraction=self.online_fraction, mixing=self.mixing, module_id=C.DEFAULT_MODULE_ID, seed=self.seed,
        )
        return self.source


def close_episodes(chunks: list[SingleAgentEpisode]) -> list[SingleAgentEpisode]:
    """Mark the last chunk of every episode that never ended as truncated (end of recording)."""
    last: dict[str, SingleAgentEpisode] = {}
    for c in chunks:
        if c.id not in last or c.chunk_index > last[c.id].chunk_index:
            last[c.id] = c
    return [replace(c, truncated=True) if last[c.id] is c and not (c.terminated or c.truncated) else c for c in chunks]


def _load_algorithm(pipeline: FinetunePipeline, validate_data: bool) -> tuple[Algorithm, dict[str, Any]]:
    """The checkpoint as an Algorithm (optionally continuing as another algorithm, e.g. BC -> MARWIL)."""
    ckpt = load_checkpoint(pipeline.checkpoint)
    meta = ckpt.meta
    target = pipeline.online.algorithm or meta["algorithm"]
    if target == meta["algorithm"]:
        return Algorithm.from_checkpoint(ckpt, dataset=pipeline.dataset, overrides=pipeline.config,
                                         validate_data=validate_data), meta
    # Another algorithm: carry over the config fields both share, the policy weights and the connector state.
    spec = get_algorithm(target)
    fields = {f for f in spec.config_cls.__dataclass_fields__}
    shared = {k: v for k, v in meta["config"].items() if k in fields}
    config = spec.config_cls.from_dict({**shared, **pipeline.config})
    algo = Algorithm(target, config, pipeline.dataset or meta["dataset"], connector_state=meta["connector_state"],
                     validate_data=validate_data)
    learner = algo.learner_group.local_learner
    weights = ckpt.trained_module.state_dict()  # checked: shapes, finite values
    unexpected = sorted(set(weights) - set(learner.module.state_dict()))
    learner.module.load_state_dict(weights, strict=False)
    if unexpected:
        raise ConfigError(f"online.algorithm={target}: the checkpoint's module has weights {unexpected[:3]} "
                          f"that a {target} module does not have")
    algo.sync_weights()
    return algo, meta


class Finetuner:
    """One fine-tuning iteration per ``train()`` (sample → replay → update → sync → evaluate); a
    :class:`~offlinerl.algorithms.job.Trainable`, so ``run_finetune`` runs it with the one job loop.

    ``validate_data``: validate the offline dataset first (``InvalidDatasetError`` with the validator's report).
    """

    def __init__(self, pipeline: FinetunePipeline, *, validate_data: bool = True) -> None:
        self.pipeline = pipeline
        online = pipeline.online
        self.algo, self.checkpoint_meta = _load_algorithm(pipeline, validate_data)
        algo, config = self.algo, self.algo.config
        if not algo.learner_group.is_local:
            raise ConfigError("config.num_learners: online fine-tuning runs with num_learners=0 for now (TODO #6)")
        if algo.offline_data.mode != "in_memory":
            raise ConfigError("config.data.mode: online fine-tuning mixes in-memory offline data; use in_memory")
        self.learner_pipeline = algo.offline_data.learner_pipeline(normalize=True)
        self.needs_complete_episodes = self.learner_pipeline.needs_complete_episodes
        offline = algo.offline_data.load_arrays()
        self.spec = MixedSourceSpec(offline, online.replay_capacity, config.train_batch_size, online.online_fraction,
                                    online.mixing, config.seed + 1)
        algo.learner_group.set_sources([self.spec])
        self.source = self.spec.source
        # Runners act with the inference-only module and the offline job's env-to-module pipeline.
        ev = config.evaluation
        env_id = online.env or algo.eval_env_id()
        env_kwargs = online.env_kwargs or (dict(ev.env_kwargs) if online.env is None else {})
        module_spec = algo.module_spec.specs[C.DEFAULT_MODULE_ID]
        policy = ModulePolicyFactory(module_spec)
        # Only what acting needs travels to the runners (no critics, no target networks).
        self._acting_keys = set(module_spec.build(inference_only=True).state_dict())
        connectors = PipelineConnectors(algo.env_to_module, module_to_env_pipeline(algo.offline_data.action_space))
        self.runners = EnvRunnerGroup(
            EnvRunnerConfig(env=env_id, env_kwargs=env_kwargs, num_envs=online.num_envs, seed=config.seed,
                            explore=online.explore, record_weights_seq_no=True),
            policy, connectors, num_env_runners=online.num_env_runners,
        )
        self.evaluators = EnvRunnerGroup(
            EnvRunnerConfig(env=algo.eval_env_id(), env_kwargs=dict(ev.env_kwargs), num_envs=min(ev.episodes, 16),
                            explore=False),
            policy, connectors, num_env_runners=online.num_eval_env_runners,
        )
        self.weights_seq_no = 0
        self.env_steps = 0
        self.iteration = 0
        self.last_eval: dict[str, float] = {}
        self.best_eval_return: float | None = None
        self.online_chunks: list[SingleAgentEpisode] = []
        self._pending: dict[str, list[SingleAgentEpisode]] = {}
        self.sync_weights()

    def sync_weights(self) -> None:
        weights = module_weights(self.algo.learner_group.get_weights(), C.DEFAULT_MODULE_ID)
        state = {
            "policy": {k: v for k, v in weights.items() if k in self._acting_keys},
            "connectors": self.algo.env_to_module.get_state(),
            "weights_seq_no": self.weights_seq_no,
        }
        self.runners.sync_state(state)
        self.evaluators.sync_state(state)

    @property
    def num_updates(self) -> int:
        """Gradient updates of the algorithm, the checkpoint's included (what ``stop.updates`` counts)."""
        return self.algo.num_updates

    @property
    def can_evaluate(self) -> bool:
        return True

    def evaluate(self) -> dict[str, float]:
        """Evaluate on the evaluation runners; the result also goes into the next checkpoint's ``last_eval``."""
        ev = self.algo.config.evaluation
        out = self.evaluators.evaluate(ev.episodes, seed=ev.seed)
        ret = out["eval/return_mean"]
        self.best_eval_return = ret if self.best_eval_return is None else max(self.best_eval_return, ret)
        self.last_eval = out
        self.algo.last_eval = out
        return out

    def save_checkpoint(self, path: str | Path, overwrite: bool = False) -> Path:
        """An ordinary checkpoint of the fine-tuned algorithm."""
        return self.algo.save_checkpoint(path, overwrite=overwrite)

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

    def train(self) -> dict[str, float]:
        online, config = self.pipeline.online, self.algo.config
        t0 = time.perf_counter()
        chunks = self.runners.sample(num_timesteps=online.env_steps_per_iteration)
        t_sample = time.perf_counter() - t0
        if online.save_online_episodes:
            self.online_chunks.extend(chunks)
        usable = self._usable(chunks)
        if usable:
            transitions = self.learner_pipeline({}, EpisodeColumns.from_episodes(usable))
            self.source.online.add({k: transitions[k] for k in self.source.offline})
        t1 = time.perf_counter()
        metrics = dict(self.algo.learner_group.update(config.updates_per_iteration))
        t_update = time.perf_counter() - t1
        self.weights_seq_no += 1
        self.sync_weights()
        self.algo.sync_weights()
        self.iteration += 1
        self.algo.iteration += 1
        self.algo.num_updates = int(metrics.get("learner/updates", self.algo.num_updates + config.updates_per_iteration))
        self.env_steps += sum(len(c) for c in chunks)
        metrics.update(self.runners.get_metrics())
        t_iteration = time.perf_counter() - t0
        metrics.update({
            "iteration": float(self.iteration),
            "learner/updates": float(self.algo.num_updates),
            "online/env_steps": float(self.env_steps),
            "online/replay_size": float(len(self.source.online)),
            "online/weights_seq_no": float(self.weights_seq_no),
            "perf/sample_s": t_sample,
            "perf/update_s": t_update,
            "perf/iteration_s": t_iteration,
            "perf/updates_per_s": config.updates_per_iteration / t_update if t_update > 0 else 0.0,
        })
        interval = config.evaluation.interval
        if interval and self.iteration % interval == 0:
            metrics.update(self.evaluate())
        return metrics

    def save_online_episodes(self, path: str | Path) -> Any:
        """Write the online experience as an episode dataset (unfinished episodes marked truncated)."""
        return write_dataset(
            close_episodes(self.online_chunks), path,
            observation_space=self.algo.offline_data.observation_space,
            action_space=self.algo.offline_data.action_space,
            env_id=self.runners.config.env_name,
            provenance={"collector": "offlinerl finetune", "checkpoint": str(self.pipeline.checkpoint),
                        "algorithm": self.algo.name, "iterations": self.iteration},
            inputs=[p for p in (self.pipeline.checkpoint, self.algo.dataset) if p],
        )

    def stop(self) -> None:
        self.runners.stop()
        self.evaluators.stop()
        self.algo.stop()


def run_finetune(
    pipeline: FinetunePipeline,
    *,
    run_dir: str | Path | None = None,
    address: str | None = None,
    progress: bool = True,
    log: Callable[[str], None] = print,
    skip_validation: bool = False,
) -> dict[str, Any]:
    """Validate the offline dataset (unless ``skip_validation``), fine-tune until a stop condition with the one job
    loop (``offlinerl.algorithms.job.run_job``); write the run directory and return ``result.json``'s content."""
    from offlinerl.ray_utils import init_ray

    init_ray(address)
    if not skip_validation:
        require_valid(pipeline.dataset or load_checkpoint(pipeline.checkpoint).meta["dataset"])
    run = new_run_dir(pipeline.output, pipeline.name, run_dir)
    t_start = time.perf_counter()
    tuner = Finetuner(pipeline, validate_data=False)
    (run / "config.yaml").write_text(yaml.safe_dump(
        {**to_dict(pipeline), "algorithm": tuner.algo.name, "resolved_config": tuner.algo.config.to_dict()},
        sort_keys=False,
    ))
    try:
        initial = tuner.evaluate()
        checkpoint_eval = (tuner.checkpoint_meta.get("last_eval") or {}).get("eval/return_mean")
        log(f"loaded {pipeline.checkpoint} ({tuner.algo.name}): evaluation return {initial['eval/return_mean']:.2f}"
            + (f" (checkpoint's own: {checkpoint_eval:.2f})" if checkpoint_eval is not None else ""))
        job = run_job(
            tuner, run, pipeline.stop, t_start=t_start,
            progress=Progress(desc=f"finetune {tuner.algo.name}", unit="it", total=pipeline.stop.iterations)
            if progress else None,
            last_good=pipeline.checkpoint, log=log,
            first_records=[{"iteration": 0.0, "learner/updates": float(tuner.num_updates), "online/env_steps": 0.0,
                            **initial}],
        )
        online_path = None
        if pipeline.online.save_online_episodes and tuner.online_chunks:
            online_path = run / "online-episodes"
            tuner.save_online_episodes(online_path)
    finally:
        tuner.stop()
    result = {
        "algorithm": tuner.algo.name,
        "from_checkpoint": str(pipeline.checkpoint),
        "env": tuner.runners.config.env_name,
        "checkpoint_eval_return": checkpoint_eval,
        "initial_eval_return": initial["eval/return_mean"],
        "final_eval_return": tuner.last_eval["eval/return_mean"],
        "final_eval_return_std": tuner.last_eval.get("eval/return_std"),
        "best_eval_return": tuner.best_eval_return,
        "iterations": tuner.iteration,
        "updates": tuner.num_updates,
        "env_steps": tuner.env_steps,
        "env_runner_restarts": tuner.runners.num_restarts,
        "time_s": time.perf_counter() - t_start,
        "checkpoint": str(job.checkpoint),
        "online_episodes": str(online_path) if online_path else None,
        "run_dir": str(run),
    }
    write_result(run, result)
    return result
