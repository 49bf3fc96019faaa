"""The first pass of every data operation: one small record per row, and per episode, of a dataset.

A Ray Data job over the dataset's row groups (:mod:`offlinerl.episodes.scan`) returns, per row, its episode
id, agent, chunk, start step, length, return and flags, the row's place (file, row), the aggregates of the
per-step columns an expression asked for, and optionally a digest of the row's content without its episode
id (``dedup``); and per row group its part of the content fingerprint. Nothing but these records reaches the
driver, so the pass holds a 10M-step dataset in a few MB. :meth:`Summary.episodes` groups the rows of each
episode id (all chunks; in a multi-agent dataset, all agents): returns and lengths are sums over them.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from offlinerl.data_ops.errors import DataOpError
from offlinerl.episodes import schema as S
from offlinerl.episodes.agent_spaces import agent_spaces_json
from offlinerl.episodes.fingerprint import RowHasher, combine, table_digests
from offlinerl.episodes.info import DatasetInfo, read_info
from offlinerl.episodes.io import parquet_files
from offlinerl.episodes.scan import iter_unit_batches, plan_units, run_units
from offlinerl.episodes.spaces import space_to_json
from offlinerl.episodes.validate import SchemaMismatchError, require_schema

__all__ = ["EpisodeTable", "Summary", "check_input", "summarise", "step_columns"]

logger = logging.getLogger("offlinerl.data_ops")
_MOD = 1 << 256


def step_columns(info: DatasetInfo) -> list[str]:
    """Per-step columns an aggregate may read: ``rewards`` and the extra columns of one value per step."""
    return [S.REWARDS] + sorted(k for k, v in info.extra_columns.items() if not v.get("shape"))


def check_input(path: str | Path) -> DatasetInfo:
    """``path``'s ``dataset.json``, once the parquet footers (no rows are read, Ray is not started) show that the
    dataset has parquet files, that every file has the columns and types ``dataset.json`` declares, and that they
    hold rows. Raises :class:`DataOpError` naming the dataset or the file, before any operation starts."""
    path = Path(path)
    info = read_info(path)
    files = parquet_files(path)
    if not files:
        raise DataOpError(f"{path}: has no parquet files (only its dataset.json): no episodes to read")
    try:
        require_schema(path)
    except SchemaMismatchError as exc:  # its advice is for `train --skip-validation`; ours is to validate
        declared = f": not what {path / 'dataset.json'} declares" if exc.problem != str(exc) else ""
        raise DataOpError(f"{exc.problem}{declared}; run `offlinerl validate {path}`") from None
    if sum(pq.read_metadata(f).num_rows for f in files) == 0:
        raise DataOpError(f"{path}: its parquet files hold no episodes")
    return info


def _row_aggregates(col: pa.Array) -> dict[str, list]:
    """first/last/sum/min/max/count per row of a list column of scalars."""
    offsets = col.offsets.to_numpy().astype(np.int64)
    lengths = np.diff(offsets)
    flat = col.values.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))
    starts = offsets[:-1] - offsets[0]
    if pa.types.is_string(flat.type) or pa.types.is_large_string(flat.type):
        values = flat.to_pylist()
        first = [values[s] if n else None for s, n in zip(starts, lengths)]
        last = [values[s + n - 1] if n else None for s, n in zip(starts, lengths)]
        return {"first": first, "last": last, "count": lengths.tolist()}
    x = pc.fill_null(pc.cast(flat, pa.float64()), np.nan).to_numpy(zero_copy_only=False)
    nonempty = lengths > 0
    idx = starts[nonempty]  # strictly increasing: each non-empty row's range ends where the next one starts
    total, lo, hi, first, last = (np.full(len(lengths), np.nan) for _ in range(5))
    if len(idx):
        total[nonempty] = np.add.reduceat(x, idx)
        lo[nonempty] = np.minimum.reduceat(x, idx)
        hi[nonempty] = np.maximum.reduceat(x, idx)
        first[nonempty] = x[idx]
        last[nonempty] = x[idx + lengths[nonempty] - 1]
    total[~nonempty] = 0.0
    return {k: np.asarray(v, dtype=np.float64).tolist() for k, v in
            (("first", first), ("last", last), ("sum", total), ("min", lo), ("max", hi), ("count", lengths))}


def summarise_unit(unit: Any, *, columns: Sequence[str], content: bool) -> dict[str, Any]:
    """The records of one row group (a Ray Data task)."""
    out: dict[str, Any] = {k: [] for k in ("id", "agent", "chunk", "t_start", "steps", "return", "terminated",
                                           "truncated", "row", "content")}
    aggs: dict[str, dict[str, list]] = {c: {} for c in columns}
    total = rows = 0
    hasher = RowHasher(exclude=[S.EPISODE_ID])
    for first_row, batch in iter_unit_batches(unit):
        n = batch.num_rows
        if not n:
            continue
        part, _ = table_digests(batch)
        total, rows = (total + part) % _MOD, rows + n
        col = {name: batch.column(i) for i, name in enumerate(batch.schema.names)}
        out["id"] += col[S.EPISODE_ID].to_pylist()
        out["agent"] += col[S.AGENT_ID].to_pylist()
        out["chunk"] += col[S.CHUNK_INDEX].to_pylist()
        out["t_start"] += col[S.T_START].to_pylist()
        out["terminated"] += col[S.TERMINATED].to_pylist()
        out["truncated"] += col[S.TRUNCATED].to_pylist()
        out["row"] += list(range(first_row, first_row + n))
        rewards = _row_aggregates(col[S.REWARDS])
        out["steps"] += rewards["count"]
        out["return"] += rewards["sum"]
        for c in columns:
            if c not in col:
                raise DataOpError(f"{unit.file}: has no column {c!r}")
            for k, v in _row_aggregates(col[c]).items():
                aggs[c].setdefault(k, []).extend(v)
        if content:
            out["content"] += [d.hex() for d in hasher.digests(batch)]
    return {**out, "aggs": aggs, "sum": f"{total:x}", "rows": rows}


@dataclass
class EpisodeTable:
    """One entry per episode id, sorted by id."""

    ids: np.ndarray
    """Episode ids (object array of str), sorted."""
    returns: np.ndarray
    """Sum of the rewards over every row of the episode."""
    lengths: np.ndarray
    """Steps over every row of the episode."""
    terminated: np.ndarray
    """Whether any row of the episode ends terminated."""
    truncated: np.ndarray
    """Whether any row of the episode ends truncated (and none terminated)."""
    values: dict[str, np.ndarray] = field(default_factory=dict)
    """``"agg(column)"`` -> per-episode value, for the aggregates asked for."""

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def num_steps(self) -> int:
        return int(self.lengths.sum())


@dataclass
class Summary:
    """The records of every row of a dataset (one entry per row, in scan order)."""

    path: Path
    info: DatasetInfo
    fingerprint: str
    """The content fingerprint computed from the rows (whatever ``dataset.json`` says)."""
    rows: dict[str, np.ndarray]
    """``id``, ``agent``, ``chunk``, ``t_start``, ``steps``, ``return``, ``terminated``, ``truncated``, ``file``,
    ``row`` and (if asked) ``content``, one entry per row."""
    aggs: dict[str, dict[str, np.ndarray]]
    """column -> aggregate -> one value per row."""

    def episodes(self) -> EpisodeTable:
        """Rows grouped by episode id (see the module docstring)."""
        ids, inverse = np.unique(self.rows["id"].astype(str), return_inverse=True)
        n = len(ids)
        returns = np.bincount(inverse, weights=self.rows["return"], minlength=n)
        lengths = np.bincount(inverse, weights=self.rows["steps"], minlength=n).astype(np.int64)
        term = np.bincount(inverse, weights=self.rows["terminated"].astype(float), minlength=n) > 0
        trunc = (np.bincount(inverse, weights=self.rows["truncated"].astype(float), minlength=n) > 0) & ~term
        values: dict[str, np.ndarray] = {}
        order = np.lexsort((self.rows["t_start"], inverse))  # rows of each episode in step order
        first_row = order[np.unique(inverse[order], return_index=True)[1]]
        last_row = order[np.r_[np.nonzero(np.diff(inverse[order]))[0], len(order) - 1]] if len(order) else order
        for col, parts in self.aggs.items():
            for agg in ("first", "last"):
                pick = first_row if agg == "first" else last_row
                values[f"{agg}({col})"] = np.asarray(parts[agg], dtype=object if parts[agg].dtype == object
                                                     else np.float64)[pick]
            if "sum" in parts:
                count = np.bincount(inverse, weights=parts["count"], minlength=n)
                total = np.bincount(inverse, weights=np.nan_to_num(parts["sum"]), minlength=n)
                values[f"sum({col})"] = total
                values[f"mean({col})"] = np.where(count > 0, total / np.maximum(count, 1), np.nan)
                lo = np.full(n, np.inf)
                hi = np.full(n, -np.inf)
                np.minimum.at(lo, inverse, np.nan_to_num(parts["min"], nan=np.inf))
                np.maximum.at(hi, inverse, np.nan_to_num(parts["max"], nan=-np.inf))
                values[f"min({col})"], values[f"max({col})"] = lo, hi
        return EpisodeTable(ids=ids.astype(object), returns=returns, lengths=lengths, terminated=term,
                            truncated=trunc, values=values)


def summarise(path: str | Path, *, columns: Sequence[str] = (), content: bool = False,
              desc: str = "reading", info: DatasetInfo | None = None) -> Summary:
    """The :class:`Summary` of the dataset at ``path`` (Ray is started if needed). Raises
    :class:`~offlinerl.data_ops.errors.DataOpError` for a file that cannot be read or a column it lacks.
    ``info``: what :func:`check_input` returned for ``path`` in an operation that checked it up front (not checked
    again); None: checked here."""
    path = Path(path)
    info = check_input(path) if info is None else info
    known = step_columns(info)
    for c in columns:
        if c not in known:
            raise DataOpError(f"{path}: no per-step column {c!r} of one value per step (it has: {', '.join(known)})")
    units, unreadable = plan_units(parquet_files(path))
    if unreadable:
        f, err = next(iter(unreadable.items()))
        raise DataOpError(f"{f}: cannot be read as parquet ({err}); run `offlinerl validate {path}`")
    fn = functools.partial(summarise_unit, columns=tuple(columns), content=content)
    lists: dict[str, list] = {k: [] for k in ("id", "agent", "chunk", "t_start", "steps", "return", "terminated",
                                              "truncated", "row", "content", "file")}
    aggs: dict[str, dict[str, list]] = {c: {} for c in columns}
    parts = []
    for payload in run_units(units, fn, desc=desc):
        if "read_error" in payload:
            raise DataOpError(f"{payload['unit']['file']}: cannot be read ({payload['read_error']}); "
                              f"run `offlinerl validate {path}`")
        for k in lists:
            if k != "file":
                lists[k] += payload[k]
        lists["file"] += [payload["unit"]["file"]] * len(payload["id"])
        for c, per in payload["aggs"].items():
            for k, v in per.items():
                aggs[c].setdefault(k, []).extend(v)
        parts.append((int(payload["sum"], 16), payload["rows"]))
    fingerprint = combine(parts, agent_spaces=agent_spaces_json(info.agent_spaces),
                          observation_space=space_to_json(info.observation_space),
                          action_space=space_to_json(info.action_space), extra_columns=info.extra_columns)
    if info.fingerprint is not None and info.fingerprint != fingerprint:
        logger.warning("%s: its rows do not match the fingerprint dataset.json records (%s…, the rows give %s…): "
                       "a file was changed after it was written; the lineage records the rows' fingerprint",
                       path, info.fingerprint[:12], fingerprint[:12])
    rows = {k: np.asarray(v, dtype=object if k in ("id", "agent", "file", "content") else None)
            for k, v in lists.items()}
    for k, dtype in (("steps", np.int64), ("return", np.float64), ("chunk", np.int64), ("t_start", np.int64),
                     ("row", np.int64), ("terminated", bool), ("truncated", bool)):
        rows[k] = rows[k].astype(dtype) if len(rows[k]) else np.zeros(0, dtype=dtype)
    arrays = {c: {k: np.asarray(v, dtype=object if k in ("first", "last") and v and isinstance(
        next((x for x in v if x is not None), 0.0), str) else np.float64) for k, v in per.items()}
        for c, per in aggs.items()}
    return Summary(path=path, info=info, fingerprint=fingerprint, rows=rows, aggs=arrays)
