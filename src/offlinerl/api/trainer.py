"""``Trainer``: what ``CQLConfig(...).build(dataset)`` returns: ``fit``, ``evaluate``, ``predict``, ``save``.

    algo = CQLConfig(normalize_observations=True).build("datasets/pendulum-mixed")
    result = algo.fit(updates=4000)           # a run directory, exactly what ``offlinerl train`` writes
    algo.evaluate(episodes=5)                 # {"eval/return_mean": ..., ...}
    algo.predict(obs)                         # numpy in, numpy out

``fit`` is ``offlinerl train``: it runs the training driver (``offlinerl.jobs.train.run_train``: the one job
loop, run directory, ``metrics.jsonl``, TensorBoard and the trackers of ``logger``, checkpoints, progress bar,
``learning_curve.png``, ``result.json``) on the ``Algorithm`` built here, whose state carries over from one
``fit`` to the next. The run directory's ``config.yaml`` is a job file: ``offlinerl train --resume RUN`` continues
it like any CLI job.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from offlinerl.algorithms.algorithm_config import AlgorithmConfig
from offlinerl.config_io import from_dict
from offlinerl.evaluation.policy import Policy
from offlinerl.jobs.spec import JobSpec, StopConfig
from offlinerl.jobs.tracking import LoggingConfig, MlflowConfig, WandbConfig
from offlinerl.training.algorithm import Algorithm

__all__ = ["Trainer", "logging_config"]


def logging_config(logger: LoggingConfig | Mapping[str, Any] | str | None) -> LoggingConfig:
    """``fit(logger=...)``: a ``LoggingConfig``, its job-file form (``{"wandb": {"project": "p", "mode":
    "offline"}}``), or a name: ``"tensorboard"`` (the default), ``"wandb"`` (project ``offlinerl``),
    ``"mlflow"`` (MLflow's default tracking URI), ``"none"`` (``metrics.jsonl`` only)."""
    if logger is None or logger == "tensorboard":
        return LoggingConfig()
    if isinstance(logger, LoggingConfig):
        return logger
    if logger == "wandb":
        return LoggingConfig(wandb=WandbConfig(project="offlinerl"))
    if logger == "mlflow":
        return LoggingConfig(mlflow=MlflowConfig())
    if logger == "none":
        return LoggingConfig(tensorboard=False)
    if isinstance(logger, Mapping):
        return from_dict(LoggingConfig, logger, "logging")
    raise ValueError(f"logger: a LoggingConfig, a mapping like a job file's logging: block, or one of "
                     f"'tensorboard', 'wandb', 'mlflow', 'none'; got {logger!r}")


class Trainer:
    """One algorithm on one dataset, built once (Ray, the data, the learners); see the module docstring."""

    def __init__(self, algorithm: str, config: AlgorithmConfig, dataset: str | Path, *, address: str | None = None,
                 validate_data: bool = True, **algorithm_options: Any) -> None:
        """``address``: the Ray cluster to join (default: ``$RAY_ADDRESS``; without one, a local Ray when the job
        needs Ray, and none for an in-memory job with one local learner: ``training.setup.ray_reason``);
        ``validate_data``: run the validator first (``InvalidDatasetError`` with its report);
        ``algorithm_options``: passed on to ``offlinerl.training.algorithm.Algorithm`` (e.g. ``module_class``)."""
        from offlinerl.ray_utils import init_ray
        from offlinerl.training.setup import ray_reason

        if config.num_seeds > 1:
            raise ValueError(f"num_seeds: {config.num_seeds}: a Trainer holds one policy; train seeds as one "
                             "vectorised job with offlinerl.jobs.train.run_train (offlinerl train --set "
                             "config.num_seeds=N)")
        dataset = Path(dataset)
        if not (dataset / "dataset.json").is_file():
            raise FileNotFoundError(f"{dataset}: not an episode dataset (no dataset.json)")
        use_ray = ray_reason(config, algorithm_options.get("online"), dataset, address) is not None
        if use_ray:
            init_ray(address)
        self.algorithm = Algorithm(algorithm, config, str(dataset.resolve()), validate_data=validate_data,
                                   use_ray=use_ray, **algorithm_options)
        """The control plane (``offlinerl.training.algorithm.Algorithm``) this trains."""
        self.last_result: dict[str, Any] | None = None
        """The newest ``fit``'s ``result.json``."""

    # -- what it is ---------------------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.algorithm.name

    @property
    def config(self) -> AlgorithmConfig:
        return self.algorithm.config

    @property
    def dataset(self) -> str:
        return self.algorithm.dataset

    @property
    def num_updates(self) -> int:
        return self.algorithm.num_updates

    def __repr__(self) -> str:
        return f"Trainer({self.name!r} on {self.dataset}, {self.num_updates} updates)"

    # -- training -----------------------------------------------------------------------------------------------
    def fit(self, updates: int | None = None, *, iterations: int | None = None, wall_time_s: float | None = None,
            eval_return: float | None = None, output: str | Path = "runs", run_dir: str | Path | None = None,
            name: str | None = None, logger: LoggingConfig | Mapping[str, Any] | str | None = None,
            checkpoint_interval: int = 0, checkpoint_keep: int = 0, progress: bool = True,
            log: Callable[[str], None] = print) -> dict[str, Any]:
        """Train ``updates`` more gradient updates (or ``iterations`` more iterations, ``wall_time_s`` seconds,
        until an evaluation reaches ``eval_return``: the first met), as ``offlinerl train`` does, into a new run
        directory (``run_dir``, else ``output/<name>-<UTC time>``, ``name`` defaulting to
        ``<algorithm>-<dataset>``); returns its ``result.json`` (``checkpoint``, ``run_dir``, returns, timing).
        ``logger``: where metrics go besides ``metrics.jsonl`` (:func:`logging_config`)."""
        if all(v is None for v in (updates, iterations, wall_time_s, eval_return)):
            raise ValueError("fit: give updates, iterations, wall_time_s or eval_return")
        from offlinerl.jobs.train import run_train

        algo = self.algorithm
        stop = StopConfig(updates=None if updates is None else algo.num_updates + updates,
                          iterations=None if iterations is None else algo.iteration + iterations,
                          wall_time_s=wall_time_s, eval_return=eval_return)
        spec = JobSpec(algorithm=self.name, dataset=self.dataset, config=self.config.to_dict(), stop=stop,
                       output=str(output), name=name or f"{self.name}-{Path(self.dataset).name}",
                       checkpoint_interval=checkpoint_interval, checkpoint_keep=checkpoint_keep,
                       logging=logging_config(logger))
        self.last_result = run_train(spec, self.config, run_dir=run_dir, progress=progress, log=log, algorithm=algo)
        return self.last_result

    def evaluate(self, episodes: int | None = None) -> dict[str, float]:
        """Play ``episodes`` (default ``config.evaluation.episodes``) with the current policy in the dataset's
        env (or ``evaluation.env``): ``{"eval/return_mean": ..., "eval/return_std": ..., ...}``."""
        if not self.algorithm.can_evaluate:
            raise ValueError(f"{self.dataset}: no env to evaluate in (the dataset names none; set evaluation.env)")
        return self.algorithm.evaluate(episodes)

    # -- acting -------------------------------------------------------------------------------------------------
    def _module(self, module_id: str | None) -> Any:
        modules = self.algorithm.eval_module
        ids = list(self.algorithm.offline_data.module_ids)
        if module_id is None and len(ids) != 1:
            raise ValueError(f"{self.dataset} trains the modules {ids}; choose one with module_id")
        return modules[module_id or ids[0]]

    def _env_to_module(self, module_id: str | None) -> Any:
        """The env-to-module pipeline of the module ``_module`` chose (several modules: each its own statistics)."""
        data = self.algorithm.offline_data
        return data.env_to_module_pipeline(module_id) if data.multi_module else self.algorithm.env_to_module

    def policy(self, module_id: str | None = None) -> Policy:
        """A copy of the current policy (later training does not change it): ``.predict(obs)``."""
        data = self.algorithm.offline_data
        return Policy(copy.deepcopy(self._module(module_id)), copy.deepcopy(self._env_to_module(module_id)),
                      *data.spaces_of(module_id), f"{self.name} at {self.num_updates} updates")

    def predict(self, obs: Any, *, explore: bool = False, module_id: str | None = None) -> np.ndarray:
        """The current policy's actions for one observation or a batch (``Policy.predict``)."""
        data = self.algorithm.offline_data
        live = Policy(self._module(module_id), self._env_to_module(module_id), *data.spaces_of(module_id), self.name)
        return live.predict(obs, explore=explore)

    # -- state ------------------------------------------------------------------------------------------------------
    def save(self, path: str | Path, overwrite: bool = False) -> Path:
        """Write a checkpoint (``load_policy`` reads its policy; ``Algorithm.from_checkpoint`` the whole job)."""
        return self.algorithm.save_checkpoint(path, overwrite=overwrite)

    def close(self) -> None:
        """Stop the learner actors (and runners); the Trainer cannot train afterwards."""
        self.algorithm.stop()

    def __enter__(self) -> "Trainer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

