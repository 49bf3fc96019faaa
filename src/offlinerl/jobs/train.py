"""``offlinerl train``: a training job spec (``offlinerl.jobs.spec.JobSpec``, a file under ``jobs/``) ->
a run directory.

``run_train`` writes ``<output>/<name>-<UTC time>/`` (or exactly ``--output``):
``config.yaml`` (resolved), ``metrics.jsonl``, ``tensorboard/`` (and the W&B / MLflow runs of the spec's
``logging:`` block, ``offlinerl.jobs.tracking``), ``checkpoints/``, ``learning_curve.png`` and ``result.json`` (with ``ray_nodes``: where the
learners and the validation tasks ran; and ``selection`` when
``config.evaluation.ope`` selects a checkpoint by OPE on ``config.data.holdout``:
``offlinerl.jobs.selection``). The training loop
itself is the one job loop, ``offlinerl.jobs.loop.run_job``, and the run directory is opened by
``offlinerl.jobs.run_dir.open_run``: both shared with ``offlinerl finetune``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Mapping

from offlinerl.algorithms.algorithm_config import AlgorithmConfig
from offlinerl.core import metrics as M
from offlinerl.episodes.validate import require_schema, require_valid
from offlinerl.jobs.loop import Progress, run_job, write_result
from offlinerl.jobs.plots import plot_learning_curve, reference_lines
from offlinerl.jobs.preflight import note_cached_validation, planned_updates, preflight
from offlinerl.jobs.run_dir import open_run
from offlinerl.jobs.selection import format_selection, select_checkpoint
from offlinerl.jobs.spec import JobSpec, run_config
from offlinerl.training.algorithm import Algorithm
from offlinerl.training.setup import ray_reason

__all__ = ["run_train", "RUN_FILES"]

RUN_FILES = ("config.yaml", "metrics.jsonl", "result.json", "learning_curve.png")


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


def _why_no_env(algo: Algorithm) -> str:
    if algo.offline_data.multi_module:
        return (f"the dataset holds {len(algo.offline_data.module_ids)} modules; evaluating them needs a multi-agent "
                "env: set evaluation.env to pettingzoo:MODULE")
    return "the dataset names no env and the job file sets no evaluation.env"


def run_train(
    spec: JobSpec,
    config: AlgorithmConfig,
    *,
    run_dir: str | Path | None = None,
    resume_from: str | Path | None = None,
    address: str | None = None,
    progress: bool = True,
    log: Callable[[str], None] = print,
    skip_validation: bool = False,
    started_at: float | None = None,
    algorithm: Algorithm | None = None,
) -> dict[str, Any]:
    """Validate the dataset (unless ``skip_validation``: for data already validated), then train until a stop
    condition, evaluate, checkpoint; return (and write) ``result.json``.

    ``resume_from`` (a checkpoint inside ``run_dir``) continues a stopped or killed
    job: state, counters and ``metrics.jsonl`` up to that checkpoint are kept, and
    the rest runs as the uninterrupted job would have. ``started_at`` (``time.time()``, default: now): when
    the job started, e.g. the command (``first_update_s`` counts from it). ``algorithm``: an ``Algorithm``
    already built on ``spec.dataset`` with ``config`` (the Python API's ``fit``): it is trained from where it
    stands instead of a new one, without validating the data again, and left running afterwards.
    ``config.num_seeds > 1``: the seeds train as one vectorised learner (``offlinerl.jobs.vectorized``) and the
    vectorised run's ``result.json`` is returned. Raises
    ``InvalidDatasetError`` (before the run directory exists) and ``NonFiniteLossError``.
    """
    if algorithm is not None and resume_from is not None:
        raise ValueError("run_train: resume_from continues a run directory; it takes no algorithm")
    if config.num_seeds > 1:  # N seeds as one vectorised learner, a run directory per seed inside this one
        if algorithm is not None or resume_from is not None:
            raise ValueError(f"num_seeds: {config.num_seeds} starts a new vectorised run; resume each seed's run "
                             "directory (RUN/seed-<s>) as a single job")
        from offlinerl.jobs.vectorized import run_vectorized

        return run_vectorized(spec, config, run_dir=run_dir, address=address, progress=progress, log=log,
                              skip_validation=skip_validation, started_at=started_at)
    from offlinerl.ray_utils import init_ray, quiet_ray_data

    t_start = time.time() if started_at is None else started_at
    preflight(spec.dataset, config, spec.stop, run_dir=run_dir, resuming=resume_from is not None, log=log,
              address=address)  # before Ray: its refusals take no 10-30 s start
    use_ray = algorithm.use_ray if algorithm is not None else ray_reason(config, None, spec.dataset, address) is not None
    if use_ray:  # else the whole job runs in this process: in-memory data, one local learner, no cluster
        quiet_ray_data()  # Ray Data's own INFO lines would break up the progress bar
        init_ray(address)
    if algorithm is not None:
        validation = None
    else:
        # without Ray, read here; with it, here too for small files (require_valid decides)
        validation = require_schema(spec.dataset) if skip_validation else \
            require_valid(spec.dataset, local=None if use_ray else True)
    note_cached_validation(spec.dataset, validation)
    run, algo = open_run(
        spec.output, spec.name, run_dir, resume_from,
        config=run_config(spec, config),  # written first: it names the job being built
        start=lambda: algorithm or Algorithm(spec.algorithm, config, spec.dataset, validate_data=False, use_ray=use_ray),
        resume=lambda: Algorithm.from_checkpoint(resume_from, dataset=spec.dataset, validate_data=False,
                                                 use_ray=use_ray))
    if resume_from is not None:
        log(f"resuming {run} from {resume_from} (iteration {algo.iteration}, {algo.num_updates} updates)")
    nodes = algo.ray_nodes(validation)
    if not algo.can_evaluate:
        log(f"no evaluation env: {_why_no_env(algo)}, so the job trains and checkpoints without env evaluation; "
            "score its checkpoints offline with  offlinerl ope CHECKPOINT... --dataset DATASET")
    stop = spec.stop
    total = planned_updates(stop, config.updates_per_iteration)  # what runs: stop.updates rounded to iterations
    try:
        job = run_job(
            algo, run, stop, t_start=t_start,
            progress=Progress(desc=f"{spec.algorithm} {Path(spec.dataset).name}", unit="upd", total=total)
            if progress else None,
            checkpoint_interval=spec.checkpoint_interval, checkpoint_keep=spec.checkpoint_keep,
            resumed=resume_from is not None, last_good=resume_from,
            resume_command=f"offlinerl train --resume {run}", log=log,
            logging=spec.logging, hparams={"algorithm": spec.algorithm, "dataset": spec.dataset,
                                           "config": config.to_dict()},
        )
    finally:
        if algorithm is None:
            algo.stop()
    plot_learning_curve(job.history, run / "learning_curve.png", f"{spec.algorithm} on {Path(spec.dataset).name}",
                        references=reference_lines(spec.dataset))
    final_return = algo.last_eval.get(M.EVAL_RETURN_MEAN)
    result = {
        "algorithm": spec.algorithm,
        "dataset": spec.dataset,
        "dataset_fingerprint": algo.offline_data.info.fingerprint,
        "env": algo.config.evaluation.env or algo.offline_data.info.env_id,
        "iterations": algo.iteration,
        "updates": algo.num_updates,
        "device": algo.config.learner_device,
        "updates_per_s": algo.num_updates / job.train_s if job.train_s > 0 else None,
        "train_time_s": job.train_s,
        "first_update_s": job.first_update_s,
        "final_eval_return": final_return,
        "final_eval_return_std": algo.last_eval.get(M.EVAL_RETURN_STD),
        "best_eval_return": algo.best_eval_return,
        "eval_episodes": int(algo.last_eval.get(M.EVAL_EPISODES, 0)),
        "checkpoint": str(job.checkpoint),
        "run_dir": str(run),
        **_scores(spec.dataset, {"final_eval_return": final_return, "best_eval_return": algo.best_eval_return}),
        "ray_nodes": nodes,
    }
    if algo.config.evaluation.ope is not None:  # after the loop and algo.stop(): selection never slows training
        result["selection"] = select_checkpoint(run, spec.dataset, algo.config, job.history)
        format_selection(result["selection"], log)
    write_result(run, result)
    return result
