"""``config.num_seeds: N``: N seeds of one training job as one vectorised learner (``offlinerl.core.seed_stack``).

    RUN/
        config.yaml       the job as given (num_seeds: N)
        result.json       num_seeds, seeds, total and per-replica updates/s, each seed's result, mean ± std
        seed-<s>/         one per seed s = seed, seed+1, ...: a single run's directory (config.yaml with
                          seed: s and num_seeds: 1, metrics.jsonl, checkpoints/, learning_curve.png,
                          result.json), resumable alone with  offlinerl train --resume RUN/seed-<s>

Each seed is an ordinary job (``run_train`` over its own in-process ``Algorithm``: its own data sampler, evaluation,
checkpoints and stop conditions) in its own thread; their learners are joined by a ``Lockstep``, so each
iteration's updates run once for all seeds as a ``SeedStack``. A seed whose job stops early (a stop condition met
sooner, a non-finite loss) leaves the lockstep and the others go on; its error is reported once all have ended.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import threading
import time
from pathlib import Path
from typing import Any, Callable

import torch

from offlinerl.algorithms.algorithm_config import AlgorithmConfig
from offlinerl.algorithms.registry import get_algorithm
from offlinerl.core.seed_stack import Lockstep, check_vectorizable, keeps_running_statistics
from offlinerl.episodes.info import DatasetInfoError, read_info
from offlinerl.episodes.validate import require_schema, require_valid
from offlinerl.jobs.loop import write_result
from offlinerl.jobs.preflight import note_cached_validation, preflight
from offlinerl.jobs.run_dir import open_run
from offlinerl.jobs.spec import JobSpec, run_config
from offlinerl.jobs.sweep.summary import mean_std
from offlinerl.training.algorithm import Algorithm
from offlinerl.training.setup import job_ray_reason

__all__ = ["run_vectorized", "seed_dir", "vectorize_problem", "summarize"]


def seed_dir(run: str | Path, seed: int) -> Path:
    """Seed ``seed``'s run directory inside a vectorised run."""
    return Path(run) / f"seed-{seed}"


def vectorize_problem(spec_algorithm: str, config: AlgorithmConfig, dataset: str,
                      address: str | None = None) -> str | None:
    """Why the job cannot train ``config.num_seeds`` seeds as one vectorised learner; None when it can.
    ``address``: the cluster the command was told to join (a sweep's trials pass None: they join none)."""
    if address:
        return (f"num_seeds: {config.num_seeds} trains its seeds in this process and joins no Ray cluster; drop "
                "--address (or RAY_ADDRESS), or train the seeds as separate jobs (offlinerl sweep --seeds)")
    try:
        info = read_info(dataset)
    except DatasetInfoError:
        info = None  # the validation that follows says what is wrong with it
    reason = job_ray_reason(config, None, info)
    if reason is not None:
        return (f"num_seeds: {config.num_seeds} trains its seeds in this process, but this job needs Ray for "
                f"{reason}; train the seeds as separate jobs (offlinerl sweep --seeds) or set data.mode: in_memory "
                "and num_learners: 0")
    if not get_algorithm(spec_algorithm).learner_cls.vectorizable:
        return (f"num_seeds > 1: {spec_algorithm}'s loss takes gradients inside itself, which one vectorised learner "
                "(torch.func.vmap) cannot run; train the seeds as separate jobs (offlinerl sweep --seeds)")
    if keeps_running_statistics(get_algorithm(spec_algorithm).learner_cls):
        return (f"num_seeds > 1: {spec_algorithm} keeps running statistics outside its module, which one vectorised "
                "learner cannot hold per seed; train the seeds as separate jobs (offlinerl sweep --seeds)")
    if config.share_encoder:
        return "num_seeds > 1 cannot share an encoder between modules (share_encoder); train the seeds separately"
    return None


