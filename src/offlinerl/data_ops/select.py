"""Choosing episodes: ``filter`` (predicates, ranks, id lists), ``sample`` (seeded, optionally return-matched)
and ``split`` (seeded by episode id; ``holdout`` is exactly the split of a job's ``data.holdout``).

Every choice is made on the :class:`~offlinerl.data_ops.summary.EpisodeTable` of the first pass and kept whole:
all rows (chunks, agents) of a chosen episode id are written, and no other.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from offlinerl.data.holdout import holdout_episode_ids
from offlinerl.data_ops.errors import DataOpError
from offlinerl.data_ops.expr import parse
from offlinerl.data_ops.summary import EpisodeTable, check_input, step_columns, summarise
from offlinerl.data_ops.write import KeepRows, OpResult, check_out, write_output

__all__ = ["FilterConfig", "SampleConfig", "SplitConfig", "filter_dataset", "sample_dataset", "split_dataset",
           "check_seed", "rank_count", "split_parts", "WHERE_NAMES"]

#: Names an episode predicate (``--where``) may use bare.
WHERE_NAMES = ("return", "length", "terminated", "truncated", "episode_id")


def rank_count(text: str | int, total: int, what: str) -> int:
    """Episodes a rank option keeps out of ``total``: ``"10%"`` -> round(10% of total), at least 1; ``"50"`` -> 50."""
    raw = str(text).strip()
    try:
        if raw.endswith("%"):
            share = float(raw[:-1])
            if not 0 < share <= 100:
                raise ValueError
            return min(total, max(1, round(share / 100 * total)))
        count = int(raw)
        if count < 1:
            raise ValueError
        return min(total, count)
    except ValueError:
        raise DataOpError(f"{what}: expected a count (e.g. 50) or a share (e.g. 10%) of the episodes, "
                          f"got {text!r}") from None


def check_seed(seed: int, op: str) -> None:
    """Refuse a seed numpy's generators refuse (a negative one), naming the option."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise DataOpError(f"{op}: --seed must be a non-negative integer, got {seed!r}")


@dataclass(frozen=True, kw_only=True)
class FilterConfig:
    """Which episodes ``filter`` keeps: every predicate given must hold; then ``top``/``bottom`` rank what is left."""

    min_return: float | None = None
    """Keep episodes whose return is at least this."""
    max_return: float | None = None
    """Keep episodes whose return is at most this."""
    min_length: int | None = None
    """Keep episodes of at least this many steps."""
    max_length: int | None = None
    """Keep episodes of at most this many steps."""
    where: str | None = None
    """An episode predicate (``offlinerl.data_ops.expr``), e.g. ``"return > 100 and first(behavior_level) >= 3"``."""
    episodes: tuple[str, ...] | None = None
    """Keep only these episode ids."""
    exclude: tuple[str, ...] = ()
    """Drop these episode ids."""
    top: str | None = None
    """Then keep the best: a count (``"50"``) or a share (``"10%"``) of the episodes left, ranked by ``rank_by``."""
    bottom: str | None = None
    """Then keep the worst, as ``top``."""
    rank_by: str = "return"
    """What ``top``/``bottom`` rank by: ``return``, ``length``, or an episode expression as ``where`` takes, e.g.
    ``"last(rewards)"`` (how the episode ended); ties: the smaller episode id first."""

    def __post_init__(self) -> None:
        for name, value in (("--min-return", self.min_return), ("--max-return", self.max_return)):
            if value is not None and not math.isfinite(value):
                raise DataOpError(f"filter: {name} must be a finite number, got {value}")
        if self.top is not None and self.bottom is not None:
            raise DataOpError("filter: give --top or --bottom, not both")
        if not self.rank_by.strip():
            raise DataOpError("filter: --rank-by must be return, length or an episode expression")
        given = [self.min_return, self.max_return, self.min_length, self.max_length, self.where, self.episodes,
                 self.top, self.bottom]
        if all(v is None for v in given) and not self.exclude:
            raise DataOpError("filter: nothing to filter by; give --top/--bottom, --min-return/--max-return, "
                              "--min-length/--max-length, --where or --episodes/--exclude")


