"""A sweep's plan: the grid of job-spec overrides x seeds, every trial's name and ``--set`` overrides, and
``sweep.json`` (:class:`SweepSpec`), the one file a resumed sweep reads back."""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

from offlinerl.config_io import ConfigError, parse_override
from offlinerl.config_io import plain_json

__all__ = ["SweepSpec", "Trial", "parse_grid", "plan_trials", "SWEEP_FILE", "TRIALS"]

SWEEP_FILE = "sweep.json"
TRIALS = "trials"
_SAFE_NAME = re.compile(r"[A-Za-z0-9._+-]+")


@dataclass(frozen=True)
class Trial:
    """One training job of the sweep."""

    name: str
    """Directory name under ``trials/`` (grid values and seed, file-name safe)."""
    point: dict[str, Any]
    """The grid point: dotted key -> value (the seed excluded)."""
    seed: int | None
    """``config.seed`` of this trial (None: the job file's own)."""
    overrides: list[str]
    """``--set`` overrides of this trial: the sweep's, then the grid point's, then the seed."""


@dataclass(frozen=True, kw_only=True)
class SweepSpec:
    """What a sweep runs (``sweep.json``)."""

    job: str
    """The job file (absolute path)."""
    workdir: str
    """The directory the sweep was started in (relative paths of the job file resolve from there)."""
    overrides: list[str]
    """``--set`` overrides applied to every trial."""
    grid: dict[str, list[Any]]
    """Dotted key -> the values to try; the trials are the Cartesian product."""
    seeds: list[int]
    """Seeds per grid point (empty: one trial per point, with the job file's seed)."""
    trials: list[Trial]
    """Every trial, in order."""

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2) + "\n"

    @classmethod
    def from_file(cls, path: Path) -> "SweepSpec":
        try:
            data = plain_json(path.read_text())
            if isinstance(data, dict) and "pipeline" in data and "job" not in data:  # sweeps before 2026-12-03
                data["job"] = data.pop("pipeline")
            trials = [Trial(**t) for t in data.pop("trials")]
            spec = cls(**data, trials=trials)
        except (OSError, ValueError, TypeError, KeyError) as exc:
            raise ConfigError(f"{path}: not a sweep description ({exc})") from None
        names = [t.name for t in trials]
        bad = [n for n in names if not isinstance(n, str) or not _SAFE_NAME.fullmatch(n) or n in (".", "..")]
        if bad or len(set(names)) != len(names):  # a trial directory is deleted and rewritten: never outside trials/
            raise ConfigError(f"{path}: trial names must be unique plain file names, got {bad or names}")
        return spec


def _split_values(text: str) -> list[str]:
    """``"1,3,[64,64]"`` -> ``["1", "3", "[64,64]"]``: commas inside brackets stay."""
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return [v.strip() for v in out]


def parse_grid(items: Sequence[str]) -> dict[str, list[Any]]:
    """``["config.beta=1,3,10"]`` -> ``{"config.beta": [1, 3, 10]}`` (values parsed as ``--set`` parses them)."""
    grid: dict[str, list[Any]] = {}
    for text in items:
        if "=" not in text:
            raise ConfigError(f"--grid expects KEY=V1,V2,..., got {text!r}")
        key, raw = text.split("=", 1)
        key = key.strip()
        values = [v for v in _split_values(raw) if v]
        if not key or not values:
            raise ConfigError(f"--grid {text!r}: give a key and at least one value")
        if key in grid:
            raise ConfigError(f"--grid {key}: given twice")
        if key == "config.seed":
            raise ConfigError("--grid config.seed: give seeds with --seeds")
        grid[key] = [parse_override(f"{key}={v}")[1] for v in values]
    return grid


def _slug(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, str) else value
    return re.sub(r"[^A-Za-z0-9.+-]+", "", text.replace(",", "-")) or "_"


def plan_trials(grid: dict[str, list[Any]], seeds: Sequence[int], overrides: Sequence[str] = ()) -> list[Trial]:
    """The Cartesian product of the grid's values, each with every seed (grid order, then seed order)."""
    points: list[dict[str, Any]] = [{}]
    for key, values in grid.items():
        points = [{**p, key: v} for p in points for v in values]
    trials = []
    for point in points:
        point_parts = [f"{k.removeprefix('config.')}-{_slug(v)}" for k, v in point.items()]
        for seed in (list(seeds) or [None]):
            parts = point_parts + ([f"seed-{seed}"] if seed is not None else [])
            name = f"{len(trials):03d}_" + "_".join(parts) if parts else f"{len(trials):03d}"
            sets = [*overrides, *(f"{k}={json.dumps(v)}" for k, v in point.items())]
            sets += [f"config.seed={seed}"] if seed is not None else []
            trials.append(Trial(name=name, point=point, seed=seed, overrides=sets))
    return trials
