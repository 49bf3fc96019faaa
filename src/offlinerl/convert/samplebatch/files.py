"""Finding RLlib ``JsonWriter`` output files, ordering them, and reading them
line by line in byte ranges (so one huge file is read by several tasks, each
holding only a few lines in memory). A line longer than a cap is never held
whole: it is read in chunks and reported as a :class:`LongLine` (a gzip file of
a few MB can hold a line of gigabytes)."""

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
    "LongLine",
    "resolve_inputs",
    "file_sort_key",
    "plan_ranges",
    "iter_range_lines",
    "line_numbers",
    "DEFAULT_RANGE_BYTES",
]

#: Uncompressed files larger than this are read by several tasks, one byte range each.
DEFAULT_RANGE_BYTES = 64 * 1024 * 1024
_CHUNK = 1024 * 1024
_HEAD = 1024

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


@dataclass(frozen=True)
class LongLine:
    """A line over the cap: its first bytes (for the quarantine) and its full length; never held whole."""

    head: bytes
    length: int


def _open(path: str) -> BinaryIO:
    return gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb", buffering=1 << 20)


def _rest_of_line(f: BinaryIO) -> int:
    """Read to the end of the current line in chunks; its length in bytes."""
    length = 0
    while True:
        part = f.readline(_CHUNK)
        length += len(part)
        if not part or part.endswith(b"\n"):
            return length


def iter_range_lines(rng: FileRange, max_line_bytes: int | None = None) -> Iterator[tuple[int, bytes | LongLine]]:
    """Yield ``(byte offset, line)`` for each line starting in the range (offsets of the decompressed stream).

    A line longer than ``max_line_bytes`` comes as a :class:`LongLine` (read in chunks, not kept).
    """
    with _open(rng.path) as f:
        pos = 0
        if rng.start > 0:
            f.seek(rng.start - 1)
            pos = rng.start - 1 + _rest_of_line(f)  # skip the rest of the line that began before us
        while rng.end < 0 or pos < rng.end:
            line = f.readline(-1 if max_line_bytes is None else max_line_bytes + 1)
            if not line:
                break
            if max_line_bytes is not None and len(line) > max_line_bytes and not line.endswith(b"\n"):
                length = len(line) + _rest_of_line(f)
                yield pos, LongLine(line[:_HEAD], length)
                pos += length
                continue
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
        pos, newlines = 0, 0  # read in blocks: a line may be far longer than memory should hold
        while k < len(wanted):
            block = f.read(_CHUNK)
            while k < len(wanted) and (wanted[k] <= pos + len(block) or not block):
                result[wanted[k]] = newlines + block.count(b"\n", 0, max(0, wanted[k] - pos)) + 1
                k += 1
            if not block:
                break
            newlines += block.count(b"\n")
            pos += len(block)
    return result
