"""The one job loop: ``offlinerl train`` (``run_train``) and ``offlinerl finetune`` (``run_finetune``) both
run ``run_job`` over a :class:`Trainable` (an ``Algorithm``, offline or online).

Every iteration::

    trainable.train() -> metrics.jsonl + trackers -> progress bar -> non-finite loss check
                      -> periodic checkpoint (pruned to checkpoint_keep) -> stop conditions

then the final checkpoint, and a final evaluation unless the last iteration
evaluated (the weights are written first, so a failing env loses nothing; the
evaluation is written into that checkpoint afterwards). ``run_job`` owns
``metrics.jsonl``, ``tensorboard/``, the tracking sinks (``offlinerl.jobs.tracking``: W&B,
MLflow; every record of ``metrics.jsonl`` goes to each) and ``checkpoints/`` of the run
directory; the caller writes ``config.yaml`` and, with :func:`write_result`, ``result.json``.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol, Sequence

from offlinerl.config_io import to_finite_json
from offlinerl.core import metrics as M
from offlinerl.episodes.atomic import replace_file
from offlinerl.jobs.guards import NonFiniteLossError, check_losses, saturated_actor
from offlinerl.jobs.run_dir import MetricsLog, prune_checkpoints, resolve_resumed
from offlinerl.jobs.spec import StopConfig
from offlinerl.jobs.tracking import LoggingConfig, Trackers, open_trackers
from offlinerl.progress import progress_bar

__all__ = ["Trainable", "Progress", "JobOutcome", "run_job", "should_stop", "write_result"]


class Trainable(Protocol):
    """What the job loop runs."""

    iteration: int
    """Iterations run (what ``stop.iterations`` counts)."""
    num_updates: int
    """Gradient updates run (what ``stop.updates`` counts)."""
    last_eval: dict[str, float]
    """The newest evaluation's metrics (``{}`` before the first)."""

    @property
    def can_evaluate(self) -> bool: ...

    def train(self) -> dict[str, float]:
        """One iteration; its metrics hold ``learner/updates`` and ``perf/iteration_s`` (evaluation excluded)."""
        ...

    def evaluate(self) -> dict[str, float]: ...

    def save_checkpoint(self, path: str | Path, overwrite: bool = False) -> Path: ...


@dataclass(frozen=True, kw_only=True)
class Progress:
    """The job's progress bar on stderr (``offlinerl.progress``: tqdm on a terminal, plain lines otherwise)."""

    desc: str
    """Text before the bar."""
    unit: str = "upd"
    """``upd``: the bar counts gradient updates; ``it``: iterations."""
    total: int | None = None
    """Where the bar ends (None: no end known, e.g. a wall-time stop)."""
    interval_s: float = 30.0
    """Seconds between plain progress lines when stderr is not a terminal (a log, CI)."""

    def __post_init__(self) -> None:
        if self.unit not in ("upd", "it"):
            raise ValueError(f"Progress.unit: 'upd' or 'it', got {self.unit!r}")


@dataclass(frozen=True, kw_only=True)
class JobOutcome:
    """What ``run_job`` leaves for the caller's ``result.json``."""

    checkpoint: Path
    """The final checkpoint (with the final evaluation in its ``algorithm.json``)."""
    history: list[dict[str, Any]]
    """Every ``metrics.jsonl`` record, in order (kept ones first on resume)."""
    train_s: float
    """Seconds of training (the sum of ``perf/iteration_s``), resumed parts included."""
    first_update_s: float | None
    """Seconds from ``t_start`` to the end of this run's first update (the learner's ``perf/first_update_at``;
    the end of the first iteration for a trainable that does not report it; None: none ran)."""


def should_stop(stop: StopConfig, trainable: Trainable, metrics: Mapping[str, Any], train_s: float) -> bool:
    """Whether any stop condition is met after an iteration with these ``metrics``."""
    if stop.iterations is not None and trainable.iteration >= stop.iterations:
        return True
    if stop.updates is not None and trainable.num_updates >= stop.updates:
        return True
    if stop.wall_time_s is not None and train_s >= stop.wall_time_s:
        return True
    return stop.eval_return is not None and metrics.get(M.EVAL_RETURN_MEAN, -math.inf) >= stop.eval_return


