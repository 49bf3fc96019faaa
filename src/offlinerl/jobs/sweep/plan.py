"""A sweep's plan: the grid of job-spec overrides x seeds, every trial's name and ``--set`` overrides, and
``sweep.json`` (:class:`SweepSpec`), the one file a resumed sweep reads back."""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

from offlinerl.config_io import ConfigError, parse_override, plain_json

__all__ = ["SweepSpec", "Trial", "parse_grid", "parse_seeds", "plan_trials", "SWEEP_FILE",
           "TRIALS", "MAX_SEEDS"]

SWEEP_FILE = "sweep.json"
#: Most seeds one ``--seeds`` may give (a sweep's trials per grid point, a benchmark's runs per pair).
MAX_SEEDS = 1000
TRIALS = "trials"
_SAFE_NAME = re.compile(r"[A-Za-z0-9._+-]+")
_SEED_NAME = re.compile(r"([A-Za-z0-9._+-]+)/seed-(-?[0-9]+)")  # a vectorised point's seed: <point>/seed-<s>


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
    group: str | None = None
    """Vectorised sweeps: the grid point's directory under ``trials/``, one ``num_seeds`` job whose seed runs
    (``<group>/seed-<s>``, this trial's ``name``) are its trials; None: the trial is a job of its own."""


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
    vectorize: bool = False
    """Each grid point's seeds train as one ``num_seeds`` job (``offlinerl.jobs.vectorized``): one Tune trial
    per grid point, its seed runs the sweep's trials."""

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
        bad = [n for n in names if not _safe_trial_name(n, spec.vectorize)]
        bad += [t.group for t in trials if t.group is not None and not _safe_trial_name(t.group, False)]
        if bad or len(set(names)) != len(names):  # a trial directory is deleted and rewritten: never outside trials/
            raise ConfigError(f"{path}: trial names must be unique plain file names, got {bad or names}")
        return spec


def _safe_trial_name(name: Any, vectorize: bool) -> bool:
    """A name that stays inside ``trials/``: a plain file name, or (vectorised) ``<plain name>/seed-<int>``."""
    if not isinstance(name, str):
        return False
    match = _SEED_NAME.fullmatch(name) if vectorize and "/" in name else None
    head = match.group(1) if match else name
    return bool(_SAFE_NAME.fullmatch(head)) and head not in (".", "..") and ("/" not in name or match is not None)


def parse_seeds(text: str | None) -> list[int]:
    """``--seeds``: ``"0,1,2"``, a range ``"0-7"`` (both ends included), or both (``"0-3,10"``); [] for None.
    At most :data:`MAX_SEEDS` seeds (counted before any range is expanded)."""
    if not text:
        return []
    ranges: list[tuple[int, int]] = []
    for part in (p.strip() for p in text.split(",")):
        m = re.fullmatch(r"(-?[0-9]+)(?:-(-?[0-9]+))?", part)
        if m is None:
            raise ConfigError(f"--seeds {_shown(text)}: give integers or ranges, e.g. 0,1,2 or 0-7")
        lo, hi = int(m.group(1)), int(m.group(2) if m.group(2) is not None else m.group(1))
        if hi < lo:
            raise ConfigError(f"--seeds {_shown(text)}: the range {part} runs backwards")
        ranges.append((lo, hi))
    count = sum(hi - lo + 1 for lo, hi in ranges)
    if count > MAX_SEEDS:
        raise ConfigError(f"--seeds {_shown(text)}: {count:,} seeds, one run each per grid point or pair; give at "
                          f"most {MAX_SEEDS:,}")
    seeds = [s for lo, hi in ranges for s in range(lo, hi + 1)]
    if len(set(seeds)) != len(seeds):
        raise ConfigError(f"--seeds {_shown(text)}: a seed is given twice")
    return seeds


def _shown(text: str, limit: int = 60) -> str:
    """``text`` quoted for a message, cut to ``limit`` characters."""
    return repr(text if len(text) <= limit else text[:limit] + "...")


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


def plan_trials(grid: dict[str, list[Any]], seeds: Sequence[int], overrides: Sequence[str] = (),
                vectorize: bool = False) -> list[Trial]:
    """The Cartesian product of the grid's values, each with every seed (grid order, then seed order).
    ``vectorize``: each point's seeds (consecutive, two or more) are the seed runs ``<point>/seed-<s>`` of one
    ``num_seeds`` job (``Trial.group``)."""
    if vectorize and (len(seeds) < 2 or list(seeds) != list(range(seeds[0], seeds[0] + len(seeds)))):
        raise ConfigError(f"--vectorize trains a grid point's seeds as config.num_seeds consecutive seeds: give two "
                          f"or more, e.g. --seeds 0-7 (got {list(seeds) or 'none'})")
    if vectorize and any(o.split("=", 1)[0].strip() in ("config.seed", "config.num_seeds") for o in overrides):
        raise ConfigError("--vectorize sets config.seed and config.num_seeds from --seeds; drop them from --set")
    points: list[dict[str, Any]] = [{}]
    for key, values in grid.items():
        points = [{**p, key: v} for p in points for v in values]
    trials = []
    for index, point in enumerate(points):
        point_parts = [f"{k.removeprefix('config.')}-{_slug(v)}" for k, v in point.items()]
        group = (f"{index:03d}_" + "_".join(point_parts) if point_parts else f"{index:03d}") if vectorize else None
        for seed in (list(seeds) or [None]):
            parts = point_parts + ([f"seed-{seed}"] if seed is not None else [])
            name = f"{len(trials):03d}_" + "_".join(parts) if parts else f"{len(trials):03d}"
            sets = [*overrides, *(f"{k}={json.dumps(v)}" for k, v in point.items())]
            sets += [f"config.seed={seed}"] if seed is not None else []
            trials.append(Trial(name=f"{group}/seed-{seed}" if group else name, point=point, seed=seed,
                                overrides=sets, group=group))
    return trials
