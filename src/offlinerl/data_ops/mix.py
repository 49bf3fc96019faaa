"""``mix``: datasets of the same spaces in one, with weights (by episodes or by steps) and a source column.

Spaces must be equal (the JSON forms in ``dataset.json``); the first difference is named, e.g.
``observation_space.shape: [4] in a, [3] in b``. Extra columns all inputs share with the same spec are kept
(the others are dropped and reported). A per-step string column (``source`` by default) says which input each
step came from; rows that have one already keep theirs, so a mix of mixes names the original sources. When an
episode id occurs in more than one input, every id is prefixed with its input's name (``expert/ep-7``).

Weights: with ``weights`` the output holds each input's share of the episodes (or steps) as large as the
inputs allow without drawing an episode twice (``total`` asks for exactly that many instead; ``total`` without
``weights``: equal weights). The quotas are whole numbers that sum to exactly the total (largest remainders,
:func:`apportion`); by episodes, every input must get at least one episode, else the mix is refused. The
episodes are drawn by a seeded permutation, without replacement (by steps: every episode, in that order, that
still fits the input's quota of steps, at least one, so a share is met to within one episode's length).
Without ``weights`` and ``total``, every episode of every input.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from offlinerl.data_ops.errors import DataOpError
from offlinerl.data_ops.select import check_seed
from offlinerl.data_ops.summary import check_input, summarise
from offlinerl.data_ops.write import OpResult, check_out, write_output
from offlinerl.episodes import schema as S
from offlinerl.episodes.agent_spaces import agent_spaces_json
from offlinerl.episodes.spaces import space_to_json

__all__ = ["MixConfig", "apportion", "mix_datasets", "space_difference"]


@dataclass(frozen=True, kw_only=True)
class MixConfig:
    """How ``mix`` combines its inputs."""

    weights: tuple[float, ...] | None = None
    """One positive weight per input (normalised); None: every episode of every input, or equal weights when
    ``total`` is given."""
    by: Literal["episodes", "steps"] = "episodes"
    """What the weights share out (``steps`` needs ``weights`` or ``total``)."""
    total: int | None = None
    """Exactly this many episodes (by steps: about this many steps) in the output; default: the most the weights
    allow."""
    names: tuple[str, ...] | None = None
    """One name per input for the source column and id prefixes; default: the directories' names."""
    source_column: str | None = "source"
    """The per-step column naming each step's input; None: none is added."""
    seed: int = 0
    """Seed of the draws."""

    def __post_init__(self) -> None:
        if self.by not in ("episodes", "steps"):
            raise DataOpError(f"mix: --by must be episodes or steps, got {self.by!r}")
        if self.weights is not None and any(not (w > 0 and np.isfinite(w)) for w in self.weights):
            raise DataOpError(f"mix: --weights must be positive numbers, got {list(self.weights)}")
        if self.total is not None and self.total < 1:
            raise DataOpError(f"mix: --total must be >= 1, got {self.total}")
        if self.by == "steps" and self.weights is None and self.total is None:
            raise DataOpError("mix: --by steps shares out --weights or --total; give one (without either, every "
                              "episode of every input is taken)")
        check_seed(self.seed, "mix")
        if self.source_column is not None and (self.source_column in S.REQUIRED_COLUMNS or not self.source_column):
            raise DataOpError(f"mix: --source-column {self.source_column!r} is a column every row has")


def space_difference(a: Any, b: Any, where: str = "") -> str | None:
    """The first difference of two JSON values, as ``path: A vs B``; None if equal."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in list(a) + [k for k in b if k not in a]:
            if key not in a or key not in b:
                return f"{where}.{key}: {'missing' if key not in a else _short(a[key])} vs " \
                       f"{'missing' if key not in b else _short(b[key])}"
            if (diff := space_difference(a[key], b[key], f"{where}.{key}")) is not None:
                return diff
        return None
    return None if a == b else f"{where}: {_short(a)} vs {_short(b)}"


def _agents_spaces(info: Any) -> str:
    """``info``'s agents and their observation widths / action spaces, short (``one space for every agent``)."""
    if info.agent_spaces is None:
        return "one space for every agent"
    return ", ".join(f"{a}: {o.shape or o}, {s}" for a, (o, s) in info.agent_spaces.items())


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