def _names(episodes: EpisodeTable) -> dict:
    return {"return": episodes.returns, "length": episodes.lengths, "terminated": episodes.terminated,
            "truncated": episodes.truncated, "episode_id": episodes.ids, **episodes.values}


def _keep_mask(episodes: EpisodeTable, cfg: FilterConfig, where, rank) -> np.ndarray:
    keep = np.ones(len(episodes), dtype=bool)
    for bound, values, cmp in ((cfg.min_return, episodes.returns, np.greater_equal),
                               (cfg.max_return, episodes.returns, np.less_equal),
                               (cfg.min_length, episodes.lengths, np.greater_equal),
                               (cfg.max_length, episodes.lengths, np.less_equal)):
        if bound is not None:
            keep &= cmp(values, bound)
    if where is not None:
        value = where.evaluate(_names(episodes))
        if value.shape != keep.shape:
            value = np.broadcast_to(value, keep.shape)
        keep &= value.astype(bool)
    if cfg.episodes is not None:
        keep &= np.isin(episodes.ids, np.asarray(list(cfg.episodes), dtype=object))
    if cfg.exclude:
        keep &= ~np.isin(episodes.ids, np.asarray(list(cfg.exclude), dtype=object))
    if cfg.top is not None or cfg.bottom is not None:
        left = np.nonzero(keep)[0]
        if len(left):
            values = np.broadcast_to(rank.evaluate(_names(episodes)), (len(episodes),))
            if values.dtype.kind not in "biuf":
                raise DataOpError(f"--rank-by {cfg.rank_by!r}: ranks by a number; this gives text")
            score = np.nan_to_num(values[left].astype(np.float64), nan=-np.inf)
            best_first = cfg.top is not None
            order = np.lexsort((np.arange(len(left)), -score if best_first else score))  # ids are sorted already
            count = rank_count(cfg.top if best_first else cfg.bottom, len(left),
                               "--top" if best_first else "--bottom")
            keep = np.zeros(len(episodes), dtype=bool)
            keep[left[order[:count]]] = True
    return keep


def _refuse_empty(kept: int, path: Path, op: str) -> None:
    if kept == 0:
        raise DataOpError(f"{op}: no episode of {path} is kept; nothing was written")


def _report(episodes: EpisodeTable, keep: np.ndarray) -> dict:
    return {"episodes_in": len(episodes), "episodes_out": int(keep.sum()), "steps_in": episodes.num_steps,
            "steps_out": int(episodes.lengths[keep].sum()),
            "return_mean_in": float(episodes.returns.mean()) if len(episodes) else None,
            "return_mean_out": float(episodes.returns[keep].mean()) if keep.any() else None}


def filter_dataset(path: str | Path, out: str | Path, config: FilterConfig, *, overwrite: bool = False) -> OpResult:
    """Write the episodes of ``path`` that ``config`` keeps to ``out``."""
    path = Path(path)
    check_out(out, overwrite, [path])
    info = check_input(path)
    where = None
    if config.where is not None:
        where = parse(config.where, names=WHERE_NAMES, columns=step_columns(info), predicate=True,
                      booleans=("terminated", "truncated"))
    rank = parse(config.rank_by, names=WHERE_NAMES, columns=step_columns(info), what="--rank-by")
    used = (where.aggregates if where else frozenset()) | rank.aggregates
    summary = summarise(path, columns=sorted({c for _, c in used}), desc="filter", info=info)
    episodes = summary.episodes()
    for agg, column in sorted(used):
        if f"{agg}({column})" not in episodes.values:
            raise DataOpError(f"{agg}({column}): {column!r} is a text column; only first({column}) and "
                              f"last({column}) apply")
    keep = _keep_mask(episodes, config, where, rank)
    report = _report(episodes, keep)
    if config.episodes is not None:
        report["listed_ids_missing"] = len(set(config.episodes) - set(episodes.ids.tolist()))
    _refuse_empty(int(keep.sum()), path, "filter")
    params = {k: v for k, v in asdict(config).items() if v not in (None, ())}
    if config.top is None and config.bottom is None:
        params.pop("rank_by")  # (its default: nothing was ranked)
    if "episodes" in params:
        params["episodes"] = f"{len(config.episodes)} listed ids"
    if "exclude" in params:
        params["exclude"] = f"{len(config.exclude)} listed ids"
    return write_output([(summary, KeepRows(ids=frozenset(episodes.ids[keep].tolist())))], out, operation="filter",
                        parameters=params, report=report, overwrite=overwrite)


