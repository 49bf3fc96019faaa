"""RLlib new-stack episode layout (``output_write_episodes=True``): decode the
msgpack episode states, then join each episode's chunks.

Two Ray Data stages use these functions: :func:`read_piece` (``map_batches``
over (file, row group) pieces: one chunk row per record, or an error row) and
:func:`join_group` (``groupby(key).map_groups``: drop exact re-writes, check
that chunks follow each other, concatenate).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from offlinerl.convert.limits import DecodeLimits
from offlinerl.convert.packing import PackedDecodeError
from offlinerl.convert.grouped import GroupSettings, empty_batch, output_rows, quarantine_row
from offlinerl.convert.rllib.common import decode_reason, digest, fit_value, group_records, row_error
from offlinerl.convert.rllib.msgpack import EpisodeChunk, EpisodeStateError, chunk_from_state, decode_state
from offlinerl.episodes import schema as S
from offlinerl.episodes.arrow import batch_len, batch_slice
from offlinerl.episodes.episode import SingleAgentEpisode, episodes_to_table, table_to_episodes

__all__ = ["ChunkSettings", "ITEM_COLUMN", "INFOS", "read_piece", "join_group", "to_jsonable", "extra_specs_of"]

ITEM_COLUMN = "item"
INFOS = "infos"
KEY, FILE, ROW, ERROR, SIG = "_key", "_file", "_row", "_error", "_sig"


@dataclass(frozen=True)
class ChunkSettings:
    """Decoding settings sent to the read tasks."""

    group: GroupSettings
    """Spaces, extra columns (``infos`` is one, as JSON, when kept), chunk size."""
    files: tuple[str, ...]
    """All input files, in order (index = file position)."""
    limits: DecodeLimits = field(default_factory=DecodeLimits)
    """Caps on what one episode record may decode to."""


def to_jsonable(value: Any) -> Any:
    """Make decoded infos JSON-serialisable (arrays -> lists, numpy scalars -> numbers, bytes -> text)."""
    if isinstance(value, dict):
        return {str(k.decode() if isinstance(k, bytes) else k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


def extra_specs_of(chunk: EpisodeChunk) -> dict[str, dict[str, Any]]:
    """Extra columns of a dataset, described from its first record."""
    specs = {name: S.extra_spec_for(name, np.asarray(v)) for name, v in chunk.extras.items()}
    if chunk.infos is not None:
        specs[INFOS] = {"dtype": S.JSON_DTYPE, "shape": []}
    return specs


def _episode_of(chunk: EpisodeChunk, g: GroupSettings) -> SingleAgentEpisode:
    """Check a decoded chunk against the spaces and extra columns; as an episode (t_start = t_started)."""
    n = len(chunk)
    obs = _fit_batch(chunk.obs, n + 1, g.observation_space, "observations")
    actions = _fit_batch(chunk.actions, n, g.action_space, "actions")
    wanted = {k for k in g.extra_columns if k != INFOS}
    if set(chunk.extras) != wanted:
        raise EpisodeStateError(f"extra_model_outputs {sorted(chunk.extras)} differ from the dataset's {sorted(wanted)}")
    extras: dict[str, Any] = {}
    for name in wanted:
        spec = g.extra_columns[name]
        values = np.asarray(chunk.extras[name])
        target = values.astype(spec["dtype"])
        if values.shape[1:] != tuple(spec["shape"]) or not np.array_equal(target, values, equal_nan=True):
            raise EpisodeStateError(f"extra_model_outputs.{name}: {values.dtype}{values.shape[1:]} does not fit {spec}")
        extras[name] = target
    if INFOS in g.extra_columns:
        infos = chunk.infos if chunk.infos is not None else [None] * n
        extras[INFOS] = [json.dumps(to_jsonable(i)) for i in infos]
    return SingleAgentEpisode(
        id=chunk.id, obs=obs, actions=actions, rewards=chunk.rewards, terminated=chunk.terminated,
        truncated=chunk.truncated, t_start=chunk.t_started, agent_id=chunk.agent_id, module_id=chunk.module_id,
        extras=extras,
    )


def _fit_batch(batch: Any, n: int, space: Any, what: str) -> Any:
    if batch_len(batch) != n:
        raise EpisodeStateError(f"{what}: {batch_len(batch)} entries, expected {n}")
    values = [fit_value(_item(batch, i), space, f"{what}[{i}]") for i in range(n)]
    out = empty_batch(space, n)
    return _fill(out, values)


def _item(batch: Any, i: int) -> Any:
    if isinstance(batch, dict):
        return {k: _item(v, i) for k, v in batch.items()}
    if isinstance(batch, tuple):
        return tuple(_item(v, i) for v in batch)
    return batch[i]


def _fill(out: Any, values: Sequence[Any]) -> Any:
    if isinstance(out, dict):
        return {k: _fill(v, [x[k] for x in values]) for k, v in out.items()}
    if isinstance(out, tuple):
        return tuple(_fill(v, [x[j] for x in values]) for j, v in enumerate(out))
    for i, v in enumerate(values):
        out[i] = v
    return out


def read_piece(pieces: pa.Table, *, settings: ChunkSettings) -> pa.Table:
    """``map_batches`` function: decode the records of (file, row group) pieces into chunk rows."""
    return pa.concat_tables([_read_one(p["file_index"], p["row_group"], p["row_offset"], settings)
                             for p in pieces.to_pylist()])


def _read_one(file_index: int, row_group: int, row_offset: int, settings: ChunkSettings) -> pa.Table:
    g = settings.group
    table = pq.ParquetFile(settings.files[file_index]).read_row_group(row_group, columns=[ITEM_COLUMN])
    episodes, keys, errors, sigs = [], [], [], []
    for i, raw in enumerate(table.column(ITEM_COLUMN).to_pylist()):
        try:
            if raw is None:
                raise EpisodeStateError("item is null")
            ep = _episode_of(chunk_from_state(decode_state(raw, settings.limits)), g)
            keys.append(f"{ep.id}\x1f{ep.agent_id or ''}")
            sigs.append(digest(ep.obs, ep.actions, ep.rewards, np.array([ep.terminated, ep.truncated, ep.t_start]),
                               *[np.asarray(ep.extras[k]) for k in sorted(ep.extras)]))
            errors.append(None)
        except (EpisodeStateError, PackedDecodeError, ValueError, TypeError, KeyError) as exc:
            ep = _placeholder(g, f"\x00bad {file_index}:{row_offset + i}")
            keys.append(ep.id)
            sigs.append(b"")
            errors.append(row_error(decode_reason(exc), f"{type(exc).__name__}: {exc}"))
        episodes.append(ep)
    out = episodes_to_table(episodes, g.observation_space, g.action_space, g.extra_columns)
    n = len(episodes)
    return (
        out.append_column(KEY, pa.array(keys, pa.string()))
        .append_column(FILE, pa.array([file_index] * n, pa.int32()))
        .append_column(ROW, pa.array(np.arange(row_offset, row_offset + n), pa.int64()))
        .append_column(ERROR, pa.array(errors, pa.string()))
        .append_column(SIG, pa.array(sigs, pa.binary()))
    )


def _placeholder(g: GroupSettings, key: str) -> SingleAgentEpisode:
    extras = {n: ([] if s["dtype"] in (S.JSON_DTYPE, "string") else np.zeros((0, *s["shape"]), s["dtype"]))
              for n, s in g.extra_columns.items()}
    return SingleAgentEpisode(id=key, obs=empty_batch(g.observation_space, 1), actions=empty_batch(g.action_space, 0),
                              rewards=np.zeros(0, np.float32), extras=extras)


def join_group(group: pa.Table, *, settings: ChunkSettings) -> pa.Table:
    """``map_groups`` function: one episode's chunk rows -> its episode row(s), or quarantine records."""
    g, paths = settings.group, settings.files
    group = group.sort_by([(FILE, "ascending"), (ROW, "ascending")])
    key = group.column(KEY)[0].as_py()
    files, rows = group.column(FILE).to_pylist(), group.column(ROW).to_pylist()
    errors = group.column(ERROR).to_pylist()
    eps_id = key.split("\x1f")[0]

    def quarantine(reason: str, message: str) -> pa.Table:
        recs = group_records(paths, files, rows, errors, reason, message,
                             eps_id=None if key.startswith("\x00") else eps_id)
        return quarantine_row(key, recs, g)

    if any(errors):
        return quarantine("partly_unreadable", "episode dropped whole: another of its records is unreadable")
    chunks = table_to_episodes(group.drop_columns([KEY, FILE, ROW, ERROR, SIG]), g.observation_space,
                               g.action_space, g.extra_columns)
    sigs = group.column(SIG).to_pylist()
    order = sorted(range(len(chunks)), key=lambda i: (chunks[i].t_start, files[i], rows[i]))
    kept: list[int] = []
    duplicates = 0
    for i in order:
        if kept and chunks[i].t_start == chunks[kept[-1]].t_start:
            if sigs[i] == sigs[kept[-1]]:
                duplicates += 1
                continue
            return quarantine("overlap", f"records {paths[files[i]]}:{rows[i] + 1} and "
                              f"{paths[files[kept[-1]]]}:{rows[kept[-1]] + 1} hold different data for the same chunk (t_started={chunks[i].t_start})")
        if kept:
            prev = chunks[kept[-1]]
            if prev.terminated or prev.truncated:
                return quarantine("ended_early", f"chunk at t={chunks[i].t_start} follows a chunk that ended the episode")
            if chunks[i].t_start != prev.t_start + len(prev):
                return quarantine("gap" if chunks[i].t_start > prev.t_start + len(prev) else "overlap",
                                  f"chunk starts at t={chunks[i].t_start}, previous chunk ends at "
                                  f"t={prev.t_start + len(prev)} (missing or overlapping chunk)")
            if digest(batch_slice(prev.obs, len(prev), len(prev) + 1)) != digest(batch_slice(chunks[i].obs, 0, 1)):
                return quarantine("obs_mismatch", f"chunk at t={chunks[i].t_start} does not start from the previous chunk's last obs")
        kept.append(i)
    joined = [chunks[i] for i in kept]
    for j, c in enumerate(joined):
        c.chunk_index = j
    episode = SingleAgentEpisode.concat(joined)
    episode.chunk_index = 0
    by_recording = not (episode.terminated or episode.truncated)
    episode.truncated = episode.truncated or by_recording
    return output_rows(episode, g, duplicates=duplicates, by_recording=by_recording)
