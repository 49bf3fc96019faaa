"""A job's run directory: created once, found again to resume, its checkpoints kept within bounds.

    RUN/
        config.yaml         the resolved job spec (what ``--resume`` reads back)
        metrics.jsonl       one JSON object per iteration (non-finite values as null)
        checkpoints/        iter-000002/, iter-000004/, ..., final/
        result.json         written when the job ends
"""

from __future__ import annotations

import json
import os
import shutil
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence, TextIO, TypeVar

import yaml

from offlinerl.config_io import ConfigError
from offlinerl.core import metrics as M
from offlinerl.episodes.atomic import OutputWriteError, UnsafeOutputError, check_output_place, replace_file
from offlinerl.jobs.guards import metrics_json
from offlinerl.training.checkpoint_meta import METADATA_FILE, CheckpointError, CheckpointMeta
from offlinerl.trusted import load_config_file

__all__ = ["new_run_dir", "run_dir_path", "open_run", "latest_checkpoint", "prune_checkpoints", "read_run", "resolve_resumed",
           "MetricsLog", "RunDirError", "RESUME_OVERRIDABLE", "check_new_run_dir"]

T = TypeVar("T")

CHECKPOINTS = "checkpoints"


class RunDirError(ValueError):
    """A run directory that cannot be created or resumed; the message says why."""


def run_dir_path(output: str | Path, name: str) -> Path:
    """Where a new run directory goes by default: ``output/name-<UTC time>``."""
    return Path(output) / f"{name}-{datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%SZ')}"


def new_run_dir(output: str | Path, name: str, run_dir: str | Path | None = None, *,
                inputs: Sequence[str | Path] = ()) -> Path:
    """Create the run directory (``run_dir``, else ``output/name-<UTC time>``); refuse a non-empty one, a file,
    and a place no writer may write (``check_output_place``: ``/``, home, the current directory, an input in
    ``inputs``, inside a dataset or checkpoint)."""
    run = Path(run_dir) if run_dir else run_dir_path(output, name)
    check_new_run_dir(run, inputs=inputs)
    try:
        run.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputWriteError.from_os_error(exc, run, "no run directory was created") from None
    return run


def check_new_run_dir(run: Path, *, inputs: Sequence[str | Path] = ()) -> None:
    """``RunDirError`` unless ``run`` may become a new run directory (what :func:`new_run_dir` checks; it creates
    nothing, so a job checks its ``--output`` before Ray starts: ``offlinerl.jobs.preflight``)."""
    try:
        check_output_place(run, inputs=inputs)
    except UnsafeOutputError as exc:
        raise RunDirError(str(exc)) from None
    if run.exists() and not run.is_dir():
        raise RunDirError(f"{run} is a file; --output names the run directory to create")
    if run.exists() and any(run.iterdir()):
        hint = "; to continue that job use --resume" if (run / "config.yaml").is_file() else ""
        raise RunDirError(f"{run} exists and is not empty; choose another --output{hint}")


def open_run(output: str | Path, name: str, run_dir: str | Path | None, resume_from: str | Path | None, *,
             start: Callable[[], T], resume: Callable[[], T],
             config: Mapping[str, Any] | Callable[[T], Mapping[str, Any]]) -> tuple[Path, T]:
    """The run directory of a job (``train`` and ``finetune``) and what it trains.

    ``resume_from`` set (a checkpoint inside ``run_dir``): ``run_dir`` itself and ``resume()``. Otherwise a new
    run directory (:func:`new_run_dir`) holding ``config.yaml`` and ``start()``: ``config`` is written before
    ``start`` when it is a mapping, or after it, from what it started, when it is a function of that. A failing
    ``start`` (e.g. a wrong evaluation env) leaves no run directory that cannot be resumed.
    """
    if resume_from is not None:
        return Path(run_dir), resume()
    run = new_run_dir(output, name, run_dir)
    written: Path | None = None
    try:
        if not callable(config):
            written = _write_config(run, config)
        job = start()
    except BaseException:
        if written is not None:
            written.unlink()
        if not any(run.iterdir()):
            run.rmdir()
        raise
    if callable(config):
        _write_config(run, config(job))
    return run, job


def _write_config(run: Path, config: Mapping[str, Any]) -> Path:
    path = run / "config.yaml"
    path.write_text(yaml.safe_dump(dict(config), sort_keys=False))
    return path


def _within(child: Path, parent: Path) -> bool:
    return child == parent or parent in child.parents


def resolve_resumed(directory: str | Path, what: str = "run directory") -> Path:
    """``directory`` resolved, once nothing in it leads outside it.

    A resumed job writes and deletes inside the directory it is handed (checkpoints, ``metrics.jsonl``,
    ``result.json``; a sweep's trial directories and summary), so every path in it must resolve inside it:
    a symbolic link anywhere in it that points elsewhere (``checkpoints/`` linked into another run, a trial
    directory linked into another sweep) is a :class:`RunDirError`, raised before anything is written.
    """
    root = Path(directory).resolve()
    for parent, dirs, files in os.walk(root):  # links are looked at, never followed
        for name in [*dirs, *files]:
            path = Path(parent) / name
            if not path.is_symlink():
                continue
            try:
                target = path.resolve()
            except (OSError, RuntimeError):  # a loop of links
                target = None
            if target is None or not _within(target, root):
                raise RunDirError(
                    f"{path}: a symbolic link to {target or os.readlink(path)}, outside the {what} {root}; "
                    f"--resume writes and deletes only inside the {what}, so it did not start (replace the link "
                    "with a copy of what it points to, or resume the job where that lies)")
    return root


