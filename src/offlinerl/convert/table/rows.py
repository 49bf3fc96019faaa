"""Reading step tables (CSV, JSON lines, parquet) into typed step rows, one Ray task per file.

Every row keeps its file and 1-based position, counted as an editor shows it:
``line`` in CSV and JSON-lines files (the CSV header is line 1, so the first
data row is line 2; a quoted cell spanning lines counts at the line where its
row ends; blank JSON lines are skipped but counted), ``row`` in parquet files
(the first row is row 1). A cell that cannot be read gives the row an error
(``reason\\tmessage``) instead of a value; a missing cell gives a null, which
the episode stage refuses in a step row (``missing_value``) but accepts in
the final-observation row. A row's group is its episode id (``_key``) and,
with the spec's ``agent`` column, its agent id (``_agent``). Files are read by
:mod:`offlinerl.convert.table.sources` (encoding, JSON nesting and size
checks: one bad line never ends the file).

Numbers are read strictly: ``1_000`` (Python's digit separators) is not a
number (``non_numeric``); an integer beyond float64, or with more digits than
Python converts, and a step index beyond int64 are ``number_out_of_range``.
"""

from __future__ import annotations

import csv
import json
import math
import sys
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pyarrow as pa

from offlinerl.convert.limits import DecodeLimits
from offlinerl.convert.quarantine import raw_excerpt
from offlinerl.convert.table.sources import (
    BAD_ENCODING, BLOCK_ROWS, OUT_OF_RANGE, CellError, LongInteger, bad_text, load_json, read_records,
)
from offlinerl.convert.table.spec import TableSpec

__all__ = ["ReadSettings", "CellError", "row_schema", "read_file", "position_key", "obs_col", "next_col",
           "group_keys", "KEY", "AGENT", "FILE", "POS", "ERROR", "RAW", "STEP", "ACTION", "ACTION_INT", "REWARD",
           "TERM", "TRUNC", "LOGP", "NO_EPISODE"]

KEY, AGENT, FILE, POS, ERROR, RAW, STEP = "_key", "_agent", "_file", "_pos", "_error", "_raw", "_step"
ACTION, ACTION_INT, REWARD, TERM, TRUNC, LOGP = "_a", "_a_int", "_reward", "_term", "_trunc", "_logp"
#: Group key (episode and agent) of rows whose episode id or agent id cannot be read (quarantined, never an
#: episode).
NO_EPISODE = "\x00(rows without a readable episode id)"
_BLOCK_ROWS = BLOCK_ROWS
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_TRUE, _FALSE = {"true", "1", "t", "yes", "1.0"}, {"false", "0", "f", "no", "0.0"}


def obs_col(key: str) -> str:
    """Row-table column of one observation leaf."""
    return f"_o/{key}"


def next_col(key: str) -> str:
    """Row-table column of one next-observation leaf."""
    return f"_n/{key}"


def group_keys(spec: TableSpec) -> list[str]:
    """The row-table columns an episode is grouped by: the episode id, and the agent id with ``agent``."""
    return [KEY, AGENT] if spec.agent else [KEY]


def position_key(path: str) -> str:
    """``row`` for parquet files, ``line`` for text files (the quarantine record's position key)."""
    return "row" if path.endswith(".parquet") else "line"


@dataclass(frozen=True)
class ReadSettings:
    """What a read task needs (picklable)."""

    spec: TableSpec
    """The column mapping."""
    files: tuple[str, ...]
    """All input files (index = file position)."""
    limits: DecodeLimits = field(default_factory=DecodeLimits)
    """Caps on a cell, a JSON line and what a parquet file may decode to (``--max-value-bytes``)."""


