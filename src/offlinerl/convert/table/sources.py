"""One step-table file -> its records ``(position, row or None, raw text or None, error or None)``, read so that
no record can stop the others being read and no few bytes can become gigabytes.

An error is ``"reason\\tmessage"``; :mod:`offlinerl.convert.table.rows` types the rows. What is refused here:

- **Text that is not UTF-8** (CSV, JSON lines): the line is a record with ``bad_encoding`` (naming the byte and
  the column or the byte's place in the line) and the next line is read as usual. A leading UTF-8 byte-order
  mark (spreadsheets' "CSV UTF-8") is skipped; a UTF-16 file is refused whole with ``bad_encoding``.
- **JSON** (a JSON-lines record, a list written in a cell): nested more than
  :data:`~offlinerl.convert.limits.MAX_JSON_DEPTH` levels, ``too_deep`` (Python's parser would recurse until
  ``RecursionError``); an integer longer than Python reads (4,300 digits) becomes a :class:`LongInteger`, which
  the row parser refuses as ``number_out_of_range``.
- **Size** (``DecodeLimits``, ``--max-value-bytes``): a CSV cell or JSON line longer than ``max_value_bytes``,
  ``too_large`` (a long JSON line is skipped in chunks, never held whole). A parquet file is sized from its
  footer before a row is read (fixed-width values × width; dictionary-encoded text by reading its dictionaries
  and indices only; :mod:`offlinerl.episodes.parquet_size`): a file whose spec columns would decode to more than
  ``max(max_value_bytes, max_expansion × the file's size)`` is refused whole (``too_large``, level ``file``).
  Parquet rows are then read row group by row group, in blocks.

A file-wide problem (missing column, UTF-16, a parquet file over its cap) raises :class:`CellError`.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import sys
from dataclasses import dataclass
from typing import Any, Iterator

import pyarrow.parquet as pq

from offlinerl.convert.limits import MAX_JSON_DEPTH, TOO_LARGE, DecodeLimits, ValueTooLargeError, json_too_deep
from offlinerl.convert.samplebatch.files import FileRange, LongLine, iter_range_lines
from offlinerl.episodes.parquet_size import check_parquet_size

__all__ = ["CellError", "LongInteger", "load_json", "bad_text", "read_records", "BAD_ENCODING", "TOO_DEEP",
           "OUT_OF_RANGE"]

#: Quarantine reasons given here.
BAD_ENCODING, TOO_DEEP, OUT_OF_RANGE = "bad_encoding", "too_deep", "number_out_of_range"
Record = tuple[int, "dict | None", "str | None", "str | None"]
BLOCK_ROWS = 4096
_BOM = b"\xef\xbb\xbf"
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
_SAVE_AS_UTF8 = "the file must be UTF-8: save or export it as UTF-8"


class CellError(ValueError):
    """A cell that cannot be read: ``reason`` is the quarantine code."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class LongInteger:
    """A JSON integer with more digits than Python converts (``sys.get_int_max_str_digits``), not converted."""

    digits: int
    """How many digits it has."""


def _int(text: str) -> int | LongInteger:
    limit = sys.get_int_max_str_digits()
    digits = len(text.lstrip("-"))
    return LongInteger(digits) if limit and digits > limit else int(text)


def load_json(text: str) -> Any:
    """``json.loads`` for untrusted text: :class:`CellError` ``too_deep`` when arrays and objects nest more than
    ``MAX_JSON_DEPTH`` levels, :class:`LongInteger` for an integer too long to convert (not a ``ValueError``);
    ``json.JSONDecodeError`` for text that is not JSON."""
    if json_too_deep(text):
        raise CellError(TOO_DEEP, f"JSON nested more than {MAX_JSON_DEPTH} levels deep")
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise
    except ValueError:  # "Exceeds the limit (4300 digits) for integer string conversion": parse again, marking it
        return json.loads(text, parse_int=_int)