def write_result(run: Path, result: Mapping[str, Any]) -> None:
    """``result.json``: strict JSON (a non-finite number is written as ``null``), replaced atomically (never
    written in place, so never half-written, and a hard link to another run's file is left as it was)."""
    replace_file(run / "result.json", json.dumps(to_finite_json(dict(result)), indent=2) + "\n")


def run_job(
    trainable: Trainable,
    run: Path,
    stop: StopConfig,
    *,
    t_start: float,
    progress: Progress | None = None,
    checkpoint_interval: int = 0,
    checkpoint_keep: int = 0,
    resumed: bool = False,
    last_good: str | Path | None = None,
    first_records: Sequence[Mapping[str, Any]] = (),
    resume_command: str | None = None,
    log: Callable[[str], None] = print,
    logging: LoggingConfig = LoggingConfig(),
    hparams: Mapping[str, Any] | None = None,
) -> JobOutcome:
    """Train ``trainable`` in ``run`` until a stop condition, then checkpoint and evaluate it.

    ``resumed``: ``run`` holds the job up to ``trainable.iteration`` (its later ``metrics.jsonl`` lines are
    dropped; a job that had already stopped runs no iteration; a symbolic link in ``run`` to outside it is a
    ``RunDirError`` before anything is written). ``last_good``: the newest good checkpoint so
    far, named by ``NonFiniteLossError``. ``first_records``: written to ``metrics.jsonl`` before the first
    iteration (e.g. fine-tuning's evaluation of the loaded checkpoint). ``resume_command``: if set, a job that
    fails after its first update saves its state and logs this command to continue it. ``t_start``: when the
    job started (``time.time()``; ``time/total_s`` and ``first_update_s`` count from it). ``logging``: the
    sinks besides ``metrics.jsonl`` (TensorBoard by default), each given ``hparams`` (the job's settings) once.
    """
    if resumed:  # what a resumed job writes and deletes must lie inside ``run`` (read_run checks it too)
        resolve_resumed(run)
    trackers = open_trackers(logging, run, hparams or {}, resumed=resumed)
    try:
        log_file = MetricsLog(run / "metrics.jsonl", resume_at_iteration=trainable.iteration if resumed else None)
    except BaseException:
        trackers.close("FAILED")
        raise
    metrics = _Tracked(log_file, trackers)
    for record in first_records:
        metrics.append(dict(record))
    bar = _progress_bar(progress, trainable)
    train_s = sum(float(h.get(M.ITERATION_S) or 0.0) for h in metrics.history)
    # time/total_s goes on from where the kept records left it: a resumed job's curve against time does not fold back
    before_s = max((float(h.get(M.TOTAL_S) or 0.0) for h in metrics.history), default=0.0) if resumed else 0.0
    first_update_s = None
    noticed = False  # the saturated-actor notice, said once per job
    ckpt = None
    status = "FAILED"
    try:
        last = metrics.history[-1] if metrics.history else {}
        while not (resumed and should_stop(stop, trainable, last, train_s)):
            updates_before, iteration_before = trainable.num_updates, trainable.iteration
            last = trainable.train()
            train_s += float(last.get(M.ITERATION_S) or 0.0)
            now = time.time() - t_start
            first_at = last.pop(M.FIRST_UPDATE_AT, None)
            if first_update_s is None:
                first_update_s = now if first_at is None else first_at - t_start
            last[M.TOTAL_S] = before_s + now
            metrics.append(last)
            if bar is not None:
                done = trainable.num_updates - updates_before if progress.unit == "upd" else trainable.iteration - iteration_before
                bar.set_postfix(_postfix(last, trainable.last_eval))  # first: a plain line printed by update
                bar.update(done)                                          # shows this iteration's metrics
            check_losses(last, updates_before=updates_before, last_checkpoint=last_good)
            if not noticed and (notice := saturated_actor(last)):
                log(notice)
                noticed = True
            if checkpoint_interval and trainable.iteration % checkpoint_interval == 0:
                last_good = trainable.save_checkpoint(run / "checkpoints" / f"iter-{trainable.iteration:06d}",
                                                      overwrite=True)
                if checkpoint_keep:
                    prune_checkpoints(run, checkpoint_keep)
            if should_stop(stop, trainable, last, train_s):
                break
        ckpt = trainable.save_checkpoint(run / "checkpoints" / "final", overwrite=True)
        if trainable.can_evaluate and M.EVAL_RETURN_MEAN not in (metrics.history[-1] if metrics.history else {}):
            final = trainable.evaluate()
            metrics.append({M.ITERATION: float(trainable.iteration), M.UPDATES: float(trainable.num_updates),
                            **final})
            trainable.save_checkpoint(ckpt, overwrite=True)  # now with the evaluation in algorithm.json
        status = "FINISHED"
    except BaseException as exc:
        status = "KILLED" if isinstance(exc, KeyboardInterrupt) else "FAILED"
        if resume_command and ckpt is None and trainable.num_updates and not isinstance(exc, NonFiniteLossError):
            _save_on_failure(trainable, run, exc, resume_command, log)
        raise
    finally:
        if bar is not None:
            bar.close()
        metrics.close()
        trackers.close(status)
    return JobOutcome(checkpoint=ckpt, history=metrics.history, train_s=train_s, first_update_s=first_update_s)


