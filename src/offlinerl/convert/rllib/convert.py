"""Convert RLlib new-API-stack parquet recordings into an episode dataset.

Two layouts are detected from the first readable file:

- ``columns`` (``output_write_episodes=False``): one row per env step with
  ``eps_id, agent_id, module_id, obs, actions, rewards, new_obs, terminateds,
  truncateds`` and extra model outputs; ``obs``/``new_obs`` usually packed by
  RLlib's ``pack()``. See :mod:`offlinerl.convert.rllib.columns`.
- ``episodes`` (``output_write_episodes=True``): one binary column ``item``
  holding a msgpack episode state per row. See :mod:`offlinerl.convert.rllib.chunks`.

Every file is sized from its footer and dictionaries before a row is read
(:func:`offlinerl.episodes.parquet_size.check_parquet_size`): one whose columns
would decode to more than ``max(max_value_bytes, 64 × its size)`` is
quarantined whole (``too_large``, level ``file``) and the others convert.
Both layouts run as Ray Data jobs: read (file, row group) pieces with
``map_batches``, group rows by episode with ``groupby(...).map_groups``,
materialise, then write atomically. Unreadable records are quarantined to
``OUT/_quarantine/records.jsonl`` and counted; exact re-writes of steps or
chunks (RLlib may write rows again at each flush) are dropped and counted;
anything overlapping but different is quarantined, never merged.
"""

from __future__ import annotations

import glob
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import gymnasium as gym
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from offlinerl.convert.rllib import chunks as rllib_chunks, columns as rllib_columns
from offlinerl.convert.limits import DEFAULT_MAX_VALUE_BYTES, DecodeLimits, ValueTooLargeError
from offlinerl.convert.packing import PackedDecodeError, unpack_any
from offlinerl.convert.grouped import (
    BY_RECORDING, DUPLICATES, QUARANTINE, STATUS, STEPS, GroupSettings, sort_shuffle, write_grouped,
)
from offlinerl.convert.rllib.common import record
from offlinerl.convert.rllib.msgpack import EpisodeStateError, chunk_from_state, decode_state, space_from_rllib
from offlinerl.convert.rllib.step_columns import extra_specs, plain
from offlinerl.convert.report import ConversionReport
from offlinerl.convert.spaces import env_spaces
from offlinerl.episodes import schema as S
from offlinerl.episodes.atomic import atomic_directory, check_output, refuse_quarantine_over_existing
from offlinerl.episodes.io import DEFAULT_MAX_STEPS_PER_ROW
from offlinerl.episodes.parquet_size import check_parquet_size

__all__ = ["ConversionReport", "convert_rllib_parquet", "find_parquet_files", "detect_layout"]

CONVERTER = "offlinerl.convert.rllib.convert"


def find_parquet_files(inputs: str | Path | Sequence[str | Path]) -> list[Path]:
    """Files, directories (searched recursively for ``*.parquet``) or globs -> files sorted by path."""
    items = [inputs] if isinstance(inputs, (str, Path)) else list(inputs)
    found: set[Path] = set()
    for item in items:
        p = Path(item)
        if p.is_dir():
            found.update(f for f in p.rglob("*.parquet") if f.is_file())
        elif p.is_file():
            found.add(p)
        else:
            matches = [Path(m) for m in glob.glob(str(item), recursive=True)]
            if not matches:
                raise FileNotFoundError(f"{item}: no such file, directory or glob match")
            for m in matches:
                found.update(m.rglob("*.parquet") if m.is_dir() else [m])
    files = sorted(f.resolve() for f in found)
    if not files:
        raise FileNotFoundError(f"no *.parquet files under {', '.join(map(str, items))}")
    return files


def detect_layout(schema: pa.Schema) -> str:
    """``episodes`` for a binary ``item`` column, ``columns`` for per-step rows; else ValueError."""
    names = set(schema.names)
    item = rllib_chunks.ITEM_COLUMN
    if item in names and (pa.types.is_binary(schema.field(item).type) or pa.types.is_large_binary(schema.field(item).type)):
        return "episodes"
    if {"eps_id", "obs", "actions"} <= names:
        return "columns"
    raise ValueError(f"not an RLlib new-stack recording: columns {sorted(names)} (expected 'item', or eps_id/obs/actions/...)")