def bad_text(value: Any) -> str | None:
    """Why a text value (or one inside a list or dict) is not UTF-8 text, or None: a byte that was not UTF-8
    (kept as a surrogate escape when decoded) or a lone surrogate (a JSON ``\\ud800`` escape)."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
            return None
        except UnicodeEncodeError as exc:
            code = ord(value[exc.start])
            return (f"byte 0x{code - 0xDC00:02x} is not UTF-8" if 0xDC80 <= code <= 0xDCFF
                    else f"\\u{code:04x} (a lone surrogate) is not a character")
    items = value.items() if isinstance(value, dict) else value if isinstance(value, list) else ()
    for item in items:
        found = bad_text(item)
        if found:
            return found
    return None


def read_records(path: str, columns: tuple[str, ...], limits: DecodeLimits) -> Iterator[Record]:
    """The records of one file (CSV, parquet, else JSON lines), positions 1-based as an editor shows them."""
    if path.endswith(".parquet"):
        return _parquet(path, columns, limits)
    if path.endswith(".csv"):
        return _csv(path, columns, limits)
    return _json_lines(path, limits)


@contextlib.contextmanager
def _csv_field_limit(n: int):
    """Let the csv module read cells of up to ``n`` characters (its own limit is 131,072; ours is checked per
    cell, so that a long cell is one quarantined line, not the end of the file)."""
    old = csv.field_size_limit(max(n + 1, csv.field_size_limit()))
    try:
        yield
    finally:
        csv.field_size_limit(old)


def _csv(path: str, columns: tuple[str, ...], limits: DecodeLimits) -> Iterator[Record]:
    with open(path, "rb") as probe:
        if probe.read(2) in _UTF16_BOMS:
            raise CellError(BAD_ENCODING, f"the file is UTF-16 (it starts with a UTF-16 byte-order mark); "
                                          f"{_SAVE_AS_UTF8}")
    cap = limits.max_value_bytes
    with open(path, newline="", encoding="utf-8-sig", errors="surrogateescape") as f, _csv_field_limit(cap):
        reader = csv.DictReader(f)
        missing = [c for c in columns if c not in (reader.fieldnames or ())]
        if missing:
            broken = bad_text(list(reader.fieldnames or ()))
            raise CellError("missing_column", f"the header has no column {missing[0]!r}"
                            + (f" (in the header, {broken}; {_SAVE_AS_UTF8})" if broken else ""))
        for row in reader:
            raw = json.dumps(row)
            yield reader.line_num, row, raw, _csv_problem(row, cap, limits)


def _csv_problem(row: dict, cap: int, limits: DecodeLimits) -> str | None:
    """The error of one CSV row: a cell not UTF-8, a cell over the cap, another number of cells than the header."""
    for name, value in row.items():
        cells = value if isinstance(value, list) else [value]
        for cell in cells:
            if cell is None:
                continue
            where = f"column {name!r}" if name is not None else "a cell after the last column"
            broken = bad_text(cell)
            if broken:
                return f"{BAD_ENCODING}\t{where}: {broken} ({_SAVE_AS_UTF8})"
            if len(cell) > cap:
                return f"{TOO_LARGE}\t{limits.value_error(f'{where}: the cell', len(cell))}"
    if None in row or any(v is None for v in row.values()):
        return "wrong_width\tthe line has another number of cells than the header"
    return None


def _json_lines(path: str, limits: DecodeLimits) -> Iterator[Record]:
    n = 0
    for _, line in iter_range_lines(FileRange(0, path, 0, -1), limits.max_value_bytes):
        n += 1
        if isinstance(line, LongLine):
            raw = line.head.decode("utf-8", "backslashreplace") + "..."
            yield n, None, raw, f"{TOO_LARGE}\t{limits.value_error('the line', line.length)}"
            continue
        if n == 1 and line.startswith(_BOM):
            line = line[len(_BOM):]
        if not line.strip():
            continue
        yield _json_line(n, line)


def _json_line(n: int, line: bytes) -> Record:
    raw = line.decode("utf-8", "backslashreplace").rstrip("\r\n")
    try:
        text, broken = line.decode("utf-8"), None
    except UnicodeDecodeError as exc:
        text = line.decode("utf-8", "surrogateescape")
        broken = f"byte 0x{line[exc.start]:02x} (byte {exc.start + 1} of the line) is not UTF-8 ({_SAVE_AS_UTF8})"
    try:
        row = load_json(text)
    except CellError as exc:
        return n, None, raw, f"{BAD_ENCODING}\t{broken}" if broken else f"{exc.reason}\t{exc}"
    except json.JSONDecodeError as exc:
        return n, None, raw, f"{BAD_ENCODING}\t{broken}" if broken else f"bad_json\tnot a JSON object: {exc}"
    if not isinstance(row, dict):
        return n, None, raw, f"{BAD_ENCODING}\t{broken}" if broken else "bad_json\tnot a JSON object"
    if broken is None and "\\ud" in text.lower():  # escapes of lone surrogates decode to text Arrow cannot hold
        found = bad_text(row)
        broken = f"{found} ({_SAVE_AS_UTF8})" if found else None
    return n, row, raw, f"{BAD_ENCODING}\t{broken}" if broken else None


def _check_parquet_size(pf: pq.ParquetFile, path: str, columns: tuple[str, ...], limits: DecodeLimits) -> None:
    """Refuse the file (:class:`CellError` ``too_large``) if its spec columns decode to more than its budget:
    the footer's sizes of every row group first, then the text of dictionary-encoded leaves
    (:func:`offlinerl.episodes.parquet_size.check_parquet_size`)."""
    try:
        check_parquet_size(path, columns, budget=limits.budget(os.path.getsize(path)), pf=pf)
    except ValueTooLargeError as exc:
        raise CellError(TOO_LARGE, str(exc)) from None


def _parquet(path: str, columns: tuple[str, ...], limits: DecodeLimits) -> Iterator[Record]:
    pf = pq.ParquetFile(path)
    missing = [c for c in columns if c not in pf.schema_arrow.names]
    if missing:
        raise CellError("missing_column", f"the file has no column {missing[0]!r}")
    _check_parquet_size(pf, path, columns, limits)
    pos = 0
    for g in range(pf.metadata.num_row_groups):
        for batch in pf.iter_batches(batch_size=BLOCK_ROWS, row_groups=[g], columns=list(columns)):
            for row in batch.to_pylist():
                pos += 1
                yield pos, row, None, None
