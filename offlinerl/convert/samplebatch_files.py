"""Finding RLlib ``JsonWriter`` output files, ordering them, and reading them
line by line in byte ranges (so one huge file is read by several tasks, each
holding only a few lines in memory)."""

from __future__ import annotations

import glob
import gzip
import re
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Iterator

__all__ = [
    "InputError",
    "FileRange",
    "resolve_inputs",
    "file_sort_key",
    "plan_ranges",
    "iter_range_lines",
    "line_numbers",
    "DEFAULT_RANGE_BYTES",
]

#: Uncompressed files larger than this are read by several tasks, one byte range each.
DEFAULT_RANGE_BYTES = 64 * 1024 * 1024

_WRITER_NAME = re.compile(r"_worker-(\d+)_(\d+)\.json(\.gz)?$")
_SUFFIXES = (".json", ".json.gz")


class InputError(ValueError):
    """An input path names nothing readable (a usage error, not bad data)."""


def file_sort_key(path: str | Path) -> tuple:
    """Writer order: (worker index, file index) as numbers, then the name; other names last."""
    name = Path(path).name
    match = _WRITER_NAME.search(name)
    if match:
        return (0, int(match.group(1)), int(match.group(2)), str(path))
    return (1, 0, 0, str(path))


def _is_recording(path: Path) -> bool:
    return path.is_file() and path.name.endswith(_SUFFIXES)


def resolve_inputs(inputs: list[str]) -> list[Path]:
    """Expand files, directories (their ``output-*.json[.gz]``) and globs into an ordered file list."""
    found: dict[Path, None] = {}
    for item in inputs:
        path = Path(item)
        if path.is_dir():
            matches = [p for p in path.iterdir() if p.name.startswith("output-") and _is_recording(p)]
            if not matches:
                raise InputError(f"{item}: directory holds no RLlib output files (output-*.json or output-*.json.gz)")
        elif path.is_file():
            matches = [path]
        else:
            matches = [Path(p) for p in glob.glob(item, recursive=True) if _is_recording(Path(p))]
            if not matches:
                raise InputError(f"{item}: no such file or directory, and no .json/.json.gz file matches it as a glob")
        for m in matches:
            found.setdefault(m.resolve(), None)
    return sorted(found, key=file_sort_key)


@dataclass(frozen=True)
class FileRange:
    """Lines of one file whose first byte lies in ``[start, end)`` (``end=-1``: to the end)."""

    file_index: int
    path: str
    start: int
    end: int


def plan_ranges(files: list[Path], range_bytes: int = DEFAULT_RANGE_BYTES) -> list[FileRange]:
    """Split each uncompressed file into byte ranges of about ``range_bytes``; a .gz file is one range."""
    ranges = []
    for i, path in enumerate(files):
        size = path.stat().st_size
        if path.name.endswith(".gz") or size <= range_bytes:
            ranges.append(FileRange(i, str(path), 0, -1))
            continue
        starts = list(range(0, size, range_bytes))
        for j, start in enumerate(starts):
            end = starts[j + 1] if j + 1 < len(starts) else -1
            ranges.append(FileRange(i, str(path), start, end))
    return ranges


def _open(path: str) -> BinaryIO:
    return gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb", buffering=1 << 20)


def iter_range_lines(rng: FileRange) -> Iterator[tuple[int, bytes]]:
    """Yield ``(byte offset, line)`` for each line starting in the range (offsets of the decompressed stream)."""
    with _open(rng.path) as f:
        pos = 0
        if rng.start > 0:
            f.seek(rng.start - 1)
            pos = rng.start - 1 + len(f.readline())  # skip the rest of the line that began before us
        while rng.end < 0 or pos < rng.end:
            line = f.readline()
            if not line:
                break
            yield pos, line
            pos += len(line)


def line_numbers(path: str, offsets: list[int]) -> dict[int, int]:
    """1-based line numbers of the lines starting at the given byte offsets (one streaming pass)."""
    wanted = sorted(set(offsets))
    result: dict[int, int] = {}
    if not wanted:
        return result
    k = 0
    with _open(path) as f:
        pos, line_no = 0, 1
        for line in f:
            while k < len(wanted) and wanted[k] <= pos:
                result[wanted[k]] = line_no
                k += 1
            if k == len(wanted):
                break
            pos += len(line)
            line_no += 1
    return result
