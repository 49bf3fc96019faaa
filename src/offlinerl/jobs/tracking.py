"""Experiment tracking: where a job's metrics go besides ``metrics.jsonl`` (the job file's ``logging:`` block).

    logging:
      tensorboard: true                       # RUN/tensorboard/: every metric, and the job's hparams
      wandb: {project: my-project, mode: offline}
      mlflow: {tracking_uri: "sqlite:///mlflow.db", experiment: offlinerl}
      group: pendulum-lr-sweep                # W&B group, MLflow tag offlinerl.group (a sweep sets it)

The job loop (``offlinerl.jobs.loop.run_job``) hands every record it writes to ``metrics.jsonl`` to
:meth:`Trackers.log`, at the step ``learner/updates``, so every sink holds the same numbers as that file
(non-finite values, written there as ``null``, are left out). Each sink gets the job's hyperparameters
once: TensorBoard's HParams dashboard, W&B's run config, MLflow's params. The ids of the W&B and MLflow
runs are kept in ``RUN/tracking.json``, so ``--resume`` continues the same runs. W&B and MLflow are
optional packages (``pip install 'offlinerl[tracking]'``); asking for one that is not installed is a
``ConfigError`` when the job file is read, before anything starts.
"""

from __future__ import annotations

import importlib.util
import json
import math
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Mapping

from offlinerl.config_io import ConfigError, check
from offlinerl.core import metrics as M
from offlinerl.episodes.atomic import replace_file

__all__ = ["LoggingConfig", "WandbConfig", "MlflowConfig", "Trackers", "TrackingError", "open_trackers",
           "flat_hparams", "TRACKING_FILE", "INSTALL_HINT"]

TRACKING_FILE = "tracking.json"
INSTALL_HINT = "pip install 'offlinerl[tracking]'"


class TrackingError(RuntimeError):
    """A tracking sink that could not start or write; the message says which and what to do."""


def _require(module: str, field_name: str) -> None:
    if importlib.util.find_spec(module) is None:
        raise ConfigError(f"{field_name}: the {module} package is not installed; {INSTALL_HINT}")


@dataclass(frozen=True, kw_only=True)
class WandbConfig:
    """A Weights & Biases run per job."""

    project: str
    """W&B project."""
    entity: str | None = None
    """W&B team or user (None: the account's default)."""
    mode: Literal["online", "offline", "disabled"] = "online"
    """``offline``: write the run under ``dir`` only, no network (upload later with ``wandb sync``)."""
    dir: str | None = None
    """Where W&B writes its files (``<dir>/wandb/``); None = the run directory."""
    tags: tuple[str, ...] = ()
    """Tags of the W&B run."""

    def __post_init__(self) -> None:
        check(bool(self.project), "logging.wandb.project", "give the W&B project name")
        _require("wandb", "logging.wandb")


@dataclass(frozen=True, kw_only=True)
class MlflowConfig:
    """An MLflow run per job."""

    tracking_uri: str | None = None
    """Where MLflow stores runs: a server (``http://...``), a database (``sqlite:///mlflow.db``) or a folder
    (``file:./mlruns``; MLflow 3 accepts it only with ``MLFLOW_ALLOW_FILE_STORE=true``); None =
    ``$MLFLOW_TRACKING_URI`` or MLflow's default."""
    experiment: str = "offlinerl"
    """MLflow experiment name (created if missing)."""

    def __post_init__(self) -> None:
        check(bool(self.experiment), "logging.mlflow.experiment", "give an experiment name")
        _require("mlflow", "logging.mlflow")


@dataclass(frozen=True, kw_only=True)
class LoggingConfig:
    """Where a job's metrics go besides ``metrics.jsonl``."""

    tensorboard: bool = True
    """Write ``RUN/tensorboard/``: every metric at its update step, and the hyperparameters (HParams tab)."""
    wandb: WandbConfig | None = None
    """Also log to Weights & Biases (needs ``offlinerl[tracking]``)."""
    mlflow: MlflowConfig | None = None
    """Also log to MLflow (needs ``offlinerl[tracking]``)."""
    group: str | None = None
    """Group of related runs: the W&B group and the MLflow tag ``offlinerl.group``; ``offlinerl sweep`` sets it to
    the sweep directory's name unless the job file sets it."""