def run_vectorized(
    spec: JobSpec,
    config: AlgorithmConfig,
    *,
    run_dir: str | Path | None = None,
    address: str | None = None,
    progress: bool = True,
    log: Callable[[str], None] = print,
    skip_validation: bool = False,
    started_at: float | None = None,
) -> dict[str, Any]:
    """Train ``config.num_seeds`` seeds of ``spec`` as one vectorised learner; write and return the run's
    ``result.json`` (each seed's own in ``seed-<s>/``). ``ValueError`` for a job that cannot (one needing Ray,
    ``share_encoder``, MARWIL: before anything is written); a seed's failure is raised after the others end."""
    t_start = time.time() if started_at is None else started_at
    n = config.num_seeds
    refusal = vectorize_problem(spec.algorithm, config, spec.dataset, address or os.environ.get("RAY_ADDRESS"))
    if refusal is not None:
        raise ValueError(refusal)
    preflight(spec.dataset, config, spec.stop, run_dir=run_dir, resuming=False, log=log, address=address)
    validation = require_schema(spec.dataset) if skip_validation else require_valid(spec.dataset, local=True)
    note_cached_validation(spec.dataset, validation)
    seeds = [config.seed + i for i in range(n)]
    configs = [dataclasses.replace(config, seed=s, num_seeds=1) for s in seeds]
    before = torch.get_num_threads()  # building the learners sets num_cpus_per_learner threads
    run, algos = open_run(spec.output, spec.name, run_dir, None, config=run_config(spec, config),
                          start=lambda: _build(spec, configs), resume=lambda: None)
    # N replicas reserve N x num_cpus_per_learner: the stacked update uses that many threads, up to the machine's
    # cores (restored when the seeds end)
    torch.set_num_threads(min(os.cpu_count() or 1, math.ceil(config.num_cpus_per_learner * n)))
    lockstep = Lockstep(n)
    for i, algo in enumerate(algos):
        algo.learner_group.join_lockstep(lockstep, i)
        # evaluations run on the lockstep's thread too: torch work from 8 threads left 8 OpenMP pools that made the
        # joint updates after the first evaluation 1.8x slower
        algo.evaluate = functools.partial(lockstep.call, type(algo).evaluate, algo)  # type: ignore[method-assign]
    log(f"{n} seeds ({seeds[0]}..{seeds[-1]}) of {spec.algorithm} as one vectorised learner: {run}/seed-<s>/")
    results: list[dict[str, Any] | None] = [None] * n
    errors: list[BaseException | None] = [None] * n
    lock = threading.Lock()

    def seed_log(seed: int) -> Callable[[str], None]:
        def say(line: str) -> None:
            with lock:
                log(f"[seed {seed}] {line}")
        return say

    def job(i: int) -> None:
        from offlinerl.jobs.train import run_train

        try:
            own = run_train(spec, configs[i], run_dir=seed_dir(run, seeds[i]), progress=progress and i == 0,
                            log=seed_log(seeds[i]), skip_validation=True, started_at=t_start, algorithm=algos[i])
            results[i] = {**own, "num_seeds": n, "vectorized_run": str(run)}
            write_result(seed_dir(run, seeds[i]), results[i])
        except BaseException as exc:  # noqa: BLE001 - reported with its seed once every seed has ended
            errors[i] = exc
        finally:
            lockstep.leave(i)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=job, args=(i,), name=f"offlinerl-seed-{s}", daemon=True)
               for i, s in enumerate(seeds)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            while t.is_alive():
                t.join(0.5)  # wakes for Ctrl-C
    finally:
        for algo in algos:
            algo.stop()
        torch.set_num_threads(before)  # the process's own setting again (a caller's, a test session's)
    wall_s = time.perf_counter() - t0
    result = summarize(spec, run, seeds, results, errors, wall_s)
    write_result(run, result)
    failed = [(s, e) for s, e in zip(seeds, errors) if e is not None]
    for s, e in failed:
        log(f"seed {s} failed: {type(e).__name__}: {e}")
    if failed:
        raise failed[0][1]
    return result


def _build(spec: JobSpec, configs: list[AlgorithmConfig]) -> list[Algorithm]:
    algos: list[Algorithm] = []
    try:
        for cfg in configs:
            algos.append(Algorithm(spec.algorithm, cfg, spec.dataset, validate_data=False, use_ray=False))
        check_vectorizable(algos[0].learner_group.local_learner)
    except BaseException:
        for algo in algos:
            algo.stop()
        raise
    return algos


def _mean_std(values: list[float | None]) -> tuple[float | None, float | None]:
    return mean_std([v for v in values if v is not None])  # the sweep summary's statistics, over the seeds that ran


def summarize(spec: JobSpec, run: Path, seeds: list[int], results: list[dict[str, Any] | None],
              errors: list[BaseException | None], wall_s: float) -> dict[str, Any]:
    """The vectorised run's ``result.json``."""
    done = [r for r in results if r is not None]
    updates = sum(r["updates"] for r in done)
    final_mean, final_std = _mean_std([r["final_eval_return"] for r in done])
    best_mean, best_std = _mean_std([r["best_eval_return"] for r in done])
    out: dict[str, Any] = {
        "algorithm": spec.algorithm,
        "dataset": spec.dataset,
        "num_seeds": len(seeds),
        "seeds": seeds,
        "vectorized": True,
        "updates": updates,
        "wall_time_s": wall_s,
        "updates_per_s": updates / wall_s if wall_s > 0 else None,
        "updates_per_s_per_replica": [r["updates_per_s"] if r else None for r in results],
        "final_eval_return_mean": final_mean,
        "final_eval_return_std_over_seeds": final_std,
        "best_eval_return_mean": best_mean,
        "best_eval_return_std_over_seeds": best_std,
        "replicas": [
            {"seed": s, "run_dir": str(seed_dir(run, s)),
             **({"updates": r["updates"], "updates_per_s": r["updates_per_s"],
                 "final_eval_return": r["final_eval_return"], "best_eval_return": r["best_eval_return"],
                 "checkpoint": r["checkpoint"]} if r else {}),
             **({"error": f"{type(e).__name__}: {e}"} if e is not None else {})}
            for s, r, e in zip(seeds, results, errors)],
        "run_dir": str(run),
    }
    for key in ("final_eval_normalized_score", "best_eval_normalized_score"):
        if done and all(key in r for r in done):
            out[f"{key}_mean"], out[f"{key}_std_over_seeds"] = _mean_std([r[key] for r in done])
    return out