def row_schema(spec: TableSpec) -> pa.Schema:
    """Arrow schema of the typed step rows (the input of the group-by)."""
    step_type = pa.int64() if spec.step_kind == "index" else pa.float64()
    vec = pa.list_(pa.float64())
    fields = [pa.field(k, pa.string()) for k in group_keys(spec)]
    fields += [pa.field(FILE, pa.int32()), pa.field(POS, pa.int64()),
              pa.field(ERROR, pa.string()), pa.field(RAW, pa.string()), pa.field(STEP, step_type)]
    fields += [pa.field(obs_col(k), vec) for k, _ in spec.observation.leaves]
    if spec.next_observation:
        fields += [pa.field(next_col(k), vec) for k, _ in spec.next_observation.leaves]
    fields += [pa.field(ACTION, vec), pa.field(ACTION_INT, pa.bool_()), pa.field(REWARD, pa.float64()),
               pa.field(TERM, pa.bool_()), pa.field(TRUNC, pa.bool_()), pa.field(LOGP, pa.float64())]
    return pa.schema(fields)


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, str) and not v.strip())


def _shown(v: Any) -> str:
    """``repr(v)``, cut to 80 characters (a cell may be megabytes long)."""
    text = repr(v)
    return text if len(text) <= 80 else f"{text[:60]}... ({len(text):,} characters)"


def _number(v: Any, col: str, finite: bool) -> tuple[float, bool]:
    """A cell as a float and whether it was written as an integer."""
    if isinstance(v, LongInteger):
        raise CellError(OUT_OF_RANGE, f"column {col!r}: an integer of {v.digits:,} digits (more than the "
                                      f"{sys.get_int_max_str_digits():,} Python converts)")
    if isinstance(v, bool) or not isinstance(v, (int, float, str, np.number)):
        raise CellError("non_numeric", f"column {col!r}: {_shown(v)} is not a number")
    if isinstance(v, str):
        text = v.strip()
        if "_" in text:  # float() and int() read 1_000 as 1000; no table writer means that
            raise CellError("non_numeric", f"column {col!r}: {_shown(v)} is not a number (no '_' in numbers)")
        try:
            x = float(text)
        except ValueError:
            raise CellError("non_numeric", f"column {col!r}: {_shown(v)} is not a number") from None
        is_int = text.lstrip("+-").isdigit()
        if is_int and math.isinf(x):
            raise CellError(OUT_OF_RANGE, f"column {col!r}: an integer of {len(text.lstrip('+-')):,} digits is "
                                          "beyond the range of a float64")
    else:
        is_int = isinstance(v, (int, np.integer))
        try:
            x = float(v)
        except OverflowError:
            raise CellError(OUT_OF_RANGE, f"column {col!r}: the integer {_shown(v)} is beyond the range of a "
                                          "float64") from None
    if math.isnan(x):
        raise CellError("nan", f"column {col!r} is NaN")
    if finite and math.isinf(x):
        raise CellError("non_finite", f"column {col!r} is {x} (must be finite)")
    return x, is_int


def _vector(row: dict, cols: tuple[str, ...], finite: bool, ragged: bool = False) -> tuple[list[float] | None, bool]:
    """One leaf's values (None if every cell is missing) and whether all were written as integers. ``ragged``
    (a table of agents, which may differ in width): empty cells after the last value end the vector there."""
    cells = [row.get(c) for c in cols]
    if all(_missing(c) for c in cells):
        return None, False
    if ragged and len(cols) > 1:
        end = len(cells) - next(i for i, c in enumerate(reversed(cells)) if not _missing(c))
        cols, cells = cols[:end], cells[:end]
    if any(_missing(c) for c in cells):
        missing = [c for c, v in zip(cols, cells) if _missing(v)]
        raise CellError("missing_value", f"column {missing[0]!r} is empty")
    if len(cols) == 1:
        v = cells[0]
        if isinstance(v, str) and v.strip().startswith("["):
            try:
                v = load_json(v)
            except CellError as exc:
                raise CellError(exc.reason, f"column {cols[0]!r}: {exc}") from None
            except json.JSONDecodeError:
                raise CellError("non_numeric", f"column {cols[0]!r}: {_shown(v)} is not a JSON list") from None
        if isinstance(v, (list, tuple, np.ndarray)):
            try:
                flat = np.asarray(v, dtype=object).ravel().tolist()
            except ValueError:
                raise CellError("wrong_width", f"column {cols[0]!r}: a ragged nested list") from None
            if any(isinstance(x, (list, tuple)) for x in flat):
                raise CellError("wrong_width", f"column {cols[0]!r}: a ragged nested list")
            parsed = [_number(x, cols[0], finite) for x in flat]
            return [x for x, _ in parsed], all(i for _, i in parsed)
        cells = [v]
    parsed = [_number(v, c, finite) for v, c in zip(cells, cols)]
    return [x for x, _ in parsed], all(i for _, i in parsed)