@dataclass(frozen=True)
class MixRows:
    """Keep the rows of ``ids``; prefix their ids; add the source column if the rows lack it."""

    ids: frozenset[str]
    prefix: str
    source: str
    column: str | None

    def __call__(self, table: pa.Table, file: str, first_row: int) -> pa.Table:
        ids = table.column(S.EPISODE_ID).to_pylist()
        keep = np.fromiter((i in self.ids for i in ids), bool, len(ids))
        table = table.filter(pa.array(keep))
        if self.prefix:
            renamed = pa.array([self.prefix + i for i in table.column(S.EPISODE_ID).to_pylist()], pa.string())
            table = table.set_column(table.schema.get_field_index(S.EPISODE_ID), S.EPISODE_ID, renamed)
        if self.column is not None and self.column not in table.column_names:
            rewards = table.column(S.REWARDS).combine_chunks()
            offsets = rewards.offsets
            steps = int(offsets[-1].as_py() - offsets[0].as_py()) if len(table) else 0
            base = pc.subtract(offsets, offsets[0]) if len(table) else offsets
            values = pa.array([self.source] * steps, pa.string())
            table = table.append_column(self.column, pa.ListArray.from_arrays(base, values))
        return table


def apportion(total: int, share: np.ndarray) -> np.ndarray:
    """``total`` split in proportion to ``share`` (summing to 1) into whole numbers summing to exactly ``total``
    (Hamilton's method): each gets the floor of its exact quota, and the units left go one each to the largest
    remainders (ties: the earlier input). No count exceeds its exact quota rounded up."""
    exact = np.round(share * total, 9)  # 0.1 * 30 is 3.0000000000000004: not a remainder
    counts = np.floor(exact).astype(np.int64)
    left = int(total - counts.sum())
    counts[np.argsort(-(exact - counts), kind="stable")[:left]] += 1
    return counts


def _quotas(available: np.ndarray, weights: np.ndarray, total: int | None, names: Sequence[str],
            by: str) -> np.ndarray:
    """Each input's whole number of episodes (or steps): ``total`` or the most the weights allow, apportioned."""
    share = weights / weights.sum()
    limit = int(np.argmin(available / share))
    feasible = int(np.floor(available[limit] / share[limit] + 1e-9))
    if total is not None and total > feasible:
        raise DataOpError(f"mix: --total {total} {by} cannot be drawn with these weights without drawing an episode "
                          f"twice: {names[limit]!r} has only {int(available[limit])} {by} (at most {feasible} in all)")
    count = feasible if total is None else total
    if by == "episodes" and count < len(names):
        raise DataOpError(f"mix: --total {count} is fewer episodes than the {len(names)} inputs (each gives at least "
                          f"one); ask for at least {len(names)}")
    quotas = apportion(count, share)
    if by == "episodes" and (quotas == 0).any():
        i = int(np.argmin(quotas))
        if total is not None:
            raise DataOpError(f"mix: --total {count} gives {names[i]!r} no episode (its share by the weights is "
                              f"{share[i] * count:.3g}); give it more weight or a larger --total")
        raise DataOpError(f"mix: these weights give {names[i]!r} no episode (its share of the {count} episodes the "
                          f"inputs allow is {share[i] * count:.3g}); give it more weight")
    return quotas