@dataclass(frozen=True, kw_only=True)
class SampleConfig:
    """Which episodes ``sample`` draws (without replacement)."""

    episodes: int | None = None
    """How many episodes to draw (give this or ``fraction``)."""
    fraction: float | None = None
    """Or what share of the episodes, in (0, 1] (round(fraction * n), at least 1)."""
    seed: int = 0
    """Seed of the draw: the same seed and the same episode ids give the same sample."""
    match_returns: str | None = None
    """A dataset whose return distribution the sample should follow (histogram matching, ``bins`` bins)."""
    bins: int = 20
    """Equal-width return bins, over both datasets' range, for ``match_returns``."""

    def __post_init__(self) -> None:
        if (self.episodes is None) == (self.fraction is None):
            raise DataOpError("sample: give exactly one of --episodes N and --fraction F")
        if self.episodes is not None and self.episodes < 1:
            raise DataOpError(f"sample: --episodes must be >= 1, got {self.episodes}")
        if self.fraction is not None and not 0 < self.fraction <= 1:
            raise DataOpError(f"sample: --fraction must be in (0, 1], got {self.fraction}")
        if not 1 <= self.bins <= 10_000:
            raise DataOpError(f"sample: --bins must be in 1..10000, got {self.bins}")
        check_seed(self.seed, "sample")


def _matched(returns: np.ndarray, target: np.ndarray, count: int, bins: int, rng: np.random.Generator):
    """Indices into ``returns``: ``count`` drawn so their histogram follows ``target``'s; and the shortfall."""
    lo, hi = min(returns.min(), target.min()), max(returns.max(), target.max())
    edges = np.linspace(lo, hi if hi > lo else lo + 1.0, bins + 1)
    src_bin = np.clip(np.searchsorted(edges, returns, side="right") - 1, 0, bins - 1)
    tgt_bin = np.clip(np.searchsorted(edges, target, side="right") - 1, 0, bins - 1)
    want = np.bincount(tgt_bin, minlength=bins) / len(target) * count
    quota = np.floor(want).astype(int)
    for b in np.argsort(-(want - quota), kind="stable")[: count - quota.sum()]:
        quota[b] += 1
    chosen = []
    short = 0
    for b in range(bins):
        members = np.nonzero(src_bin == b)[0]
        take = min(quota[b], len(members))
        short += quota[b] - take
        chosen.append(rng.permutation(members)[:take])
    return np.concatenate(chosen).astype(int), int(short)


def sample_dataset(path: str | Path, out: str | Path, config: SampleConfig, *, overwrite: bool = False) -> OpResult:
    """Write a seeded sample of the episodes of ``path`` to ``out``."""
    path = Path(path)
    inputs = [path] + ([Path(config.match_returns)] if config.match_returns else [])
    check_out(out, overwrite, inputs)
    infos = [check_input(p) for p in inputs]  # both, before either pass
    summary = summarise(path, desc="sample", info=infos[0])
    episodes = summary.episodes()
    n = len(episodes)
    count = min(n, config.episodes) if config.episodes is not None else min(n, max(1, round(config.fraction * n)))
    rng = np.random.default_rng(config.seed)
    report: dict = {}
    if config.match_returns:
        target = summarise(config.match_returns, desc="sample: target", info=infos[1]).episodes()
        if not len(target):
            raise DataOpError(f"sample: --match-returns {config.match_returns} has no episodes")
        picked, short = _matched(episodes.returns, target.returns, count, config.bins, rng)
        report.update(shortfall=short, target_return_mean=float(target.returns.mean()))
    else:
        picked = rng.permutation(n)[:count]
    keep = np.zeros(n, dtype=bool)
    keep[picked] = True
    report = {**_report(episodes, keep), **report}
    _refuse_empty(int(keep.sum()), path, "sample")
    params = {k: v for k, v in asdict(config).items() if v is not None}
    return write_output([(summary, KeepRows(ids=frozenset(episodes.ids[keep].tolist())))], out, operation="sample",
                        parameters=params, report=report, overwrite=overwrite)


