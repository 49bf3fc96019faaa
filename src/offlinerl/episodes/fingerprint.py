"""Content fingerprints of episode datasets, and the lineage entries that name them.

A **fingerprint** identifies what a dataset holds, not how it is stored. Every row (one episode or chunk) is
hashed on its logical values: the bookkeeping columns (episode id, chunk index, start step, agent, module,
flags) and, per step, every leaf value of ``obs``, ``actions``, ``rewards`` and each extra column, with
its dtype and null mask (BLAKE2b, 32 bytes). The row digests are **summed** modulo 2^256, so neither the
order of the rows nor the number or names of the parquet files changes the result; the sum, the row
count, the spaces and the extra columns' specs are then hashed once more (SHA-256). Rewriting the same
rows into 1 or 40 files gives the same fingerprint; changing one reward, one flag or one id changes it.
Splitting an episode into chunks differently is a different set of rows, and so a different fingerprint.

A **lineage** entry records one step that made a dataset: ``{"operation", "parameters", "parents" (their
fingerprints), "parent_paths", "fingerprint" (of the result), "tool" ("offlinerl X.Y"), "created_at"}``.
``dataset.json`` keeps the chain (the parents' entries first), at most :data:`MAX_LINEAGE` entries.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pyarrow as pa

from offlinerl.episodes import schema as S

__all__ = ["FINGERPRINT_VERSION", "MAX_LINEAGE", "RowHasher", "table_digests", "combine", "lineage_entry",
           "extend_lineage", "format_lineage", "is_fingerprint", "unit_digests", "files_fingerprint", "dataset_fingerprint"]

#: Mixed into every fingerprint: bumped if what is hashed ever changes.
FINGERPRINT_VERSION = 1
#: Most lineage entries kept in ``dataset.json`` (the oldest are dropped first).
MAX_LINEAGE = 256
_MOD = 1 << 256
_SCALARS = (S.EPISODE_ID, S.CHUNK_INDEX, S.T_START, S.AGENT_ID, S.MODULE_ID, S.TERMINATED, S.TRUNCATED)


def is_fingerprint(value: Any) -> bool:
    """Whether ``value`` has a fingerprint's form (64 lower-case hex digits)."""
    return isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)


def _per_row(values: np.ndarray, n: int) -> np.ndarray:
    """``values`` (n * k leading entries) as n rows of k (also for n = 0 or k = 0)."""
    return values.reshape(n, values.size // n if n else 0)


def _leaves(arr: pa.Array) -> list[tuple[str, np.ndarray, np.ndarray | None]]:
    """``(dtype, values (n, k) or (n,), nulls or None)`` per leaf of an array of n step values."""
    n = len(arr)
    nulls = arr.is_null().to_numpy(zero_copy_only=False) if arr.null_count else None
    tp = arr.type
    if pa.types.is_struct(tp):
        out = []
        for i in range(tp.num_fields):
            out += _leaves(arr.field(i))  # (a child of a slice is sliced too)
        return out + ([("struct-nulls", nulls, None)] if nulls is not None else [])
    if pa.types.is_fixed_size_list(tp):
        size = tp.list_size
        values = arr.values.slice(arr.offset * size, n * size)
        return [(dt, _per_row(v, n), None if m is None else _per_row(m, n)) for dt, v, m in _leaves(values)] + (
            [("list-nulls", nulls, None)] if nulls is not None else [])
    if pa.types.is_string(tp) or pa.types.is_large_string(tp) or pa.types.is_binary(tp):
        return [("str", np.asarray(arr.to_pylist(), dtype=object), None)]
    values = arr.to_numpy(zero_copy_only=False)
    return [(str(values.dtype), values, nulls)]


def _row_ranges(col: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """Step values and per-row offsets (n + 1) into them, of a list column."""
    offsets = col.offsets.to_numpy().astype(np.int64)
    values = col.values.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))
    return values, offsets - offsets[0]


class RowHasher:
    """Per-row digests of tables of episode rows (any subset of the columns; all of them for a fingerprint)."""

    def __init__(self, *, exclude: Sequence[str] = ()) -> None:
        self.exclude = frozenset(exclude)
        """Columns left out (``dedup`` compares content without ``episode_id``)."""

    def digests(self, table: pa.Table | pa.RecordBatch) -> list[bytes]:
        """One 32-byte digest per row."""
        if isinstance(table, pa.RecordBatch):
            table = pa.Table.from_batches([table])
        names = sorted(n for n in table.column_names if n not in self.exclude)
        hashers = [hashlib.blake2b(digest_size=32) for _ in range(table.num_rows)]
        scalars = [n for n in _SCALARS if n in names]
        rows = zip(*[table.column(n).to_pylist() for n in scalars]) if scalars else ([] for _ in hashers)
        for h, values in zip(hashers, rows):
            h.update(json.dumps([scalars, list(values)]).encode())
        for name in names:
            if name in _SCALARS:
                continue
            col = table.column(name).combine_chunks()
            if not (pa.types.is_list(col.type) or pa.types.is_large_list(col.type)):
                for h, v in zip(hashers, col.to_pylist()):
                    h.update(json.dumps([name, v], default=str).encode())
                continue
            row_nulls = col.is_null().to_numpy(zero_copy_only=False) if col.null_count else None
            values, offsets = _row_ranges(col)
            leaves = _leaves(values)
            for i, h in enumerate(hashers):
                a, b = int(offsets[i]), int(offsets[i + 1])
                h.update(f"|{name}:{b - a}:{bool(row_nulls[i]) if row_nulls is not None else False}".encode())
                for dtype, data, nulls in leaves:
                    h.update(dtype.encode())
                    part = data[a:b]
                    h.update("\x1f".join(map(str, part)).encode() if dtype == "str" else
                             np.ascontiguousarray(part).tobytes())
                    if nulls is not None:
                        h.update(np.packbits(nulls[a:b]).tobytes())
        return [h.digest() for h in hashers]