def _first_chunk(files: Sequence[Path], limits: DecodeLimits, need_spaces: bool, limit: int = 1000):
    """The first decodable episode record, with its recorded spaces if needed (to learn spaces and extra columns)."""
    seen, first_error = 0, None
    for f in files:
        for raw in _items(f):
            seen += 1
            try:
                state = decode_state(raw, limits)
                spaces = (space_from_rllib(state["_observation_space"], limits),
                          space_from_rllib(state["_action_space"], limits)) if need_spaces else (None, None)
                return spaces, chunk_from_state(state)
            except (EpisodeStateError, ValueError, TypeError, KeyError) as exc:
                first_error = first_error or f"{f}: {type(exc).__name__}: {exc}"
            if seen >= limit:
                break
    raise ValueError(f"none of the first {seen} episode records could be decoded (first problem: {first_error})")


def _items(path: Path):
    """The ``item`` values of one file, read row group by row group in small blocks."""
    with pq.ParquetFile(path) as pf:
        for batch in pf.iter_batches(batch_size=64, columns=[rllib_chunks.ITEM_COLUMN]):
            yield from batch.column(0).to_pylist()


def _infer_column_spaces(files: Sequence[Path], limits: DecodeLimits) -> tuple[gym.Space, gym.Space, list[str]]:
    head = next(pq.ParquetFile(files[0]).iter_batches(batch_size=100, columns=["obs", "actions"]))
    first, value = None, None
    for i, obs in enumerate(head.column("obs").to_pylist()):  # the first row whose obs decodes
        try:
            packed = isinstance(obs, (str, bytes))
            value = np.asarray(unpack_any(obs, limits.budget(len(obs))) if packed else obs)
        except (PackedDecodeError, ValueError, TypeError):
            continue
        first = pa.Table.from_batches([head]).slice(i, 1)
        break
    if first is None or value is None or value.dtype.kind not in "fiub":
        raise ValueError(f"cannot infer the observation space from {files[0]}: pass --env or --observation-space")
    obs_space = gym.spaces.Box(-np.inf, np.inf, shape=value.shape, dtype=value.dtype)
    act_type = plain(first.column("actions")).type
    if pa.types.is_integer(act_type):
        import ray.data

        per_file = ray.data.from_items([{"path": str(f)} for f in files]).map_batches(
            _max_action, batch_format="pyarrow", batch_size=1).take_all()  # no aggregate: it would shuffle
        top = max((r["max"] for r in per_file if r["max"] is not None), default=0)
        act_space: gym.Space = gym.spaces.Discrete(int(top) + 1)
    else:
        a = np.asarray(first.column("actions")[0].as_py(), dtype=np.float32)
        act_space = gym.spaces.Box(-np.inf, np.inf, shape=a.shape, dtype=np.float32)
    notes = [f"spaces inferred from the data: observation {obs_space}, action {act_space} "
             "(pass --env or --observation-space/--action-space for the real bounds)"]
    return obs_space, act_space, notes


def _max_action(batch: pa.Table) -> pa.Table:
    """Largest action of each file (to infer a Discrete action space)."""
    tops = []
    for path in batch.column("path").to_pylist():
        try:
            with pq.ParquetFile(path) as pf:  # row group by row group
                found = [pc.max(pf.read_row_group(g, columns=["actions"]).column(0)).as_py()
                         for g in range(pf.metadata.num_row_groups)]
            tops.append(max((x for x in found if x is not None), default=None))
        except (OSError, pa.ArrowException, KeyError):  # unreadable files are quarantined by the conversion
            tops.append(None)
    return pa.table({"max": pa.array(tops, pa.int64())})


@dataclass
class _Scan:
    """What the footers of the input files say: readable files, their row-group pieces, the layout."""

    layout: str | None = None
    readable: list[str] = field(default_factory=list)
    pieces: list[dict[str, int]] = field(default_factory=list)
    rows: int = 0
    quarantine: list[dict[str, Any]] = field(default_factory=list)