class _Tracked:
    """``metrics.jsonl`` whose every appended record also goes to the trackers."""

    def __init__(self, file: MetricsLog, trackers: Trackers) -> None:
        self.file, self.trackers = file, trackers

    @property
    def history(self) -> list[dict[str, Any]]:
        return self.file.history

    def append(self, record: dict[str, Any]) -> None:
        self.file.append(record)
        self.trackers.log(record)

    def close(self) -> None:
        self.file.close()


def _progress_bar(progress: Progress | None, trainable: Trainable) -> Any:
    if progress is None:
        return None
    initial = trainable.num_updates if progress.unit == "upd" else trainable.iteration
    # tqdm on a terminal; plain lines every interval_s in a log (no carriage-return frames); none under --quiet
    return progress_bar(total=progress.total, initial=initial, unit=progress.unit, desc=progress.desc,
                        interval_s=progress.interval_s, dynamic_ncols=True)


def _postfix(metrics: Mapping[str, Any], last_eval: Mapping[str, float], most: int = 3) -> dict[str, str]:
    """Up to ``most`` loss terms (``[<module>/]losses/<name>``), updates/s, online env steps, the newest evaluation."""
    out: dict[str, str] = {}
    for key, value in metrics.items():
        if M.is_loss(key) and isinstance(value, float) and len(out) < most:
            out.setdefault(key.split(M.LOSSES, 1)[1], f"{value:.3g}")
    if M.UPDATES_PER_S in metrics:
        out["upd/s"] = f"{metrics[M.UPDATES_PER_S]:.0f}"
    if M.ENV_STEPS in metrics:
        out["steps"] = str(int(metrics[M.ENV_STEPS]))
    if last_eval.get(M.EVAL_RETURN_MEAN) is not None:
        out["eval"] = f"{last_eval[M.EVAL_RETURN_MEAN]:.1f}"
    return out


def _save_on_failure(trainable: Trainable, run: Path, exc: BaseException, resume_command: str,
                     log: Callable[[str], None]) -> None:
    """Keep what was trained when a job fails or is interrupted after its first update."""
    try:
        kept = trainable.save_checkpoint(run / "checkpoints" / f"iter-{trainable.iteration:06d}", overwrite=True)
    except Exception as save_exc:  # noqa: BLE001 - the original failure is what gets reported
        log(f"the job stopped ({type(exc).__name__}) and its state could not be saved: {save_exc}")
        return
    log(f"the job stopped ({type(exc).__name__}); its state at iteration {trainable.iteration} is in {kept}: "
        f"continue with  {resume_command}")
