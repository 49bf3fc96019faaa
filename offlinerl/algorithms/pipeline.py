"""Batch training jobs: a pipeline file (YAML/JSON) -> a run directory.

A pipeline names the algorithm, the dataset, the algorithm config (including
evaluation env and episodes), the stop conditions and the output directory::

    algorithm: bc
    dataset: datasets/cartpole-mixed
    config: {lr: 1.0e-3, updates_per_iteration: 500, evaluation: {episodes: 10}}
    stop: {updates: 5000}
    output: runs

``run_pipeline`` writes ``<output>/<name>-<UTC time>/`` (or exactly ``--output``):
``config.yaml`` (resolved), ``metrics.jsonl``, ``tensorboard/``,
``checkpoints/``, ``learning_curve.png`` and ``result.json`` (with ``ray_nodes``: where the
learners and the validation tasks ran; and ``selection`` when
``config.evaluation.ope`` selects a checkpoint by OPE on ``config.data.holdout``:
``offlinerl.algorithms.selection``). The training loop
itself is the one job loop, ``offlinerl.algorithms.job.run_job`` (shared with
``offlinerl finetune``); ``StopConfig`` lives there.
"""

from __future__ import annotations

import io
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import yaml

from offlinerl.algorithms.algorithm import Algorithm
from offlinerl.config_io import ConfigError, apply_overrides, from_dict, load_file, to_dict
from offlinerl.algorithms.guards import NonFiniteLossError
from offlinerl.algorithms.job import Progress, StopConfig, run_job, write_result
from offlinerl.algorithms.registry import get_algorithm
from offlinerl.algorithms.run_dir import RESUME_OVERRIDABLE, new_run_dir, read_run
from offlinerl.algorithms.selection import check_selection, format_selection, select_checkpoint
from offlinerl.episodes.atomic import replace_file
from offlinerl.episodes.validate import require_schema, require_valid

__all__ = ["StopConfig", "Pipeline", "load_pipeline", "load_run", "run_pipeline", "RUN_FILES", "NonFiniteLossError",
           "RESUME_OVERRIDABLE"]

RUN_FILES = ("config.yaml", "metrics.jsonl", "result.json", "learning_curve.png")


@dataclass(frozen=True, kw_only=True)
class Pipeline:
    """One reproducible training job."""

    algorithm: str
    """Registered algorithm name (``offlinerl.algorithms.registry``): bc, marwil, cql, iql, td3bc, ..."""
    dataset: str
    """Episode dataset directory (relative paths: to the working directory, else to the pipeline file)."""
    config: dict[str, Any] = field(default_factory=dict)
    """Fields of the algorithm's config class (see its docstrings)."""
    stop: StopConfig
    """Stop conditions."""
    output: str = "runs"
    """Parent directory of run directories."""
    name: str | None = None
    """Run name prefix (default: the pipeline file's name)."""
    checkpoint_interval: int = 0
    """Also checkpoint every this many iterations (0 = only the final checkpoint)."""
    checkpoint_keep: int = 0
    """Keep only the newest this many periodic checkpoints (0 = keep all; ``final`` is always kept)."""

    def __post_init__(self) -> None:
        for name in ("checkpoint_interval", "checkpoint_keep"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name}: must be >= 0, got {getattr(self, name)}")


def load_pipeline(path: str | Path, overrides: list[str] = ()) -> tuple[Pipeline, Any]:
    """Read a pipeline file, apply ``key=value`` overrides; returns (pipeline, resolved algorithm config)."""
    path = Path(path)
    data = apply_overrides(load_file(path), list(overrides))
    data.setdefault("name", path.stem)
    pipeline = from_dict(Pipeline, data)
    dataset = Path(pipeline.dataset)
    if not dataset.is_absolute() and not dataset.exists():
        for base in (path.parent, path.parent.parent):
            if (base / dataset).exists():
                dataset = base / dataset
                break
    try:
        spec = get_algorithm(pipeline.algorithm)
    except KeyError as exc:
        raise ConfigError(f"{path}: algorithm: {exc.args[0]}") from None
    config = from_dict(spec.config_cls, pipeline.config, "config")
    check_selection(config, pipeline.checkpoint_interval, dataset)
    return Pipeline(**{**pipeline.__dict__, "dataset": str(dataset)}), config


def _scores(dataset: str, values: Mapping[str, float | None]) -> dict[str, float]:
    try:
        from offlinerl.scoring import score_for_dataset
    except ImportError:
        return {}
    out = {}
    for key, value in values.items():
        if value is not None:
            score = score_for_dataset(value, dataset)
            if score is not None:
                out[key.replace("_return", "_normalized_score")] = score
    return out