#: What ``--set`` may change when a job is resumed: everything else must stay as it ran, or the
#: continuation would not be the job that was started.
RESUME_OVERRIDABLE = ("stop.", "checkpoint_interval", "checkpoint_keep")


def read_run(run_dir: str | Path, overrides: list[str] = ()) -> tuple[dict[str, Any], Path]:
    """What resuming the job in ``run_dir`` starts from (``train --resume``, ``finetune --resume``): its
    ``config.yaml`` with the ``--set`` overrides a resumed job allows, and its newest checkpoint. Raises
    :class:`RunDirError` for a run directory holding a symbolic link to outside it (``resolve_resumed``)."""
    run = Path(run_dir)
    resolve_resumed(run)
    if not (run / "config.yaml").is_file():
        raise RunDirError(f"{run}: not a run directory (no config.yaml)")
    for text in overrides:
        if not text.split("=", 1)[0].strip().startswith(RESUME_OVERRIDABLE):
            raise ConfigError(f"--set {text!r}: a resumed job keeps its config; only stop.*, checkpoint_interval "
                              "and checkpoint_keep may change")
    data = load_config_file(run / "config.yaml", overrides)
    checkpoint = latest_checkpoint(run)
    if checkpoint is None:
        raise RunDirError(f"{run}: no checkpoint to resume from (the job stopped before its first one; set "
                          "checkpoint_interval to checkpoint during training)")
    return data, checkpoint


def _checkpoint_dirs(run: Path) -> list[Path]:
    root = run / CHECKPOINTS
    if not root.is_dir():
        return []
    return [p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".") and (p / METADATA_FILE).is_file()]


def _meta(checkpoint: Path, hint: str = "") -> CheckpointMeta:
    """The checkpoint's ``algorithm.json``; ``CheckpointError`` (with ``hint`` added) if it cannot be used."""
    try:
        return CheckpointMeta.read(checkpoint)
    except CheckpointError as exc:
        raise CheckpointError(f"{exc}{hint}") from None
    except OSError as exc:
        raise CheckpointError(f"{checkpoint / METADATA_FILE}: unreadable ({exc}){hint}") from None


def latest_checkpoint(run: str | Path) -> Path | None:
    """The checkpoint of ``run`` with the most updates (``final`` wins a tie), or None."""
    best: tuple[int, int, Path] | None = None
    for path in _checkpoint_dirs(Path(run)):
        key = (_meta(path, "; move that checkpoint away to resume from an earlier one").num_updates,
               int(path.name == "final"), path)
        if best is None or key[:2] > best[:2]:
            best = key
    return best[2] if best else None


def list_checkpoints(run: str | Path) -> list[tuple[int, int, Path]]:
    """``(num_updates, iteration, path)`` of every checkpoint of ``run``, oldest first (``final`` after a periodic
    checkpoint of the same updates)."""
    out = []
    for path in _checkpoint_dirs(Path(run)):
        meta = _meta(path)
        out.append((meta.num_updates, meta.iteration, path))
    return sorted(out, key=lambda t: (t[0], t[2].name == "final", t[2].name))


def prune_checkpoints(run: str | Path, keep: int) -> list[Path]:
    """Delete all but the ``keep`` newest periodic checkpoints (``iter-*``; ``final`` is never deleted)."""
    periodic = sorted(p for p in _checkpoint_dirs(Path(run)) if p.name.startswith("iter-"))
    doomed = periodic[:-keep] if keep > 0 else []
    for path in doomed:
        shutil.rmtree(path)
    return doomed


class MetricsLog:
    """``metrics.jsonl``: strict JSON lines (NaN/inf written as null); on resume, lines past the checkpoint are dropped."""

    def __init__(self, path: str | Path, *, resume_at_iteration: int | None = None) -> None:
        self.path = Path(path)
        self.history: list[dict[str, Any]] = []
        if resume_at_iteration is not None and self.path.is_file():
            for line in self.path.read_text().splitlines():
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a line cut short by a kill
                if isinstance(record, dict) and record.get(M.ITERATION, 0) <= resume_at_iteration:
                    self.history.append(record)
        replace_file(self.path, "".join(self._line(r) for r in self.history))  # a kill leaves the old or the new
        try:
            self._file: TextIO = self.path.open("a")
        except OSError as exc:
            raise OutputWriteError.from_os_error(exc, self.path, "the run is as it was") from exc

    @staticmethod
    def _line(record: dict[str, Any]) -> str:
        return metrics_json(record) + "\n"

    def _write(self, record: dict[str, Any]) -> None:
        try:
            self._file.write(self._line(record))
            self._file.flush()
        except OSError as exc:  # a cut line is skipped when read back; --resume drops lines past its checkpoint
            raise OutputWriteError.from_os_error(exc, self.path, "the checkpoints written so far are kept") from exc

    def append(self, record: dict[str, Any]) -> None:
        self.history.append(record)
        self._write(record)

    def close(self) -> None:
        self._file.close()
