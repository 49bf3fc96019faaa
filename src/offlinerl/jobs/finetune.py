"""``offlinerl finetune``: an offline checkpoint's Algorithm continues online, run by the one job loop.

    checkpoint (module, optimizers, connector state, config)
        -> Algorithm(..., online=OnlineConfig)    (its training_step samples, adds to the replays, updates, syncs)
        -> offlinerl.jobs.loop.run_job       (the loop, metrics, checkpoints, stop conditions; as ``train``)
        -> result.json, the recorded online episodes (an episode dataset)

This module only starts or resumes the job and writes what it leaves: the
control plane is ``Algorithm``, the loop is ``run_job``, evaluation is
``Algorithm.evaluate``. The first evaluation runs before any update, with the
checkpoint's evaluation settings, so it reproduces the checkpoint's own
evaluation (``result.json`` reports both). ``resume_from`` continues a stopped
or killed job from a checkpoint of its run directory, with the replay the
checkpoint holds (``offlinerl finetune --resume RUN_DIR``). With no checkpoint and ``algorithm`` set the job
starts from scratch (``offlinerl.jobs.warmup``): random warm-up steps written to ``RUN/warmup`` are its dataset.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from offlinerl.algorithms.algorithm_config import EvaluationConfig
from offlinerl.algorithms.registry import get_algorithm
from offlinerl.config_io import ConfigError, to_dict
from offlinerl.core import metrics as M
from offlinerl.episodes.atomic import check_output
from offlinerl.episodes.validate import require_schema, require_valid
from offlinerl.jobs.loop import Progress, run_job, write_result
from offlinerl.jobs.plots import plot_learning_curve, reference_lines
from offlinerl.jobs.preflight import check_local_gpus
from offlinerl.jobs.run_dir import check_new_run_dir, open_run, run_dir_path
from offlinerl.jobs.warmup import WARMUP
from offlinerl.jobs.spec import FinetuneSpec, run_config
from offlinerl.training.algorithm import Algorithm
from offlinerl.training.checkpoint import CheckpointError, load_checkpoint
from offlinerl.training.recording import OnlineRecording, close_episodes

__all__ = ["run_finetune", "start_online", "close_episodes", "RECORDING_PARTS"]

#: Where a fine-tuning job stages its recording, per iteration, inside its run directory.
RECORDING_PARTS = "recording-parts"


def start_online(spec: FinetuneSpec, validate_data: bool = False, warmup: str | Path | None = None) -> Algorithm:
    """The job spec's checkpoint as a new online Algorithm (optionally continuing as another algorithm, e.g. BC ->
    MARWIL: the config fields both have, the policy weights and the connector state carry over); from scratch
    (no checkpoint), a new ``spec.algorithm`` Algorithm on the random warm-up steps it first writes to ``warmup``."""
    if spec.from_scratch:
        from offlinerl.jobs.warmup import start_from_scratch

        return start_from_scratch(spec, warmup)
    ckpt = load_checkpoint(spec.checkpoint)
    meta = ckpt.meta
    target = spec.online.algorithm or meta.algorithm
    if target == meta.algorithm:
        return Algorithm.from_checkpoint(ckpt, dataset=spec.dataset, overrides=spec.config,
                                         online=spec.online, resume=False, validate_data=validate_data)
    algorithm = get_algorithm(target)
    shared = {k: v for k, v in meta.config.items() if k in algorithm.config_cls.__dataclass_fields__}
    config = algorithm.config_cls.from_dict({**shared, **spec.config})
    algo = Algorithm(target, config, spec.dataset or meta.dataset, connector_state=meta.connector_state,
                     validate_data=validate_data, online=spec.online)
    try:
        algo.set_weights(ckpt.trained_module.state_dict(), strict=False)  # checked: shapes, finite values
        deployed = ckpt.deployed_policy()
        if deployed is not None:  # a gated fine-tune's deployed policy, as from_checkpoint starts from
            algo.set_weights(deployed, strict=False)
    except ValueError as exc:
        algo.stop()
        raise ConfigError(f"online.algorithm={target}: the checkpoint's module does not fit: {exc}") from None
    return algo


def _curve(history: Sequence[Mapping[str, Any]]) -> list[dict[str, float]]:
    """``{env_steps, updates, eval_return}`` of every evaluation, in order."""
    out, steps = [], 0.0
    for h in history:
        steps = h.get(M.ENV_STEPS, steps)
        if h.get(M.EVAL_RETURN_MEAN) is not None:
            out.append({"env_steps": int(steps), "updates": int(h[M.UPDATES]),
                        "eval_return": h[M.EVAL_RETURN_MEAN]})
    return out


HANDOVER = "eval/handover_return_mean"
"""The loaded policy's return with the checkpoint's own evaluation settings, in the first metrics record."""


@dataclass(frozen=True)
class _CheckpointEval:
    """The evaluation the starting checkpoint recorded, and the settings it ran with."""

    eval_return: float
    episodes: int
    seed: int


def _checkpoint_eval(path: str | None) -> _CheckpointEval | None:
    """The starting checkpoint's last evaluation (None: none, from scratch, or the checkpoint is gone)."""
    if not path:
        return None
    try:
        meta = load_checkpoint(path).meta
    except CheckpointError:
        return None
    ret, episodes = meta.last_eval.get(M.EVAL_RETURN_MEAN), meta.last_eval.get(M.EVAL_EPISODES)
    if ret is None or not episodes:
        return None
    seed = (meta.config.get("evaluation") or {}).get("seed", EvaluationConfig.seed)
    return _CheckpointEval(float(ret), int(episodes), int(seed))