def _flag(v: Any, col: str) -> bool | None:
    if _missing(v):
        return None
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    text = str(v).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise CellError("bad_flag", f"column {col!r}: {_shown(v)} is not a boolean (true/false, 1/0)")


def _id(v: Any, col: str, what: str) -> str:
    """An episode or agent id: text (stripped) or an integer, as text."""
    if isinstance(v, str) and v.strip():
        broken = bad_text(v)
        if broken:
            raise CellError(BAD_ENCODING, f"column {col!r}: {broken}")
        return v.strip()
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return str(int(v))
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    raise CellError(f"bad_{what}_id", f"column {col!r}: {_shown(v)} is not an {what} id (text or integer)")


def _group(row: dict, spec: TableSpec) -> dict[str, str]:
    """The row's group: its episode id and, with ``agent``, its agent id."""
    out = {KEY: _id(row.get(spec.episode_id), spec.episode_id, "episode")}
    if spec.agent:
        out[AGENT] = _id(row.get(spec.agent), spec.agent, "agent")
    return out


def _no_group(spec: TableSpec) -> dict[str, str]:
    """The group of rows whose episode or agent cannot be read."""
    return {k: NO_EPISODE for k in group_keys(spec)}


def _step(v: Any, col: str, kind: str) -> int | float:
    if _missing(v):
        raise CellError("missing_value", f"column {col!r} (the step) is empty")
    if kind == "timestamp" and isinstance(v, str):
        try:
            x, _ = _number(v, col, True)
            return x
        except CellError as exc:
            if exc.reason == OUT_OF_RANGE:
                raise
            try:
                return datetime.fromisoformat(v.strip()).timestamp()
            except ValueError:
                raise CellError("bad_step", f"column {col!r}: {_shown(v)} is not a timestamp") from None
    if isinstance(v, datetime):
        if kind == "timestamp":
            return v.timestamp()
        raise CellError("bad_step", f"column {col!r}: {v} is a timestamp, not an integer step index "
                                    f"(declare step: {{column: {col}, kind: timestamp}})")
    try:
        x, is_int = _number(v, col, True)
    except CellError as exc:
        if exc.reason == OUT_OF_RANGE:
            raise
        hint = " (no '_' in numbers)" if isinstance(v, str) and "_" in v else ""
        raise CellError("bad_step", f"column {col!r}: {_shown(v)} is not a step {kind}{hint}") from None
    if kind == "index":
        if not x.is_integer():
            raise CellError("bad_step", f"column {col!r}: {_shown(v)} is not an integer step index")
        exact = int(v) if isinstance(v, (int, np.integer)) else int(v.strip()) if is_int else int(x)
        if not _INT64_MIN <= exact <= _INT64_MAX:
            raise CellError(OUT_OF_RANGE, f"column {col!r}: step {_shown(v)} is beyond the int64 range")
        return exact
    return x


