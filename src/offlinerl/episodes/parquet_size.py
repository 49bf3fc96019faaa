"""How many bytes a parquet file's columns decode to, known before a row is read.

A parquet file of a kilobyte can decode to gigabytes (a decompression bomb): a million copies of one 2 KB string
are one dictionary value and a run of equal indices, a million zeros one run. Every reader of parquet files that
someone else wrote (``convert table``, ``convert rllib-parquet``, the validator, the scans, ``load_episodes``)
therefore sizes the file first, from what it can read cheaply:

- the footer: each leaf column of each row group decodes to its values × their width in the Arrow type pyarrow
  builds (the file's Arrow schema; else :data:`WIDTH` of its parquet type), plus the offsets of its
  variable-size lists, or to its uncompressed pages if more. A null under a fixed-size list still gets the
  list's whole size (a 700-byte file of 100,000 null ``fixed_size_list<uint8>[1000]`` decodes to 100 MB), so
  the chunk's null count counts that many times over (every value, if the footer records no null count);
- the dictionaries: a dictionary-encoded text or binary leaf is read as its dictionary and one index per value
  (no more than the footer counted), and what the indices refer to is added up.

:func:`check_parquet_size` charges those sizes, footer first (every row group), then the dictionaries' text, to a
budget and stops at the first that does not fit. The budget is a plug point (:class:`SizeBudget`): converters
pass their ``DecodeLimits`` budget (``max(--max-value-bytes, 64 × the file's size)``, the flag in its message);
dataset readers use :class:`FileBudget`, which refuses only a file that would decode to more than
:data:`DATASET_FLOOR_BYTES` *and* more than :data:`DATASET_MAX_EXPANSION` times its size on disk.

A footer that misstates its values' counts, null counts or sizes is not caught here (pyarrow trusts it too).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator, Protocol, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

__all__ = ["WIDTH", "DATASET_FLOOR_BYTES", "DATASET_MAX_EXPANSION", "SizeBudget", "FileBudget",
           "ParquetTooLargeError", "row_group_bytes", "dictionary_text_bytes", "decoded_sizes",
           "check_parquet_size"]

#: Bytes per value in Arrow of each parquet physical type (byte arrays: the offset; their text is counted apart).
WIDTH = {"BOOLEAN": 1, "INT32": 4, "FLOAT": 4, "INT64": 8, "DOUBLE": 8, "INT96": 12, "BYTE_ARRAY": 4}
#: A dataset file may always decode to this much (256 MiB), whatever its size on disk.
DATASET_FLOOR_BYTES = 256 * 1024 * 1024
#: ... and beyond the floor to this many times its size on disk. Numbers compress far better than text: the
#: shipped datasets decode to 1-3x their files, but rendered frames of CartPole (white, a cart and a pole)
#: decode to 1,218x as uint8 and 4,014x as float32 (measured), so 64x (``convert``'s factor) would refuse real
#: pixel datasets; the bombs this is for decode to around a million times their size.
DATASET_MAX_EXPANSION = 16384


class SizeBudget(Protocol):
    """What a file may still decode to; ``DecodeBudget`` (``offlinerl.convert.limits``) is one."""

    def charge_many(self, nbytes: int, what: str, record: str = "record") -> None:
        """Count ``nbytes`` (of many values); raise a ``ValueError`` naming ``what`` if they do not fit."""


class ParquetTooLargeError(ValueError):
    """A parquet file would decode to more than its budget allows; it was not read."""

    def __init__(self, message: str, *, file: str, file_bytes: int, decoded_bytes: int, cap_bytes: int) -> None:
        super().__init__(message)
        self.file, self.file_bytes, self.decoded_bytes, self.cap_bytes = file, file_bytes, decoded_bytes, cap_bytes

    def named(self) -> ParquetTooLargeError:
        """The same error, its message starting with the file's path (for readers that name no file otherwise)."""
        return ParquetTooLargeError(f"{self.file}: {self}", file=self.file, file_bytes=self.file_bytes,
                                    decoded_bytes=self.decoded_bytes, cap_bytes=self.cap_bytes)


def _mib(n: int) -> str:
    return f"{n / 1024**2:.0f} MiB" if n >= 1024**2 else f"{n:,} bytes"