def flat_hparams(hparams: Mapping[str, Any], prefix: str = "") -> dict[str, str | int | float | bool]:
    """``{"config": {"lr": 3e-4, "model": {"hidden": [64]}}}`` -> ``{"config.lr": 3e-4, "config.model.hidden":
    "[64]"}``: dotted keys, numbers, strings and booleans kept, anything else as JSON text."""
    out: dict[str, str | int | float | bool] = {}
    for key, value in hparams.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flat_hparams(value, f"{name}."))
        elif isinstance(value, (bool, int, float, str)):
            out[name] = value
        else:
            out[name] = json.dumps(value)
    return out


def _numbers(record: Mapping[str, Any]) -> dict[str, float]:
    return {k: float(v) for k, v in record.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}


class _TensorBoard:
    def __init__(self, run: Path, hparams: Mapping[str, Any]) -> None:
        from torch.utils.tensorboard import SummaryWriter
        from torch.utils.tensorboard.summary import hparams as hparams_summary

        self.writer = SummaryWriter(str(run / "tensorboard"))
        # The HParams plugin shows these hyperparameters beside the last value of the named scalars of this run.
        exp, ssi, self._sei = hparams_summary(flat_hparams(hparams), {M.EVAL_RETURN_MEAN: 0.0, M.UPDATES_PER_S: 0.0})
        for summary in (exp, ssi):
            self.writer.file_writer.add_summary(summary)

    def log(self, values: Mapping[str, float], step: int) -> None:
        for key, value in values.items():
            self.writer.add_scalar(key, value, step)

    def close(self, status: str) -> None:
        self.writer.file_writer.add_summary(self._sei)
        self.writer.close()


class _Wandb:
    def __init__(self, cfg: WandbConfig, run: Path, hparams: Mapping[str, Any], group: str | None,
                 run_id: str | None) -> None:
        import wandb

        directory = Path(cfg.dir) if cfg.dir else run
        directory.mkdir(parents=True, exist_ok=True)
        self.inside = None if cfg.dir else run
        try:
            self.run = wandb.init(
                project=cfg.project, entity=cfg.entity, mode=cfg.mode, dir=str(directory), name=run.name,
                group=group, tags=list(cfg.tags) or None, config=dict(hparams), id=run_id,
                resume="allow" if run_id else None, reinit="create_new",
                settings=wandb.Settings(silent=True, console="off"))
        except Exception as exc:  # noqa: BLE001 - no account, no network, a bad project: one line
            raise TrackingError(f"logging.wandb: W&B could not start a run ({type(exc).__name__}: "
                                f"{str(exc).strip().splitlines()[0][:200]}); without network use mode: offline "
                                "and upload later with  wandb sync") from None
        # Every curve against gradient updates; W&B's own step counts the records (a resumed job logs the
        # iterations after its checkpoint again, which a step of updates would refuse as going backwards).
        self.run.define_metric(M.UPDATES)
        self.run.define_metric("*", step_metric=M.UPDATES)
        self.id = self.run.id
        self._drop_outside_links()

    def _drop_outside_links(self) -> None:
        """W&B links its run's ``logs/debug-core.log`` to a file in ``~/.cache/wandb``; in the run directory that link
        would make ``--resume`` refuse it (nothing in a run may lead outside it), so it goes (the file stays)."""
        if self.inside is None:
            return
        root = self.inside.resolve()
        for path in (self.inside / "wandb").rglob("*"):
            if path.is_symlink() and root not in path.resolve().parents:
                path.unlink()

    def log(self, values: Mapping[str, float], step: int) -> None:
        self.run.log({**values, M.UPDATES: float(step)})

    def close(self, status: str) -> None:
        self.run.finish(exit_code=0 if status == "FINISHED" else 1)
        self._drop_outside_links()