def table_digests(table: pa.Table | pa.RecordBatch) -> tuple[int, int]:
    """``(sum of the row digests mod 2^256, rows)`` of a table: the part of a fingerprint one table makes."""
    total = 0
    digests = RowHasher().digests(table)
    for d in digests:
        total = (total + int.from_bytes(d, "big")) % _MOD
    return total, len(digests)


def combine(parts: Iterable[tuple[int, int]], *, observation_space: Mapping[str, Any],
            action_space: Mapping[str, Any], extra_columns: Mapping[str, Any],
            agent_spaces: Mapping[str, Any] | None = None) -> str:
    """The fingerprint (64 hex digits) of a dataset whose tables gave ``parts`` (:func:`table_digests`); the
    spaces are their JSON forms (``agent_spaces``: ``dataset.json``'s, when its agents' spaces differ)."""
    total = rows = 0
    for part_sum, part_rows in parts:
        total = (total + part_sum) % _MOD
        rows += part_rows
    header = [FINGERPRINT_VERSION, dict(observation_space), dict(action_space),
              {k: dict(v) for k, v in sorted(extra_columns.items())}, rows, f"{total:064x}"]
    if agent_spaces is not None:
        header.append(dict(agent_spaces))
    return hashlib.sha256(json.dumps(header, sort_keys=True).encode()).hexdigest()


def lineage_entry(operation: str, *, parameters: Mapping[str, Any] | None = None,
                  parents: Sequence[str | None] = (), parent_paths: Sequence[str] = ()) -> dict[str, Any]:
    """A lineage entry for ``operation`` (its ``fingerprint`` is filled in by the writer)."""
    from offlinerl import __version__

    return {"operation": operation, "parameters": dict(parameters or {}), "parents": list(parents),
            "parent_paths": [str(p) for p in parent_paths], "fingerprint": None,
            "tool": f"offlinerl {__version__}",
            "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}


def extend_lineage(parent_lineages: Sequence[Sequence[Mapping[str, Any]]],
                   entry: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The parents' lineages (each entry once, in order) followed by ``entry``; the newest :data:`MAX_LINEAGE`."""
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for lineage in parent_lineages:
        for item in lineage:
            key = json.dumps(item, sort_keys=True, default=str)
            if key not in seen:
                seen.add(key)
                out.append(dict(item))
    out.append(dict(entry))
    return out[-MAX_LINEAGE:]


def unit_digests(unit: Any) -> dict[str, Any]:
    """``{"sum": hex, "rows": n}`` of one scan unit (a Ray Data task of :func:`dataset_fingerprint`)."""
    from offlinerl.episodes.scan import iter_unit_batches

    total = rows = 0
    for _, batch in iter_unit_batches(unit):
        part, n = table_digests(batch)
        total, rows = (total + part) % _MOD, rows + n
    return {"sum": f"{total:x}", "rows": rows}


def files_fingerprint(files: Sequence[Any], *, observation_space: Mapping[str, Any],
                      action_space: Mapping[str, Any], extra_columns: Mapping[str, Any],
                      agent_spaces: Mapping[str, Any] | None = None) -> str:
    """The fingerprint of the rows of parquet ``files``, read as a Ray Data job (one task per row group); files of
    at most ``scan.LOCAL_SCAN_MAX_BYTES`` in all are read in this process (a writer's small output: the Ray Data
    job's task start-up took ~3 s of a small conversion). Raises ``ValueError`` naming a file that cannot be read."""
    from offlinerl.episodes.scan import plan_units, run_units, small_files

    units, unreadable = plan_units(files)
    if unreadable:
        f, err = next(iter(unreadable.items()))
        raise ValueError(f"{f}: cannot be read as parquet ({err})")
    parts = []
    for payload in run_units(units, unit_digests, desc="fingerprinting", local=small_files(files)):
        if "read_error" in payload:
            raise ValueError(f"{payload['unit']['file']}: cannot be read ({payload['read_error']})")
        parts.append((int(payload["sum"], 16), payload["rows"]))
    return combine(parts, observation_space=observation_space, action_space=action_space,
                   extra_columns=extra_columns, agent_spaces=agent_spaces)


def dataset_fingerprint(path: Any) -> str:
    """The fingerprint of the dataset at ``path`` computed from its rows (what ``dataset.json`` should record)."""
    from offlinerl.episodes.info import read_info
    from offlinerl.episodes.io import parquet_files
    from offlinerl.episodes.spaces import space_to_json

    info = read_info(path)
    return files_fingerprint(parquet_files(path), observation_space=space_to_json(info.observation_space),
                             action_space=space_to_json(info.action_space), extra_columns=info.extra_columns)


def format_lineage(lineage: Sequence[Mapping[str, Any]]) -> str:
    """The lineage as lines: ``operation parameters <- parents -> fingerprint``."""
    if not lineage:
        return "lineage: none recorded"
    lines = [f"lineage ({len(lineage)} step(s), oldest first):"]
    for e in lineage:
        params = ", ".join(f"{k}={v}" for k, v in (e.get("parameters") or {}).items())
        parents = ", ".join(str(p)[:12] for p in e.get("parents") or [] if p) or "-"
        out = str(e.get("fingerprint") or "?")[:12]
        lines.append(f"  {e.get('operation', '?')}({params})  from {parents}  -> {out}  "
                     f"[{e.get('tool', '?')}, {e.get('created_at', '?')}]")
    return "\n".join(lines)