def mix_datasets(paths: Sequence[str | Path], out: str | Path, config: MixConfig, *,
                 overwrite: bool = False) -> OpResult:
    """Write the mix of the datasets ``paths`` to ``out``."""
    paths = [Path(p) for p in paths]
    if len(paths) < 2:
        raise DataOpError("mix: give at least two input datasets")
    names = list(config.names) if config.names else [p.name for p in paths]
    if len(names) != len(paths) or len(set(names)) != len(names):
        raise DataOpError(f"mix: --names needs {len(paths)} distinct names (one per input), got {names}")
    if config.weights is not None and len(config.weights) != len(paths):
        raise DataOpError(f"mix: --weights needs {len(paths)} numbers (one per input), got {len(config.weights)}")
    check_out(out, overwrite, paths)
    infos = [check_input(p) for p in paths]  # every input, before any pass
    for p, info in zip(paths[1:], infos[1:]):
        if agent_spaces_json(infos[0].agent_spaces) != agent_spaces_json(info.agent_spaces):
            raise DataOpError(f"mix: {paths[0]} and {p} have different agent spaces "
                              f"({_agents_spaces(infos[0])} and {_agents_spaces(info)}); only datasets of the same "
                              "spaces mix")
        for key, a, b in (("observation_space", infos[0].observation_space, info.observation_space),
                          ("action_space", infos[0].action_space, info.action_space)):
            diff = space_difference(space_to_json(a), space_to_json(b), key)
            if diff is not None:
                raise DataOpError(f"mix: {paths[0]} and {p} have different {key.replace('_', ' ')}s ({diff}); "
                                  "only datasets of the same spaces mix")
    common = {k: v for k, v in infos[0].extra_columns.items() if all(i.extra_columns.get(k) == v for i in infos)}
    dropped = sorted({k for i in infos for k in i.extra_columns} - set(common))
    if config.source_column is not None:
        have = [i.extra_columns.get(config.source_column) for i in infos]
        if any(h is not None and h.get("dtype") not in ("string", "json") for h in have):
            raise DataOpError(f"mix: an input has a non-text column {config.source_column!r}; choose another "
                              "--source-column")
        common[config.source_column] = {"dtype": "string", "shape": []}
        dropped = [d for d in dropped if d != config.source_column]
    summaries = [summarise(p, desc=f"mix: {n}", info=i) for p, n, i in zip(paths, names, infos)]
    tables = [s.episodes() for s in summaries]
    all_ids = np.concatenate([t.ids for t in tables])
    prefix = len(np.unique(all_ids.astype(str))) < len(all_ids)
    rng = np.random.default_rng(config.seed)
    chosen = []
    if config.weights is None and config.total is None:
        chosen = [np.ones(len(t), dtype=bool) for t in tables]
    else:
        weights = np.ones(len(paths)) if config.weights is None else np.asarray(config.weights, dtype=np.float64)
        available = np.array([len(t) if config.by == "episodes" else t.num_steps for t in tables], dtype=np.float64)
        quotas = _quotas(available, weights, config.total, names, config.by)
        for t, quota in zip(tables, quotas):
            order = rng.permutation(len(t))
            if config.by == "episodes":
                take = order[:quota]
            else:  # in the drawn order, every episode that still fits the quota (at least one)
                take, used = [], 0
                for i in order:
                    if used + t.lengths[i] <= quota or not take:
                        take.append(i)
                        used += int(t.lengths[i])
            mask = np.zeros(len(t), dtype=bool)
            mask[take] = True
            chosen.append(mask)
    per_source = {n: {"episodes": int(m.sum()), "steps": int(t.lengths[m].sum()),
                      "return_mean": float(t.returns[m].mean()) if m.any() else None}
                  for n, t, m in zip(names, tables, chosen)}
    report = {"sources": per_source, "episodes_out": sum(s["episodes"] for s in per_source.values()),
              "ids_prefixed": bool(prefix), "columns_dropped": dropped}
    transforms = [MixRows(ids=frozenset(t.ids[m].tolist()), prefix=f"{n}/" if prefix else "", source=n,
                          column=config.source_column) for n, t, m in zip(names, tables, chosen)]
    params = {"names": names, "weights": list(config.weights) if config.weights else None, "by": config.by,
              "total": config.total, "source_column": config.source_column, "seed": config.seed}
    return write_output(list(zip(summaries, transforms)), out, operation="mix", parameters=params, report=report,
                        extra_columns=common, overwrite=overwrite)
