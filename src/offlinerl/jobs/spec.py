"""Job specs: one YAML (or JSON) file = one reproducible job, read into a frozen dataclass.

``JobSpec`` is a training job (``offlinerl train``; the files under ``jobs/``)::

    algorithm: bc
    dataset: datasets/cartpole-mixed
    config: {lr: 1.0e-3, updates_per_iteration: 500, evaluation: {episodes: 10}}
    stop: {updates: 5000}
    output: runs

``FinetuneSpec`` is a fine-tuning job (``offlinerl finetune``): a checkpoint, algorithm-config overrides, the
online settings (``OnlineConfig``), stop conditions and an output directory::

    checkpoint: runs/pendulum-iql-short/checkpoints/final   # or --from
    config: {updates_per_iteration: 500}
    online: {env_steps_per_iteration: 1000, online_fraction: 0.5}
    stop: {iterations: 10}
    checkpoint_interval: 1                                   # what --resume continues from
    output: runs

With no checkpoint and ``algorithm`` set, a ``FinetuneSpec`` is an online job from scratch (``algorithm: sac``,
``online: {env: Hopper-v5}``, ``warmup_steps: 5000``; docs/online.md). ``StopConfig`` is both jobs' ``stop:`` block. ``load_*_run`` read a run directory's ``config.yaml`` back to
resume it (``offlinerl.jobs.run_dir.read_run``: the rules both share); both drivers write it with
:func:`run_config`, one schema for both jobs.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from offlinerl.algorithms.algorithm_config import AlgorithmConfig
from offlinerl.algorithms.registry import algorithm_names, get_algorithm
from offlinerl.config_io import check, from_dict, to_dict
from offlinerl.jobs.run_dir import CHECKPOINTS, RunDirError, read_run
from offlinerl.jobs.selection import check_selection
from offlinerl.jobs.tracking import LoggingConfig
from offlinerl.training.online_config import OnlineConfig
from offlinerl.trusted import load_config_file

__all__ = ["StopConfig", "JobSpec", "load_job_spec", "load_job_run", "FinetuneSpec", "load_finetune_spec",
           "load_finetune_run", "run_config"]


@dataclass(frozen=True, kw_only=True)
class StopConfig:
    """When a job stops: the first condition met (at least one must be set)."""

    iterations: int | None = None
    """Training iterations (each ``updates_per_iteration`` updates)."""
    updates: int | None = None
    """Gradient updates (checked after each iteration)."""
    wall_time_s: float | None = None
    """Seconds of training (setup and evaluations excluded: the sum of the iterations' ``perf/iteration_s``)."""
    eval_return: float | None = None
    """Stop once an evaluation's mean return reaches this."""

    def __post_init__(self) -> None:
        check(any(v is not None for v in (self.iterations, self.updates, self.wall_time_s, self.eval_return)),
              "stop", "set at least one of iterations, updates, wall_time_s, eval_return")
        for name in ("iterations", "updates"):
            v = getattr(self, name)
            check(v is None or v >= 1, f"stop.{name}", f"must be >= 1, got {v}")


@dataclass(frozen=True, kw_only=True)
class JobSpec:
    """One reproducible training job."""

    algorithm: str
    """Registered algorithm name (``offlinerl.algorithms.registry``): bc, marwil, cql, iql, td3bc, ..."""
    dataset: str
    """Episode dataset directory (relative paths: to the working directory, else to the job file)."""
    config: dict[str, Any] = field(default_factory=dict)
    """Fields of the algorithm's config class (see its docstrings)."""
    stop: StopConfig
    """Stop conditions."""
    output: str = "runs"
    """Parent directory of run directories."""
    name: str | None = None
    """Run name prefix (default: the job file's name)."""
    checkpoint_interval: int = 0
    """Also checkpoint every this many iterations (0 = only the final checkpoint)."""
    checkpoint_keep: int = 0
    """Keep only the newest this many periodic checkpoints (0 = keep all; ``final`` is always kept)."""
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    """Where metrics go besides ``metrics.jsonl``: TensorBoard, W&B, MLflow (``offlinerl.jobs.tracking``)."""

    def __post_init__(self) -> None:
        for name in ("checkpoint_interval", "checkpoint_keep"):
            check(getattr(self, name) >= 0, name, f"must be >= 0, got {getattr(self, name)}")


def _check_algorithm(name: str, where: Path) -> None:
    """``name`` is a registered algorithm (``where`` names the file in the message)."""
    names = algorithm_names()
    check(name in names, f"{where}: algorithm", f"unknown algorithm {name!r}; available: {', '.join(names)}")


def _algorithm_config(spec: JobSpec, where: Path) -> AlgorithmConfig:
    """``spec.config`` as the config class of ``spec.algorithm`` (``where`` names the file in messages)."""
    _check_algorithm(spec.algorithm, where)
    return from_dict(get_algorithm(spec.algorithm).config_cls, spec.config, "config")


def load_job_spec(path: str | Path, overrides: list[str] = ()) -> tuple[JobSpec, AlgorithmConfig]:
    """Read a training job file (``jobs/*.yaml``), apply ``key=value`` overrides; returns (the spec, with the
    dataset path resolved, and its algorithm config)."""
    path = Path(path)
    data = load_config_file(path, overrides)
    data.setdefault("name", path.stem)
    spec = from_dict(JobSpec, data)
    dataset = Path(spec.dataset)
    if not dataset.is_absolute() and not dataset.exists():
        for base in (path.parent, path.parent.parent):
            if (base / dataset).exists():
                dataset = base / dataset
                break
    config = _algorithm_config(spec, path)
    check_selection(config, spec.checkpoint_interval, dataset)
    return dataclasses.replace(spec, dataset=str(dataset)), config


def load_job_run(run_dir: str | Path, overrides: list[str] = ()) -> tuple[JobSpec, AlgorithmConfig, Path]:
    """``(spec, config, checkpoint)`` to resume the training job in ``run_dir`` from its newest checkpoint
    (``offlinerl.jobs.run_dir.read_run``: the resume rules shared with ``finetune --resume``). A vectorised run
    (``config.num_seeds``) is resumed seed by seed: ``RunDirError`` naming its seeds' run directories."""
    seeds = sorted(p.parent for p in Path(run_dir).glob("seed-*/config.yaml"))
    if seeds and not (Path(run_dir) / CHECKPOINTS).is_dir():
        raise RunDirError(f"{run_dir} is a vectorised run of {len(seeds)} seeds (config.num_seeds): resume each "
                          f"seed's own run directory, e.g. offlinerl train --resume {seeds[0]}")
    data, checkpoint = read_run(run_dir, overrides)
    spec = from_dict(JobSpec, data)
    config = _algorithm_config(spec, Path(run_dir) / "config.yaml")
    check_selection(config, spec.checkpoint_interval, spec.dataset)
    return spec, config, checkpoint


@dataclass(frozen=True, kw_only=True)
class FinetuneSpec:
    """One reproducible fine-tuning job."""

    checkpoint: str | None = None
    """Offline checkpoint to start from (``--from`` overrides it); None with ``algorithm`` set: a job from scratch."""
    algorithm: str | None = None
    """A job from scratch (no checkpoint, no dataset): a new module of this registered algorithm (e.g. sac), trained
    on ``warmup_steps`` random steps (``RUN/warmup``, its dataset) and its own online experience, as one buffer."""
    warmup_steps: int = 1000
    """From scratch: uniformly random env steps (``online.env``, seeded by ``config.seed``) played before the first
    update; ignored when starting from a checkpoint."""
    dataset: str | None = None
    """Offline dataset mixed into the replay; None = the checkpoint's dataset."""
    config: dict[str, Any] = field(default_factory=dict)
    """Overrides of the checkpoint's algorithm config (e.g. ``updates_per_iteration``, ``lr``)."""
    online: OnlineConfig = field(default_factory=OnlineConfig)
    """Online experience settings."""
    stop: StopConfig
    """Stop conditions (iterations, updates, wall_time_s, eval_return)."""
    output: str = "runs"
    """Parent directory of run directories."""
    name: str | None = None
    """Run name prefix (default: the job file's name)."""
    checkpoint_interval: int = 0
    """Also checkpoint every this many iterations, replay included (0 = only the final checkpoint); ``--resume``
    continues from the newest."""
    checkpoint_keep: int = 0
    """Keep only the newest this many periodic checkpoints (0 = keep all; ``final`` is always kept)."""
    record: str | None = None
    """Write the online episodes to this new episode dataset (``--record``); None = ``<run>/online-episodes`` if
    ``online.save_online_episodes``."""
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    """Where metrics go besides ``metrics.jsonl``: TensorBoard, W&B, MLflow (``offlinerl.jobs.tracking``)."""

    def __post_init__(self) -> None:
        for name in ("checkpoint_interval", "checkpoint_keep"):
            check(getattr(self, name) >= 0, name, f"must be >= 0, got {getattr(self, name)}")
        check(self.warmup_steps >= 1, "warmup_steps", f"must be >= 1, got {self.warmup_steps}")

    @property
    def from_scratch(self) -> bool:
        """No checkpoint: a new module of ``algorithm`` (``offlinerl.jobs.finetune.start_online``)."""
        return not self.checkpoint


def _check_from_scratch(spec: FinetuneSpec, path: Path) -> None:
    """A job from scratch names a known algorithm and its env, and has no dataset of its own."""
    check(spec.algorithm is not None, str(path), "no checkpoint: set checkpoint in the file or pass --from "
          "CHECKPOINT, or set algorithm (e.g. sac) and online.env to train online from scratch")
    _check_algorithm(spec.algorithm, path)
    check(spec.online.env is not None, f"{path}: online.env",
          "a job from scratch names the env it acts in (e.g. Hopper-v5)")
    check(spec.dataset is None, f"{path}: dataset",
          "a job from scratch starts from its own random warm-up steps; drop dataset (or start from a checkpoint)")
    check(spec.online.algorithm is None, f"{path}: online.algorithm",
          "continues a checkpoint as another algorithm; from scratch set algorithm instead")


def load_finetune_spec(path: str | Path, overrides: list[str] = (), checkpoint: str | None = None) -> FinetuneSpec:
    """Read a fine-tuning job file and apply ``key=value`` overrides and ``--from``."""
    path = Path(path)
    data = load_config_file(path, overrides)
    data.setdefault("name", path.stem)
    if checkpoint is not None:
        data["checkpoint"] = checkpoint
    if not data.get("checkpoint") and isinstance(data.get("online", {}), dict):
        # From scratch the warm-up steps and the replay are one buffer: sampled in proportion to their sizes.
        data["online"] = {"mixing": "proportional", **data.get("online", {})}
    spec = from_dict(FinetuneSpec, data)
    if spec.from_scratch:
        _check_from_scratch(spec, path)
    else:
        check(spec.algorithm is None, f"{path}: algorithm", "a fine-tune continues its checkpoint's algorithm "
              "(online.algorithm changes it); set algorithm only for a job from scratch, without a checkpoint")
    return spec


def run_config(spec: JobSpec | FinetuneSpec, config: AlgorithmConfig) -> dict[str, Any]:
    """A run directory's ``config.yaml``, one schema for ``train`` and ``finetune``: the job spec as its job file
    says it (after ``--set``), with ``config`` the algorithm config the job runs, in full. It is a job file of its
    kind itself, and what ``load_job_run`` / ``load_finetune_run`` read back."""
    return {**to_dict(spec), "config": config.to_dict()}


def load_finetune_run(run_dir: str | Path, overrides: list[str] = ()) -> tuple[FinetuneSpec, Path]:
    """``(spec, checkpoint)`` to resume the fine-tuning job in ``run_dir`` from its newest checkpoint."""
    data, checkpoint = read_run(run_dir, overrides)
    if "resolved_config" in data:  # a fine-tune run before 2026-12-03 also recorded its algorithm's name and config
        data = {k: v for k, v in data.items()
                if k != "resolved_config" and not (k == "algorithm" and data.get("checkpoint"))}
    spec = from_dict(FinetuneSpec, data)
    return spec, checkpoint