class _Mlflow:
    BATCH = 100  # MLflow takes at most 100 params (and 1000 metrics) per log_batch

    def __init__(self, cfg: MlflowConfig, run: Path, hparams: Mapping[str, Any], group: str | None,
                 run_id: str | None) -> None:
        from mlflow.entities import Param
        from mlflow.tracking import MlflowClient

        try:
            self.client = MlflowClient(tracking_uri=cfg.tracking_uri)
            if run_id is None:
                exp = self.client.get_experiment_by_name(cfg.experiment)
                exp_id = exp.experiment_id if exp is not None else self.client.create_experiment(cfg.experiment)
                tags = {"offlinerl.run_dir": str(run.resolve()), **({"offlinerl.group": group} if group else {})}
                self.id = self.client.create_run(exp_id, run_name=run.name, tags=tags).info.run_id
                params = [Param(k, str(v)[:6000]) for k, v in flat_hparams(hparams).items()]
                for i in range(0, len(params), self.BATCH):
                    self.client.log_batch(self.id, params=params[i:i + self.BATCH])
            else:
                self.id = run_id
                self.client.update_run(run_id, status="RUNNING")
        except Exception as exc:  # noqa: BLE001 - an unreachable server, a refused store: one line
            import mlflow

            uri = cfg.tracking_uri or mlflow.get_tracking_uri()
            text = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
            raise TrackingError(f"logging.mlflow: MLflow could not start a run at {uri} ({text}); set "
                                "logging.mlflow.tracking_uri: a server (http://...), a database (sqlite:///mlflow.db, "
                                "with the full mlflow package) or a folder (file:./mlruns, with "
                                "MLFLOW_ALLOW_FILE_STORE=true)") from None

    def log(self, values: Mapping[str, float], step: int) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        metrics = [Metric(k, v, now, step) for k, v in values.items()]
        for i in range(0, len(metrics), 1000):
            self.client.log_batch(self.id, metrics=metrics[i:i + 1000])

    def close(self, status: str) -> None:
        self.client.set_terminated(self.id, status)


class Trackers:
    """The sinks of one job: ``log(record)`` for every ``metrics.jsonl`` record, ``close(status)`` at its end."""

    def __init__(self, sinks: list[Any]) -> None:
        self.sinks = sinks

    def log(self, record: Mapping[str, Any]) -> None:
        values = _numbers(record)
        step = int(values.get(M.UPDATES, 0))
        for sink in self.sinks:
            sink.log(values, step)

    def close(self, status: str = "FINISHED") -> None:
        """``status``: FINISHED, FAILED or KILLED (as MLflow names them)."""
        for sink in self.sinks:
            sink.close(status)


_OPENING = threading.Lock()
"""Sinks are opened one at a time: the seeds of a vectorised job open theirs from threads, and two MLflow clients
creating one experiment at once made two experiments of that name."""


def open_trackers(logging: LoggingConfig, run: Path, hparams: Mapping[str, Any], *, resumed: bool = False
                  ) -> Trackers:
    """Start the sinks ``logging`` asks for in the run directory ``run``; a resumed job continues the W&B and
    MLflow runs named in ``RUN/tracking.json``. Raises :class:`TrackingError` (one line) if one cannot start."""
    with _OPENING:
        return _open_trackers(logging, run, hparams, resumed)


def _open_trackers(logging: LoggingConfig, run: Path, hparams: Mapping[str, Any], resumed: bool) -> Trackers:
    ids: dict[str, Any] = {}
    file = run / TRACKING_FILE
    if resumed and file.is_file():
        try:
            ids = json.loads(file.read_text())
        except (OSError, ValueError):
            ids = {}
        ids = ids if isinstance(ids, dict) else {}
    sinks: list[Any] = []
    try:
        if logging.tensorboard:
            sinks.append(_TensorBoard(run, hparams))
        if logging.wandb is not None:
            old = ids.get("wandb") or {}
            sinks.append(_Wandb(logging.wandb, run, hparams, logging.group, old.get("id")))
            ids["wandb"] = {"id": sinks[-1].id, "project": logging.wandb.project, "mode": logging.wandb.mode}
        if logging.mlflow is not None:
            old = ids.get("mlflow") or {}
            sinks.append(_Mlflow(logging.mlflow, run, hparams, logging.group, old.get("run_id")))
            ids["mlflow"] = {"run_id": sinks[-1].id, "tracking_uri": logging.mlflow.tracking_uri,
                             "experiment": logging.mlflow.experiment}
    except BaseException:
        Trackers(sinks).close("FAILED")
        raise
    if logging.wandb is not None or logging.mlflow is not None:
        replace_file(file, json.dumps(ids, indent=2) + "\n")
    return Trackers(sinks)