def _handover(algo: Algorithm, own: _CheckpointEval | None, initial: float) -> float:
    """The loaded policy's return with the checkpoint's own evaluation settings (episodes, seed): equal to the
    checkpoint's recorded return when nothing was lost in the hand-over. The job's first evaluation is that
    measurement when the job keeps the settings; a job that evaluates differently (e.g. 50 episodes where the
    checkpoint had 10) plays the checkpoint's episodes once more, aside, so the two stay comparable."""
    ev = algo.config.evaluation
    if own is None or (own.episodes, own.seed) == (ev.episodes, ev.seed):
        return initial
    return algo.evaluate(own.episodes, own.seed, record=False)[M.EVAL_RETURN_MEAN]


def _record_destination(spec: FinetuneSpec, run: Path) -> Path | None:
    if spec.record:
        return Path(spec.record)
    return run / "online-episodes" if spec.online.save_online_episodes else None


def _inputs(spec: FinetuneSpec, dataset: str) -> list[str]:
    return [p for p in (spec.checkpoint, dataset) if p]


def run_finetune(
    spec: FinetuneSpec,
    *,
    run_dir: str | Path | None = None,
    resume_from: str | Path | None = None,
    overwrite: bool = False,
    address: str | None = None,
    progress: bool = True,
    log: Callable[[str], None] = print,
    skip_validation: bool = False,
    started_at: float | None = None,
) -> dict[str, Any]:
    """Validate the offline dataset (unless ``skip_validation``), fine-tune until a stop condition with the one job
    loop (``offlinerl.jobs.loop.run_job``); write the run directory and the recording, and return
    ``result.json``'s content.

    ``resume_from`` (a checkpoint inside ``run_dir``) continues a stopped or killed job. ``overwrite`` lets the
    recording (``spec.record``) replace an existing dataset there (never an input of the job).
    ``started_at``: as in ``offlinerl.jobs.train.run_train``.
    """
    from offlinerl.ray_utils import init_ray

    t_start = time.time() if started_at is None else started_at
    scratch = resume_from is None and spec.from_scratch
    if scratch:  # the job's dataset is the warm-up it writes into its new run directory
        run_dir = run_dir or run_dir_path(spec.output, spec.name)
        dataset = str(Path(run_dir) / WARMUP)
    else:
        dataset = spec.dataset or load_checkpoint(resume_from or spec.checkpoint).meta.dataset
    if spec.record:  # before any work: a job must not fail at its end for want of a place to write
        check_output(spec.record, overwrite, kind="dataset", inputs=_inputs(spec, dataset))
    if resume_from is None and run_dir:  # before Ray, as train's preflight: a taken --output costs no Ray start
        check_new_run_dir(Path(run_dir), inputs=_inputs(spec, "" if scratch else dataset))
    resolved = dict(spec.config) if scratch else {**load_checkpoint(resume_from or spec.checkpoint).meta.config,
                                                   **(spec.config if resume_from is None else {})}
    if int(resolved.get("num_seeds") or 1) > 1:
        raise ValueError(f"num_seeds: {resolved['num_seeds']}: vectorised seeds train offline (offlinerl train); "
                         "fine-tune each seed's checkpoint as its own job")
    check_local_gpus(float(resolved.get("num_gpus_per_learner") or 0), int(resolved.get("num_learners") or 0),
                     address, resolved.get("device"))  # GPUs asked for where there are none: refused before Ray, not trained on the CPU
    init_ray(address)
    validation = None if scratch else require_schema(dataset) if skip_validation else require_valid(dataset)
    first_records: list[dict[str, Any]] = []
    run, algo = open_run(
        spec.output, spec.name, run_dir, resume_from,
        config=lambda algo: run_config(spec, algo.config),  # the resolved config: after the checkpoint is loaded
        start=lambda: start_online(spec, warmup=dataset if scratch else None),
        resume=lambda: Algorithm.from_checkpoint(resume_from, dataset=spec.dataset, online=spec.online,
                                                 validate_data=False))
    if resume_from is not None:
        log(f"resuming {run} from {resume_from} (iteration {algo.iteration}, {algo.env_steps} env steps, "
            f"{algo.num_updates} updates)")
    nodes = algo.ray_nodes(validation)
    destination = _record_destination(spec, run)
    recording = None
    if destination is not None:
        recording = OnlineRecording(
            run / RECORDING_PARTS, observation_space=algo.offline_data.observation_space,
            action_space=algo.offline_data.action_space, agent_spaces=algo.offline_data.info.agent_spaces,
            env_id=algo.online_env_id(),
            provenance={"collector": "offlinerl finetune", "checkpoint": str(spec.checkpoint),
                        "algorithm": algo.name, "run_dir": str(run)},
            inputs=_inputs(spec, dataset),
        )
        recording.truncate(algo.iteration)  # a resumed job samples the later iterations again
        algo.experience.recording = recording
    own = _checkpoint_eval(spec.checkpoint)
    handover = None
    try:
        if resume_from is None:
            initial = algo.evaluate()
            start = f"{algo.name} from scratch ({spec.warmup_steps} random warm-up steps in {dataset})" if scratch \
                else f"loaded {spec.checkpoint} ({algo.name})"
            handover = _handover(algo, own, initial[M.EVAL_RETURN_MEAN])
            if own is None or handover == initial[M.EVAL_RETURN_MEAN]:
                log(f"{start}: evaluation return {initial[M.EVAL_RETURN_MEAN]:.2f}"
                    + (f" (checkpoint's own: {own.eval_return:.2f})" if own is not None else ""))
            else:
                log(f"{start}: evaluation return {handover:.2f} on the checkpoint's {own.episodes} episodes "
                    f"(checkpoint's own: {own.eval_return:.2f}), {initial[M.EVAL_RETURN_MEAN]:.2f} on this job's "
                    f"{algo.config.evaluation.episodes} (seed {algo.config.evaluation.seed})")
            first_records = [{M.ITERATION: 0.0, M.UPDATES: float(algo.num_updates), M.ENV_STEPS: 0.0,
                              **initial, HANDOVER: handover}]
        job = run_job(
            algo, run, spec.stop, t_start=t_start,
            progress=Progress(desc=f"finetune {algo.name}", unit="it", total=spec.stop.iterations)
            if progress else None,
            checkpoint_interval=spec.checkpoint_interval, checkpoint_keep=spec.checkpoint_keep,
            resumed=resume_from is not None, last_good=resume_from or spec.checkpoint,
            first_records=first_records, resume_command=f"offlinerl finetune --resume {run}", log=log,
            logging=spec.logging, hparams={"algorithm": algo.name, "checkpoint": spec.checkpoint,
                                           "config": algo.config.to_dict(), "online": to_dict(spec.online)},
        )
    finally:
        algo.stop()
    info = recording.write(destination, overwrite=overwrite or destination == run / "online-episodes") \
        if recording is not None else None
    first = next((h for h in job.history if h.get(M.ITERATION) == 0 and h.get(M.EVAL_RETURN_MEAN) is not None),
                 None)  # the job's first evaluation, before any update (a resumed job reads it from metrics.jsonl)
    result = {
        "algorithm": algo.name,
        "from_checkpoint": str(spec.checkpoint) if spec.checkpoint else None,
        "dataset_fingerprint": algo.offline_data.info.fingerprint,
        "env": algo.online_env_id(),
        "checkpoint_eval_return": None if own is None else own.eval_return,
        "initial_eval_return": None if first is None else first.get(HANDOVER, first[M.EVAL_RETURN_MEAN]),
        "first_eval_return": None if first is None else first[M.EVAL_RETURN_MEAN],
        "final_eval_return": algo.last_eval.get(M.EVAL_RETURN_MEAN),
        "final_eval_return_std": algo.last_eval.get(M.EVAL_RETURN_STD),
        "best_eval_return": algo.best_eval_return,
        "iterations": algo.iteration,
        "updates": algo.num_updates,
        "device": algo.config.learner_device,
        "env_steps": algo.env_steps,
        "env_runner_restarts": algo.experience.runners.num_restarts,
        "gate": None if algo.gate is None else algo.gate.metadata(),
        "curve": _curve(job.history),
        "time_s": time.time() - t_start,
        "train_time_s": job.train_s,
        "checkpoint": str(job.checkpoint),
        "online_episodes": str(destination) if info is not None else None,
        "run_dir": str(run),
        "ray_nodes": nodes,
    }
    plot_learning_curve(job.history, run / "learning_curve.png", f"finetune {algo.name} in {result['env']}",
                        references=reference_lines(None if scratch else dataset))
    write_result(run, result)
    return result