@dataclass(frozen=True, kw_only=True)
class SplitConfig:
    """How ``split`` divides the episodes: ``holdout`` (the job's split) or named ``fractions``."""

    holdout: float | None = None
    """Write ``train`` and ``holdout``: exactly the episodes a job with ``data.holdout: {fraction, seed}`` trains on
    and holds out (``offlinerl.data.holdout``)."""
    fractions: tuple[tuple[str, float], ...] = ()
    """Or named shares summing to 1, e.g. ``(("train", 0.8), ("valid", 0.1), ("test", 0.1))``: consecutive parts
    of the seeded permutation of the sorted ids, the last taking the rest."""
    seed: int = 0
    """Seed of the permutation."""

    def __post_init__(self) -> None:
        if (self.holdout is None) == (not self.fractions):
            raise DataOpError("split: give exactly one of --holdout F and --fractions NAME=F,...")
        if self.holdout is not None and not 0 < self.holdout < 1:
            raise DataOpError(f"split: --holdout must be in (0, 1), got {self.holdout}")
        check_seed(self.seed, "split")
        names = [n for n, _ in self.fractions]
        if len(set(names)) != len(names) or any(not n or "/" in n or n.startswith(".") for n in names):
            raise DataOpError(f"split: --fractions needs distinct plain names, got {names}")
        if self.fractions and (any(f <= 0 for _, f in self.fractions)
                               or not math.isclose(sum(f for _, f in self.fractions), 1.0, abs_tol=1e-6)):
            raise DataOpError(f"split: --fractions must be positive and sum to 1, got {dict(self.fractions)}")

    @property
    def names(self) -> tuple[str, ...]:
        return ("train", "holdout") if self.holdout is not None else tuple(n for n, _ in self.fractions)


def split_parts(ids: np.ndarray, config: SplitConfig) -> dict[str, np.ndarray]:
    """Name -> the episode ids of that part (``ids``: the sorted unique ids)."""
    if config.holdout is not None:
        held = holdout_episode_ids(ids, config.holdout, config.seed)
        return {"train": np.setdiff1d(ids, held), "holdout": held}
    order = np.random.default_rng(config.seed).permutation(len(ids))
    parts, start = {}, 0
    for i, (name, share) in enumerate(config.fractions):
        count = len(ids) - start if i == len(config.fractions) - 1 else round(share * len(ids))
        parts[name] = np.sort(ids[order[start:start + count]])
        start += count
    return parts


def split_dataset(path: str | Path, out: str | Path, config: SplitConfig, *,
                  overwrite: bool = False) -> dict[str, OpResult]:
    """Write each part of ``path`` to ``out/NAME`` (every output checked before any is written)."""
    path, out = Path(path), Path(out)
    targets = {name: out / name for name in config.names}
    for target in targets.values():
        check_out(target, overwrite, [path])
    summary = summarise(path, desc="split")
    ids = summary.episodes().ids
    try:
        parts = split_parts(ids, config)
    except ValueError as exc:
        raise DataOpError(f"split: {path}: {exc}") from None
    for name, members in parts.items():
        if not len(members):
            raise DataOpError(f"split: part {name!r} of {path} gets no episode ({len(ids)} in all); nothing was "
                              "written")
    params = {"holdout": config.holdout} if config.holdout is not None else {"fractions": dict(config.fractions)}
    params["seed"] = config.seed
    results = {}
    for name, members in parts.items():
        report = {"episodes_in": len(ids), "episodes_out": len(members)}
        results[name] = write_output([(summary, KeepRows(ids=frozenset(members.tolist())))], targets[name],
                                     operation="split", parameters={**params, "part": name}, report=report,
                                     overwrite=overwrite)
    return results