def _plot(history: list[dict[str, float]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    evals = [(h["learner/updates"], h["eval/return_mean"], h.get("eval/return_std", 0.0)) for h in history if "eval/return_mean" in h]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    if evals:
        x, y, s = zip(*evals)
        axes[0].plot(x, y, marker="o")
        axes[0].fill_between(x, [a - b for a, b in zip(y, s)], [a + b for a, b in zip(y, s)], alpha=0.2)
    axes[0].set(xlabel="gradient updates", ylabel="evaluation return", title=title)
    for key in sorted({k for h in history for k in h if k.startswith("losses/")}):
        pts = [(h["learner/updates"], h[key]) for h in history if key in h]
        axes[1].plot(*zip(*pts), label=key.split("/", 1)[1])
    axes[1].set(xlabel="gradient updates", ylabel="loss", title="losses")
    axes[1].legend()
    fig.tight_layout()
    image = io.BytesIO()
    fig.savefig(image, format="png", dpi=90)
    plt.close(fig)
    replace_file(path, image.getvalue())  # never a half-written PNG


def load_run(run_dir: str | Path, overrides: list[str] = ()) -> tuple[Pipeline, Any, Path]:
    """``(pipeline, config, checkpoint)`` to resume the job in ``run_dir`` from its newest checkpoint
    (``offlinerl.algorithms.run_dir.read_run``: the resume rules shared with ``finetune --resume``)."""
    data, checkpoint = read_run(run_dir, overrides)
    pipeline = from_dict(Pipeline, data)
    try:
        spec = get_algorithm(pipeline.algorithm)
    except KeyError as exc:
        raise ConfigError(f"{Path(run_dir) / 'config.yaml'}: algorithm: {exc.args[0]}") from None
    config = from_dict(spec.config_cls, pipeline.config, "config")
    check_selection(config, pipeline.checkpoint_interval, pipeline.dataset)
    return pipeline, config, checkpoint


def _why_no_env(algo: Algorithm) -> str:
    if algo.offline_data.multi_module:
        return f"the dataset holds {len(algo.offline_data.module_ids)} modules (env evaluation is single-agent)"
    return "the dataset names no env and the pipeline sets no evaluation.env"


def run_pipeline(
    pipeline: Pipeline,
    config: Any,
    *,
    run_dir: str | Path | None = None,
    resume_from: str | Path | None = None,
    address: str | None = None,
    progress: bool = True,
    log: Callable[[str], None] = print,
    skip_validation: bool = False,
    started_at: float | None = None,
) -> dict[str, Any]:
    """Validate the dataset (unless ``skip_validation``: for data already validated), then train until a stop
    condition, evaluate, checkpoint; return (and write) ``result.json``.

    ``resume_from`` (a checkpoint inside ``run_dir``) continues a stopped or killed
    job: state, counters and ``metrics.jsonl`` up to that checkpoint are kept, and
    the rest runs as the uninterrupted job would have. ``started_at`` (``time.time()``, default: now): when
    the job started, e.g. the command (``first_update_s`` counts from it). Raises ``InvalidDatasetError``
    (before the run directory exists) and ``NonFiniteLossError``.
    """
    from offlinerl.ray_utils import init_ray

    t_start = time.time() if started_at is None else started_at
    init_ray(address)
    validation = require_schema(pipeline.dataset) if skip_validation else require_valid(pipeline.dataset)
    if validation is not None and validation.cached:
        log(f"{pipeline.dataset}: unchanged since it passed validation, not read again (offlinerl validate re-checks it)")
    if resume_from is None:
        run = new_run_dir(pipeline.output, pipeline.name, run_dir)
        resolved = {**to_dict(pipeline), "config": config.to_dict()}
        (run / "config.yaml").write_text(yaml.safe_dump(resolved, sort_keys=False))
        try:
            algo = Algorithm(pipeline.algorithm, config, pipeline.dataset, validate_data=False)
        except BaseException:  # e.g. a wrong evaluation env: leave no run directory that cannot be resumed
            (run / "config.yaml").unlink()
            if not any(run.iterdir()):
                run.rmdir()
            raise
    else:
        run = Path(run_dir)
        algo = Algorithm.from_checkpoint(resume_from, dataset=pipeline.dataset, validate_data=False)
        log(f"resuming {run} from {resume_from} (iteration {algo.iteration}, {algo.num_updates} updates)")
    nodes = algo.ray_nodes(validation)
    if not algo.can_evaluate:
        log(f"no evaluation env: {_why_no_env(algo)}, so the job trains and checkpoints without env evaluation; "
            "score its checkpoints offline with  offlinerl ope CHECKPOINT... --dataset DATASET")
    stop = pipeline.stop
    total = stop.updates or (stop.iterations * config.updates_per_iteration if stop.iterations else None)
    try:
        job = run_job(
            algo, run, stop, t_start=t_start,
            progress=Progress(desc=f"{pipeline.algorithm} {Path(pipeline.dataset).name}", unit="upd", total=total)
            if progress else None,
            checkpoint_interval=pipeline.checkpoint_interval, checkpoint_keep=pipeline.checkpoint_keep,
            resumed=resume_from is not None, last_good=resume_from,
            resume_command=f"offlinerl train --resume {run}", log=log,
        )
    finally:
        algo.stop()
    _plot(job.history, run / "learning_curve.png", f"{pipeline.algorithm} on {Path(pipeline.dataset).name}")
    final_return = algo.last_eval.get("eval/return_mean")
    result = {
        "algorithm": pipeline.algorithm,
        "dataset": pipeline.dataset,
        "env": algo.config.evaluation.env or algo.offline_data.info.env_id,
        "iterations": algo.iteration,
        "updates": algo.num_updates,
        "updates_per_s": algo.num_updates / job.train_s if job.train_s > 0 else None,
        "train_time_s": job.train_s,
        "first_update_s": job.first_update_s,
        "final_eval_return": final_return,
        "final_eval_return_std": algo.last_eval.get("eval/return_std"),
        "best_eval_return": algo.best_eval_return,
        "eval_episodes": int(algo.last_eval.get("eval/episodes", 0)),
        "checkpoint": str(job.checkpoint),
        "run_dir": str(run),
        **_scores(pipeline.dataset, {"final_eval_return": final_return, "best_eval_return": algo.best_eval_return}),
        "ray_nodes": nodes,
    }
    if algo.config.evaluation.ope is not None:  # after the loop and algo.stop(): selection never slows training
        result["selection"] = select_checkpoint(run, pipeline.dataset, algo.config, job.history)
        format_selection(result["selection"], log)
    write_result(run, result)
    return result
