"""Whole-dataset scans as Ray Data jobs: one task per parquet row group.

``validate`` and ``inspect`` both read every row of a dataset that may be larger
than memory. Each row group of each parquet file is one *unit* of work. The
driver reads only the file footers and text dictionaries (to plan the units, to
name a file whose footer is corrupt, and to refuse one that would decode to far
more than it holds: :mod:`offlinerl.episodes.parquet_size`); a Ray Data
``map_batches`` task then streams the rows of its unit with pyarrow in small
record batches and returns a small JSON payload (per-row bookkeeping tuples,
counts, partial statistics). The driver merges the payloads as they arrive.

Why units instead of ``ray.data.read_parquet``: a unit knows exactly which file
and which row (within that file) each value came from, whatever block sizes
Ray picks; a corrupt or oddly typed file fails only its own units (reported by
name) instead of the whole job; and files with different schemas (which a
validator must expect) are each read with their own schema.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from offlinerl.episodes.parquet_size import ParquetTooLargeError, check_parquet_size

__all__ = ["ScanUnit", "plan_units", "iter_unit_batches", "run_units", "READ_ERRORS"]

#: Exceptions that mean "these bytes are not a readable parquet file".
READ_ERRORS = (OSError, pa.ArrowException, ValueError, EOFError)

#: Rows per record batch inside a unit (episodes can be long: keep this small).
BATCH_ROWS = 64
#: A dataset of up to this many parquet bytes is scanned in the command's own process (:func:`scan_locally`).
LOCAL_SCAN_MAX_BYTES = 64 * 2**20


def scan_locally(files: Sequence[str | Path] | str | Path) -> bool:
    """Whether a command's scan of ``files`` (or of a dataset directory's parquet files) runs in its own process
    instead of as a Ray Data job: no cluster is named (``RAY_ADDRESS``, which ``--address`` sets), Ray is not running
    here already, and the files hold at most :data:`LOCAL_SCAN_MAX_BYTES` (starting Ray takes longer than scanning
    them: ~5 s on 2 cores)."""
    if os.environ.get("RAY_ADDRESS"):
        return False
    if "ray" in sys.modules and sys.modules["ray"].is_initialized():
        return False
    return small_files(files)


def small_files(files: Sequence[str | Path] | str | Path) -> bool:
    """Whether ``files`` (or a dataset directory's parquet files) hold at most :data:`LOCAL_SCAN_MAX_BYTES`: few
    enough that one process reads them faster than a Ray Data job starts its tasks (False if one cannot be sized)."""
    try:
        if isinstance(files, (str, Path)):
            files = sorted(Path(files).glob("*.parquet"))
        return sum(Path(f).stat().st_size for f in files) <= LOCAL_SCAN_MAX_BYTES
    except OSError:
        return False


@dataclass(frozen=True)
class ScanUnit:
    """One row group of one parquet file."""

    file: str
    """Path of the parquet file."""
    row_group: int
    """Index of the row group inside the file."""
    row_offset: int
    """Index (within the file) of the first row of this row group."""
    num_rows: int
    """Rows in this row group."""


def plan_units(files: Sequence[str | Path], *,
               too_large: dict[str, str] | None = None) -> tuple[list[ScanUnit], dict[str, str]]:
    """Read the footers of ``files``: the units to scan, and ``{file: error}`` for unreadable ones.

    A file that would decode to far more than it holds (:func:`~offlinerl.episodes.parquet_size.check_parquet_size`
    with the dataset files' :class:`~offlinerl.episodes.parquet_size.FileBudget`) gets no units either: its
    message goes to ``too_large`` if given, else to the errors.
    """
    units: list[ScanUnit] = []
    errors: dict[str, str] = {}
    for f in files:
        try:
            with pq.ParquetFile(str(f)) as pf:
                meta = pf.metadata
                check_parquet_size(f, pf=pf)
        except ParquetTooLargeError as exc:
            (errors if too_large is None else too_large)[str(f)] = str(exc)
            continue
        except READ_ERRORS as exc:
            errors[str(f)] = _describe(exc)
            continue
        offset = 0
        for i in range(meta.num_row_groups):
            n = meta.row_group(i).num_rows
            units.append(ScanUnit(str(f), i, offset, n))
            offset += n
    return units, errors


def iter_unit_batches(unit: ScanUnit, columns: Sequence[str] | None = None) -> Iterator[tuple[int, pa.RecordBatch]]:
    """Stream ``(row index within the file of the first row, record batch)`` over one unit."""
    offset = unit.row_offset
    with pq.ParquetFile(unit.file) as pf:
        for batch in pf.iter_batches(
            batch_size=BATCH_ROWS, row_groups=[unit.row_group], columns=list(columns) if columns else None
        ):
            yield offset, batch
            offset += batch.num_rows


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else 'unreadable'}"


def _payload(unit: ScanUnit, fn: Callable[[ScanUnit], dict[str, Any]], node: str | None) -> str:
    """``fn(unit)`` (or its read error) with the unit and the node, as JSON."""
    try:
        payload = fn(unit)
    except READ_ERRORS as exc:
        payload = {"read_error": _describe(exc)}
    payload["unit"] = asdict(unit)
    payload["node"] = node
    return json.dumps(payload)


def _apply(batch: dict[str, np.ndarray], fn: Callable[[ScanUnit], dict[str, Any]]) -> dict[str, np.ndarray]:
    from offlinerl.ray_utils import node_id

    node = node_id()
    out = [_payload(ScanUnit(**json.loads(str(text))), fn, node) for text in batch["unit"]]
    return {"payload": np.array(out, dtype=object)}


def run_units(
    units: Sequence[ScanUnit], fn: Callable[[ScanUnit], dict[str, Any]], *, desc: str = "scanning", local: bool = False
) -> Iterator[dict[str, Any]]:
    """Run ``fn`` on every unit as a Ray Data job; yield each unit's JSON payload (in any order).

    ``fn`` must be picklable (a module-level function, or a ``functools.partial``
    of one) and return a JSON-serialisable dict. A unit whose bytes cannot be
    read yields ``{"read_error": "...", "unit": {...}}`` instead of failing the job.
    Every payload also names the Ray node its task ran on (``"node"``). ``local``: run the units one after
    another in this process instead, without Ray (``"node"`` is None; the same payloads, in unit order).
    """
    if not units:
        return
    if local:
        for unit in units:
            yield json.loads(_payload(unit, fn, None))
        return
    import ray.data
    from tqdm import tqdm

    from offlinerl.ray_utils import init_ray

    init_ray()
    items = [{"unit": json.dumps(asdict(u))} for u in units]
    ds = ray.data.from_items(items, override_num_blocks=min(len(items), 4096))
    ds = ds.map_batches(functools.partial(_apply, fn=fn), batch_size=1, batch_format="numpy")
    with tqdm(total=len(units), desc=desc, unit="row group", disable=None, leave=False) as bar:
        for row in ds.iter_rows():
            bar.update(1)
            yield json.loads(row["payload"])