class FileBudget:
    """A dataset file's budget: ``max(floor_bytes, max_expansion × its size on disk)`` decoded bytes in all."""

    def __init__(self, path: str | Path, *, floor_bytes: int = DATASET_FLOOR_BYTES,
                 max_expansion: int = DATASET_MAX_EXPANSION) -> None:
        self.path, self.file_bytes = str(path), os.path.getsize(path)
        self.floor_bytes, self.max_expansion = floor_bytes, max_expansion
        self.total = max(floor_bytes, max_expansion * self.file_bytes)
        self.used = 0

    def charge_many(self, nbytes: int, what: str, record: str = "file") -> None:
        """Count ``nbytes``; :class:`ParquetTooLargeError` (nothing counted) if the file's total would pass its cap."""
        if nbytes > self.total - self.used:
            before = f", {self.used:,} of them already counted" if self.used else ""
            raise ParquetTooLargeError(
                f"{what} would decode to {nbytes:,} bytes; this {record} of {self.file_bytes:,} bytes may decode to "
                f"at most {self.total:,} bytes in all (the larger of {_mib(self.floor_bytes)} and "
                f"{self.max_expansion}x its size){before}, so it was not read: a decompression bomb, or data far "
                f"more repetitive than a recording (docs/safety.md, \"Hostile input: bounded resources\")",
                file=self.path, file_bytes=self.file_bytes, decoded_bytes=self.used + nbytes, cap_bytes=self.total)
        self.used += nbytes


def _leaves(pf: pq.ParquetFile, columns: Sequence[str] | None) -> list[int]:
    """Indices of the parquet leaf columns under the top-level ``columns`` (all of them for None)."""
    schema = pf.metadata.schema
    return [i for i in range(len(schema)) if columns is None or schema.column(i).path.split(".")[0] in columns]


def _arrow_path(schema: pa.Schema, path: str) -> tuple[pa.DataType, list[tuple[int, int | None]]] | None:
    """The Arrow type pyarrow builds for the parquet leaf ``path`` (``obs.list.element.list.element``) and, for
    each list level above it, outermost first, ``(offset bytes, fixed size or None)``; None if the path does
    not follow the schema (then the footer's physical types are used)."""
    parts = path.split(".")
    if parts[0] not in schema.names:
        return None
    t, i, levels = schema.field(parts[0]).type, 1, []
    while True:
        while isinstance(t, pa.ExtensionType) or pa.types.is_dictionary(t):
            t = t.storage_type if isinstance(t, pa.ExtensionType) else t.value_type
        if pa.types.is_map(t):
            if parts[i + 1:i + 2] not in (["key"], ["value"]):
                return None
            levels.append((4, None))
            t, i = (t.key_type if parts[i + 1] == "key" else t.item_type), i + 2
        elif pa.types.is_fixed_size_list(t) or pa.types.is_list(t) or pa.types.is_large_list(t):
            fixed = t.list_size if pa.types.is_fixed_size_list(t) else None
            levels.append((8 if pa.types.is_large_list(t) else 4, fixed))
            t, i = t.value_type, i + 2
        elif pa.types.is_struct(t):
            if i >= len(parts) or t.get_field_index(parts[i]) < 0:
                return None
            t, i = t.field(parts[i]).type, i + 1
        else:
            return (t, levels) if i == len(parts) else None


