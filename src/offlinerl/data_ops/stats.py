"""``stats``: a dataset card as JSON (and, in :mod:`.report`, a one-page PNG).

Three streaming passes: ``inspect``'s statistics (:func:`offlinerl.episodes.stats.dataset_stats`: counts,
return and length distributions, Discrete action histograms, per-dimension observation and action ranges),
the first pass of the data operations (the content fingerprint, and each episode's source: the first step's
value of ``by``), and a coverage pass.

**State-action coverage** (SACo, Schweighofer et al. 2022, "A dataset perspective on offline RL"): the number
of distinct (state, action) cells the steps visit, after cutting every observation dimension (and every Box
action dimension) into ``bins`` equal bins over its range in the data; Discrete actions are their own cells.
``unique_state_actions / steps`` is 1 when no cell repeats. Counts are exact (cells are 64-bit hashes of
the bin indices; each task sends its distinct cells, the driver keeps their union: at most one number per
step). Observations are ``obs[:T]`` of every row, as in ``inspect``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from offlinerl.data_ops.errors import DataOpError
from offlinerl.data_ops.summary import check_input, step_columns, summarise
from offlinerl.episodes import schema as S
from offlinerl.episodes.arrow import from_arrow
from offlinerl.episodes.io import parquet_files
from offlinerl.episodes.scan import iter_unit_batches, plan_units, run_units
from offlinerl.episodes.stats import StatsError, dataset_stats

__all__ = ["StatsConfig", "dataset_card", "format_card"]

#: Box action dimensions given a histogram.
MAX_ACTION_HISTOGRAMS = 8
_HASH = np.random.default_rng(20261203).integers(1, 2**62, size=4096, dtype=np.int64) | 1


@dataclass(frozen=True, kw_only=True)
class StatsConfig:
    """What ``stats`` computes."""

    by: str | None = None
    """Per-step column whose first value names an episode's source (default: ``source`` if the dataset has it,
    else ``behavior_level``, else none)."""
    bins: int = 10
    """Bins per dimension of the coverage count."""
    histogram_bins: int = 20
    """Bins of the Box action histograms."""

    def __post_init__(self) -> None:
        if not 1 <= self.bins <= 1000:
            raise DataOpError(f"stats: --bins must be in 1..1000, got {self.bins}")
        if not 1 <= self.histogram_bins <= 1000:
            raise DataOpError(f"stats: --histogram-bins must be in 1..1000, got {self.histogram_bins}")


def _box_ranges(leaves: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray] | None:
    if len(leaves) != 1 or not leaves[0]["count"] or "histogram" in leaves[0]:
        return None
    return np.asarray(leaves[0]["min"], dtype=np.float64), np.asarray(leaves[0]["max"], dtype=np.float64)


def _cells(x: np.ndarray, lo: np.ndarray, hi: np.ndarray, bins: int) -> np.ndarray:
    span = np.where(hi > lo, hi - lo, 1.0)
    return np.clip(np.floor((x - lo) / span * bins), 0, bins - 1).astype(np.int64)


def coverage_unit(unit: Any, *, obs_space: gym.Space, act_space: gym.Space, obs_range, act_range, bins: int,
                  hist_bins: int) -> dict[str, Any]:
    """Distinct (state) and (state, action) cells of one row group, and its Box action histograms."""
    states: list[np.ndarray] = []
    pairs: list[np.ndarray] = []
    hists = None
    for _, batch in iter_unit_batches(unit, [S.OBS, S.ACTIONS]):
        if not batch.num_rows:
            continue
        obs_col, act_col = batch.column(0), batch.column(1)
        o_off = obs_col.offsets.to_numpy()
        lens = np.diff(o_off)
        pos = np.arange(o_off[-1] - o_off[0]) - np.repeat(o_off[:-1] - o_off[0], lens)
        keep = pos < np.repeat(lens - 1, lens)
        obs = np.asarray(from_arrow(obs_col.values.slice(o_off[0], o_off[-1] - o_off[0]), obs_space))
        obs = obs.reshape(len(obs), -1)[keep].astype(np.float64)
        a_off = act_col.offsets.to_numpy()
        act = np.asarray(from_arrow(act_col.values.slice(a_off[0], a_off[-1] - a_off[0]), act_space))
        act = act.reshape(len(act), -1).astype(np.float64)
        s_cells = _cells(obs, obs_range[0], obs_range[1], bins)
        if act_range is None:  # Discrete: the action is its own cell
            a_cells = act.astype(np.int64)
        else:
            a_cells = _cells(act, act_range[0], act_range[1], bins)
            edges = [np.linspace(lo, hi if hi > lo else lo + 1, hist_bins + 1) for lo, hi in zip(*act_range)]
            part = [np.histogram(act[:, d], bins=edges[d])[0] for d in range(min(act.shape[1], MAX_ACTION_HISTOGRAMS))]
            hists = part if hists is None else [h + p for h, p in zip(hists, part)]
        s_hash = s_cells @ _HASH[: s_cells.shape[1]]
        pair = np.concatenate([s_cells, a_cells], axis=1)
        states.append(np.unique(s_hash))
        pairs.append(np.unique(pair @ _HASH[: pair.shape[1]]))
    cat = lambda parts: np.unique(np.concatenate(parts)).tolist() if parts else []  # noqa: E731
    return {"states": cat(states), "pairs": cat(pairs), "hist": None if hists is None else [h.tolist() for h in hists]}


def _coverage(path: Path, info, base: dict[str, Any], cfg: StatsConfig) -> tuple[dict | None, list]:
    obs_space, act_space = info.observation_space, info.action_space
    obs_range = _box_ranges(base["observations"])
    if not isinstance(obs_space, gym.spaces.Box) or obs_range is None or \
            not isinstance(act_space, (gym.spaces.Box, gym.spaces.Discrete)):
        return {"note": "computed for Box observations and Box or Discrete actions only"}, []
    act_range = None if isinstance(act_space, gym.spaces.Discrete) else _box_ranges(base["actions"])
    units, _ = plan_units(parquet_files(path))
    fn = functools.partial(coverage_unit, obs_space=obs_space, act_space=act_space, obs_range=obs_range,
                           act_range=act_range, bins=cfg.bins, hist_bins=cfg.histogram_bins)
    states = np.zeros(0, dtype=np.int64)
    pairs = np.zeros(0, dtype=np.int64)
    hists = None
    for payload in run_units(units, fn, desc="stats: coverage"):
        if "read_error" in payload:
            raise DataOpError(f"{payload['unit']['file']}: cannot be read ({payload['read_error']})")
        states = np.union1d(states, np.asarray(payload["states"], dtype=np.int64))
        pairs = np.union1d(pairs, np.asarray(payload["pairs"], dtype=np.int64))
        if payload["hist"] is not None:
            part = [np.asarray(h) for h in payload["hist"]]
            hists = part if hists is None else [h + p for h, p in zip(hists, part)]
    steps = base["steps"]
    coverage = {"bins": cfg.bins, "steps": steps, "unique_states": int(len(states)),
                "unique_state_actions": int(len(pairs)),
                "state_actions_per_step": (len(pairs) / steps) if steps else None}
    histograms = []
    if hists is not None:
        for d, counts in enumerate(hists):
            lo, hi = act_range[0][d], act_range[1][d]
            histograms.append({"dim": d, "edges": np.linspace(lo, hi if hi > lo else lo + 1,
                                                              cfg.histogram_bins + 1).tolist(),
                               "counts": counts.tolist()})
    return coverage, histograms


def _by_column(info, cfg: StatsConfig) -> str | None:
    if cfg.by is not None:
        if cfg.by not in step_columns(info) or cfg.by == S.REWARDS:
            choices = [c for c in step_columns(info) if c != S.REWARDS]
            raise DataOpError(f"stats: --by {cfg.by!r}: no such per-step column (it has: {', '.join(choices) or 'none'})")
        return cfg.by
    return next((c for c in ("source", "behavior_level") if c in info.extra_columns), None)


def _sources(episodes, column: str | None) -> dict[str, dict[str, Any]]:
    if column is None:
        return {}
    labels = episodes.values[f"first({column})"]
    out: dict[str, dict[str, Any]] = {}
    text = np.array([str(int(v)) if isinstance(v, float) and float(v).is_integer() else str(v) for v in labels])
    for name in sorted(set(text.tolist())):
        m = text == name
        r = episodes.returns[m]
        out[name] = {"episodes": int(m.sum()), "steps": int(episodes.lengths[m].sum()), "return_mean": float(r.mean()),
                     "return_std": float(r.std()), "return_min": float(r.min()), "return_max": float(r.max()),
                     "length_mean": float(episodes.lengths[m].mean())}
    return out


def dataset_card(path: str | Path, config: StatsConfig = StatsConfig()) -> dict[str, Any]:
    """The statistics of the dataset at ``path`` as a JSON-ready dict (see the module docstring)."""
    path = Path(path)
    info = check_input(path)  # before any pass: no files, no rows or a file of other columns is one line
    column = _by_column(info, config)
    try:
        base = dataset_stats(path)
    except StatsError as exc:
        raise DataOpError(str(exc)) from None
    summary = summarise(path, columns=[column] if column else (), desc="stats: sources", info=info)
    episodes = summary.episodes()
    coverage, histograms = _coverage(path, info, base, config)
    return {**base, "path": str(path), "fingerprint": summary.fingerprint,
            "recorded_fingerprint": info.fingerprint, "lineage": info.lineage, "by": column,
            "sources": _sources(episodes, column), "returns_by_source": {
                k: episodes.returns[_mask(episodes, column, k)].tolist() for k in _sources(episodes, column)}
            if column and len(episodes) <= 100_000 else {},
            "action_histograms": histograms, "coverage": coverage}


def _mask(episodes, column: str, name: str) -> np.ndarray:
    labels = episodes.values[f"first({column})"]
    return np.array([(str(int(v)) if isinstance(v, float) and float(v).is_integer() else str(v)) == name
                     for v in labels])


def format_card(card: dict[str, Any], max_dims: int = 16) -> str:
    """A readable text of :func:`dataset_card`'s result: ``inspect``'s text (with the lineage), then sources and
    coverage."""
    from offlinerl.episodes.stats import format_stats

    lines = [format_stats(card, max_dims=max_dims)]
    fp, recorded = card["fingerprint"], card["recorded_fingerprint"]
    if recorded is None:
        lines.append("  (computed from the rows: dataset.json records none, it was written before fingerprints)")
    elif recorded != fp:
        lines.append(f"  (dataset.json records the fingerprint {recorded}: a file changed after it was written)")
    if card["sources"]:
        lines.append(f"sources (first value of {card['by']!r}):")
        lines.append(f"  {'source':<16}{'episodes':>10}{'steps':>12}{'return mean':>14}{'std':>10}")
        for name, s in card["sources"].items():
            lines.append(f"  {name:<16}{s['episodes']:>10,}{s['steps']:>12,}{s['return_mean']:>14.4g}"
                         f"{s['return_std']:>10.4g}")
    cov = card["coverage"]
    if cov and "unique_state_actions" in cov:
        lines.append(f"coverage ({cov['bins']} bins per dimension): {cov['unique_state_actions']:,} state-action "
                     f"cells, {cov['unique_states']:,} state cells, over {cov['steps']:,} steps")
    elif cov:
        lines.append(f"coverage: {cov['note']}")
    return "\n".join(lines)