def parse_row(row: dict, spec: TableSpec) -> dict[str, Any]:
    """The typed values of one table row (``CellError`` on the first cell that cannot be read)."""
    out: dict[str, Any] = _group(row, spec)
    out[STEP] = _step(row.get(spec.step), spec.step, spec.step_kind)
    for key, cols in spec.observation.leaves:
        out[obs_col(key)], _ = _vector(row, cols, finite=False, ragged=bool(spec.agent))
    for key, cols in (spec.next_observation.leaves if spec.next_observation else ()):
        out[next_col(key)], _ = _vector(row, cols, finite=False, ragged=bool(spec.agent))
    out[ACTION], out[ACTION_INT] = _vector(row, spec.action.leaves[0][1], finite=True, ragged=bool(spec.agent))
    reward = row.get(spec.reward)
    out[REWARD] = None if _missing(reward) else _number(reward, spec.reward, True)[0]
    out[TERM] = _flag(row.get(spec.terminated.column), spec.terminated.column) if spec.terminated.column else None
    out[TRUNC] = _flag(row.get(spec.truncated.column), spec.truncated.column) if spec.truncated.column else None
    out[LOGP] = None
    col = spec.logp_column
    if col and not _missing(row.get(col)):
        x, _ = _number(row[col], col, True)
        if spec.propensity:
            if not 0 < x <= 1:
                raise CellError("bad_propensity", f"column {col!r}: {x} is not a probability in (0, 1]")
            x = math.log(x)
        out[LOGP] = x
    return out


def _typed(row: dict, error: str | None, spec: TableSpec) -> dict[str, Any]:
    """The typed values of one row, or its episode id (when readable) and its error."""
    try:
        if error is not None:
            raise CellError(*error.split("\t", 1))
        return parse_row(row, spec)
    except Exception as exc:  # noqa: BLE001 - no row may stop its file: a CellError, or anything unforeseen
        out = {ERROR: f"{exc.reason}\t{exc}" if isinstance(exc, CellError)
               else f"unreadable\t{type(exc).__name__}: {exc}"[:2000]}
        try:
            out.update(_group(row, spec))
        except Exception:  # noqa: BLE001 - no readable episode or agent id: the row is quarantined on its own
            pass
        return out


def read_file(batch: pa.Table, settings: ReadSettings) -> Iterator[pa.Table]:
    """Ray ``map_batches`` function: one file index in, blocks of typed step rows out.

    A file that cannot be read, or lacks a spec column, becomes one row with ``_pos`` null and the error.
    """
    spec, schema = settings.spec, row_schema(settings.spec)
    for index in batch.column("file_index").to_pylist():
        path, rows = settings.files[index], []
        empty = {f.name: None for f in schema}
        try:
            for pos, row, raw, error in read_records(path, spec.used_columns, settings.limits):
                out = {**empty, **_no_group(spec), FILE: index, POS: pos, ERROR: error,
                       RAW: raw_excerpt(raw)["raw"] if raw is not None else None}
                if row is not None:
                    out.update(_typed(row, error, spec))
                rows.append(out)
                if len(rows) >= _BLOCK_ROWS:
                    yield pa.Table.from_pylist(rows, schema=schema)
                    rows = []
        except CellError as exc:
            rows.append({**empty, **_no_group(spec), FILE: index, ERROR: f"{exc.reason}\t{exc}"})
        except (OSError, UnicodeDecodeError, csv.Error, pa.ArrowException, ValueError, OverflowError) as exc:
            rows.append({**empty, **_no_group(spec), FILE: index,
                         ERROR: f"unreadable_file\t{type(exc).__name__}: {exc}"})
        if rows:
            yield pa.Table.from_pylist(rows, schema=schema)


def find_table_files(inputs: list[str]) -> list[Path]:
    """Files, directories (searched recursively) and globs of ``.csv``, ``.parquet``, ``.jsonl``/``.json``."""
    import glob

    suffixes = (".csv", ".parquet", ".jsonl", ".json")
    found: set[Path] = set()
    for item in inputs:
        p = Path(item)
        matches = [p] if p.exists() else [Path(m) for m in glob.glob(str(item), recursive=True)]
        if not matches:
            raise FileNotFoundError(f"{item}: no such file, directory or glob match")
        for m in matches:
            if m.is_dir():
                found.update(f for f in m.rglob("*") if f.is_file() and f.suffix in suffixes
                             and not any(part.startswith((".", "_")) for part in f.relative_to(m).parts))
            elif m.is_file():
                found.add(m)
    files = sorted(f.resolve() for f in found)
    if not files:
        raise FileNotFoundError(f"no .csv/.parquet/.jsonl/.json files under {', '.join(inputs)}")
    return files