def _arrow_width(t: pa.DataType) -> int | None:
    """Bytes per value of a leaf of Arrow type ``t`` (text and binary: the offset), None if not known."""
    if pa.types.is_large_string(t) or pa.types.is_large_binary(t):
        return 8
    if pa.types.is_string(t) or pa.types.is_binary(t):
        return 4
    try:
        return max(1, (t.bit_width + 7) // 8)
    except ValueError:  # not a fixed-width type
        return None


def _leaf_bytes(leaf: pq.ColumnSchema, chunk: pq.ColumnChunkMetaData, arrow: tuple | None, rows: int) -> int:
    """About the most bytes one leaf column chunk decodes to in Arrow: its values × their width, and the offsets
    of its variable-size list levels. A null (or empty) slot under fixed-size lists still gets their whole size
    of values (``[None] * n`` of ``fixed_size_list<uint8>[1000]`` is ``n`` slots but ``1000 n`` bytes), so the
    chunk's null count (all slots, if it records none) counts that many times the fixed sizes."""
    values = chunk.num_values
    kind = leaf.physical_type
    width = leaf.length if kind == "FIXED_LEN_BYTE_ARRAY" else WIDTH.get(kind, 8)
    if arrow is None:  # a path pyarrow's schema does not show: by the footer's types, 4 more per repeated value
        return values * (width + (4 if leaf.max_repetition_level else 0))
    leaf_type, levels = arrow
    width = _arrow_width(leaf_type) or width
    fixed = 1
    for _, size in levels:
        fixed *= size if size is not None else 1
    if fixed > 1:
        stats = chunk.statistics
        nulls = stats.null_count if stats is not None and stats.has_null_count else values
        values = values - min(nulls, values) + min(nulls, values) * fixed
    offsets, parents = 0, rows  # lists at each level: a row holds one; no level holds more than the values
    for offset_bytes, size in levels:
        if size is None:
            offsets += offset_bytes * (min(parents, values) + 1)
            parents = values
        else:
            parents = min(parents * size, values)
    return values * width + offsets


def row_group_bytes(pf: pq.ParquetFile, row_group: int, columns: Sequence[str] | None = None) -> tuple[int, list[str]]:
    """From the footer: about the most bytes the leaves of ``columns`` (all for None) in one row group decode to
    in Arrow (each leaf: the larger of its uncompressed pages and :func:`_leaf_bytes`), text values of
    dictionary-encoded leaves excepted; and the paths of those leaves (their text is
    :func:`dictionary_text_bytes`)."""
    schema, group = pf.metadata.schema, pf.metadata.row_group(row_group)
    arrow_schema = pf.schema_arrow
    total, dictionary = 0, []
    for i in _leaves(pf, columns):
        leaf, chunk = schema.column(i), group.column(i)
        arrow = _arrow_path(arrow_schema, leaf.path)
        total += max(chunk.total_uncompressed_size, _leaf_bytes(leaf, chunk, arrow, group.num_rows))
        if leaf.physical_type == "BYTE_ARRAY" and chunk.has_dictionary_page:
            dictionary.append(leaf.path)
    return total, dictionary


def _text_bytes(array: pa.Array) -> int:
    """Bytes the dictionary-encoded text leaves of ``array`` hold once expanded (what each value refers to)."""
    if isinstance(array, pa.DictionaryArray):
        lengths = pc.binary_length(array.dictionary) if len(array.dictionary) else pa.array([], pa.int32())
        return int(pc.sum(pc.take(lengths, array.indices)).as_py() or 0) if len(array) else 0
    if isinstance(array, pa.MapArray):
        return _text_bytes(array.keys) + _text_bytes(array.items)
    if isinstance(array, (pa.ListArray, pa.LargeListArray, pa.FixedSizeListArray)):
        return _text_bytes(array.flatten())
    if isinstance(array, pa.StructArray):
        return sum(_text_bytes(array.field(i)) for i in range(array.type.num_fields))
    return 0


def dictionary_text_bytes(path: str | Path, row_group: int, paths: Sequence[str]) -> int:
    """Read the dictionary-encoded text leaves ``paths`` of one row group as dictionaries (their values once, and
    one index per value: no more than the footer counted) and count what they expand to."""
    tops = list(dict.fromkeys(p.split(".")[0] for p in paths))
    with pq.ParquetFile(str(path), read_dictionary=list(paths)) as pf:
        table = pf.read_row_group(row_group, columns=tops)
    return sum(_text_bytes(chunk) for column in table.columns for chunk in column.chunks)


def decoded_sizes(path: str | Path, columns: Sequence[str] | None = None,
                  pf: pq.ParquetFile | None = None) -> Iterator[tuple[str, int]]:
    """``(what, bytes)`` that ``columns`` (all for None) of the file decode to: every row group from the footer
    first, then the text of each row group's dictionary-encoded leaves (read only as far as it is iterated)."""
    pf = pf or pq.ParquetFile(str(path))
    meta = pf.metadata
    groups = meta.num_row_groups
    named = f"; columns {', '.join(columns)}" if columns is not None else ""

    def what(g: int) -> str:
        return (f"row group {g + 1} of {groups} ({meta.row_group(g).num_rows:,} of the file's {meta.num_rows:,} "
                f"rows{named})")

    sized = [row_group_bytes(pf, g, columns) for g in range(groups)]
    for g, (nbytes, _) in enumerate(sized):
        yield what(g), nbytes
    for g, (_, paths) in enumerate(sized):
        if paths:
            yield f"the text values of {what(g)}", dictionary_text_bytes(path, g, paths)


def check_parquet_size(path: str | Path, columns: Sequence[str] | None = None, *, budget: SizeBudget | None = None,
                       pf: pq.ParquetFile | None = None) -> None:
    """Charge what ``columns`` (all for None) of the parquet file at ``path`` decode to against ``budget``
    (:class:`FileBudget` of the file if None), footer sizes first: the budget's error (for :class:`FileBudget`,
    :class:`ParquetTooLargeError`) at the first that does not fit, before anything of that size is read.
    ``pf``: the file already opened."""
    budget = budget if budget is not None else FileBudget(path)
    for what, nbytes in decoded_sizes(path, columns, pf):
        budget.charge_many(nbytes, what, record="file")