def _scan(files: Sequence[Path], limits: DecodeLimits) -> _Scan:
    """Footers first: each file's layout, and its size once decoded (a file over its budget is not read)."""
    scan = _Scan()
    for f in files:
        try:
            with pq.ParquetFile(f) as pf:
                meta = pf.metadata
                layout = detect_layout(meta.schema.to_arrow_schema())
                read = None if layout == "columns" else (rllib_chunks.ITEM_COLUMN,)  # what read_piece reads
                check_parquet_size(f, read, budget=limits.budget(os.path.getsize(f)), pf=pf)
        except ValueTooLargeError as exc:
            scan.quarantine.append(record(str(f), None, "file", "too_large", str(exc)))
            continue
        except (OSError, pa.ArrowException, ValueError) as exc:
            scan.quarantine.append(record(str(f), None, "file", "unreadable_file",
                                          f"unreadable file: {type(exc).__name__}: {exc}"))
            continue
        scan.layout = scan.layout or layout
        if layout != scan.layout:
            scan.quarantine.append(record(str(f), None, "file", "layout_mismatch",
                                          f"file has the {layout} layout, the recording the {scan.layout} layout"))
            continue
        offset = 0
        for g in range(meta.num_row_groups):
            scan.pieces.append({"file_index": len(scan.readable), "row_group": g, "row_offset": offset})
            offset += meta.row_group(g).num_rows
        scan.readable.append(str(f))
        scan.rows += meta.num_rows
    if scan.layout is None:
        raise ValueError(f"none of the {len(files)} parquet files is a readable RLlib recording "
                         f"(first problem: {scan.quarantine[0]['message']})")
    return scan


def _spaces_from(report: ConversionReport, source: str) -> None:
    """Record where the spaces came from, unless a stronger source (given > env > recording) already did."""
    if report.observation_space_from == "inferred":
        report.observation_space_from = report.action_space_from = source


def _settings(scan: _Scan, report: ConversionReport, observation_space: gym.Space | None,
              action_space: gym.Space | None, max_steps_per_row: int, limits: DecodeLimits) -> GroupSettings:
    """Spaces (given > env > recording or inferred) and extra columns; notes go to the report."""
    files = [Path(p) for p in scan.readable]
    if scan.layout == "episodes":
        need_spaces = observation_space is None or action_space is None
        (recorded_obs, recorded_act), chunk = _first_chunk(files, limits, need_spaces)
        _spaces_from(report, "recording (episode state spaces)")
        observation_space = observation_space or recorded_obs
        action_space = action_space or recorded_act
        extra_columns = rllib_chunks.extra_specs_of(chunk)
    else:
        schema = pq.read_schema(files[0])
        head = next(pq.ParquetFile(files[0]).iter_batches(batch_size=1), None)
        first_rows = pa.Table.from_batches([head]) if head is not None else schema.empty_table()
        extra_columns, notes = extra_specs(schema, first_rows, limits)
        report.notes += notes
        if observation_space is None or action_space is None:
            inferred_obs, inferred_act, notes = _infer_column_spaces(files, limits)
            observation_space, action_space = observation_space or inferred_obs, action_space or inferred_act
            report.notes += notes
            _spaces_from(report, "inferred from the data")
    return GroupSettings(observation_space, action_space, extra_columns, max_steps_per_row)


def convert_rllib_parquet(
    inputs: str | Path | Sequence[str | Path],
    output: str | Path,
    *,
    env_id: str | None = None,
    env_kwargs: dict[str, Any] | None = None,
    observation_space: gym.Space | None = None,
    action_space: gym.Space | None = None,
    max_steps_per_row: int = DEFAULT_MAX_STEPS_PER_ROW,
    overwrite: bool = False,
    allow_quarantine: bool = False,
    max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES,
) -> ConversionReport:
    """Convert an RLlib new-stack recording (either layout) into an episode dataset at ``output``.

    ``overwrite`` replaces an existing dataset (never an input or anything else, see ``atomic_directory``),
    but not when records were quarantined unless ``allow_quarantine`` (``QuarantineKeptError``).
    ``max_value_bytes`` caps one decoded value (a packed column, an array of an episode record;
    :mod:`offlinerl.convert.limits`); a record over it is quarantined.
    """
    import ray.data

    limits = DecodeLimits(max_value_bytes=max_value_bytes)
    files = find_parquet_files(inputs)
    items = [inputs] if isinstance(inputs, (str, Path)) else list(inputs)
    input_paths = [*files, *(Path(item) for item in items if Path(item).is_dir())]
    check_output(output, overwrite, kind="dataset", inputs=input_paths)
    scan = _scan(files, limits)
    report = ConversionReport(
        source_format=f"RLlib new-stack parquet ({scan.layout} layout)",
        record_unit="step rows" if scan.layout == "columns" else "episode records",
        output=str(Path(output).resolve()), files=len(files), files_unreadable=len(scan.quarantine),
        records_read=scan.rows, details={"layout": scan.layout},
    )
    report.notes += [f"file not read: {r['file']}: {r['reason']}: {r['message']}" for r in scan.quarantine]
    quarantine, readable, pieces = scan.quarantine, scan.readable, scan.pieces
    env_spec = None
    if observation_space is not None and action_space is not None:
        _spaces_from(report, "given")
    if env_id:
        env = env_spaces(env_id, env_kwargs)
        env_obs, env_act, env_spec = env.observation_space, env.action_space, env.env_spec
        observation_space, action_space = observation_space or env_obs, action_space or env_act
        _spaces_from(report, f"env {env_id}")
    group = _settings(scan, report, observation_space, action_space, max_steps_per_row, limits)
    layout = scan.layout

    if layout == "episodes":
        settings: Any = rllib_chunks.ChunkSettings(group, tuple(readable), limits)
        read_fn, group_fn = rllib_chunks.read_piece, rllib_chunks.join_group
    else:
        settings = rllib_columns.StepSettings(group, tuple(readable), limits)
        read_fn, group_fn = rllib_columns.read_piece, rllib_columns.stitch_group
    with sort_shuffle():
        ds = (
            ray.data.from_items(pieces)
            .map_batches(read_fn, batch_size=1, batch_format="pyarrow", fn_kwargs={"settings": settings})
            .groupby("_key", num_partitions=max(1, min(len(pieces), 64)))
            .map_groups(group_fn, batch_format="pyarrow", fn_kwargs={"settings": settings})
            .materialize()
        )
    _tally(ds, report, quarantine)
    with atomic_directory(output, overwrite, kind="dataset", inputs=input_paths) as tmp:
        refuse_quarantine_over_existing(output, len(quarantine), allow_quarantine, episodes=report.rows)
        _write(ds, tmp, report, quarantine, group, env_id, env_spec, readable)
    return report


def _tally(ds, report: ConversionReport, quarantine: list[dict]) -> None:
    columns = [STATUS, QUARANTINE, DUPLICATES, BY_RECORDING, STEPS, S.TERMINATED, S.TRUNCATED, S.CHUNK_INDEX]
    for batch in ds.select_columns(columns).iter_batches(batch_format="pyarrow", batch_size=4096):
        for row in batch.to_pylist():
            records = json.loads(row[QUARANTINE]) if row[QUARANTINE] else []
            quarantine.extend(records)
            if row[STATUS] != "ok":
                report.add_episode_reason(records[0]["reason"] if records else "unknown")
                continue
            report.rows += 1
            report.steps += row[STEPS]
            report.duplicate_records += row[DUPLICATES]
            report.episodes_with_duplicates += row[DUPLICATES] > 0
            if row[S.TERMINATED]:
                report.terminated += 1
            if row[S.TRUNCATED]:
                report.truncated += 1
                report.truncated_by_recording += row[BY_RECORDING]
    for rec in quarantine:
        if rec["row"] is not None:
            report.add_record_reason(rec["reason"])


def _write(ds, tmp: Path, report: ConversionReport, quarantine: list[dict], group: GroupSettings,
           env_id: str | None, env_spec: dict | None, sources: Sequence[str]) -> None:
    """Write the dataset, its quarantine file and ``dataset.json`` into the output's temporary directory."""
    provenance = {
        "converter": CONVERTER,
        "source_format": f"rllib-newstack-parquet ({report.details['layout']} layout)",
        "sources": list(sources) if len(sources) <= 100 else list(sources[:100]) + [f"... {len(sources) - 100} more"],
    }
    write_grouped(ds, tmp, report, quarantine, group, env_id=env_id, env_spec=env_spec, provenance=provenance)
