"""A record of the datasets that passed validation, so a job does not read an unchanged dataset twice.

``offlinerl validate`` and every job's preflight validate a dataset by reading all of it; on a large
dataset that is most of the time to the first update, and a dataset is usually trained on many times
(seeds, sweeps, configs) without changing. A valid report is stored here under a **key** made of the
dataset's content fingerprint as ``dataset.json`` records it (``offlinerl.episodes.fingerprint``; none for
datasets written before fingerprints), its resolved path, the bytes of ``dataset.json``, and for every parquet
file its name, size, inode and modification and change times (``st_ctime_ns`` moves on every write and cannot
be set by a user), plus the offlinerl version and :data:`CHECKS_VERSION`. The record names the content
fingerprint it vouches for, and a record is used only while ``dataset.json`` still records that one.
The file stats stay in the key: the recorded fingerprint is a claim of ``dataset.json``, and only reading
the rows could check it, which is what the record saves. Any change to a file, a file added or
removed, or a new validator means a new fingerprint, and the dataset is validated again.

Records live in ``$OFFLINERL_CACHE_DIR`` (default ``$XDG_CACHE_HOME/offlinerl``, else
``~/.cache/offlinerl``), under ``validated/``, one small JSON file per fingerprint, written atomically.
``OFFLINERL_CACHE_DIR=off`` turns the record off. Only reports without errors are recorded; a record is
read as JSON only (never unpickled), and a record that does not parse is ignored.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from offlinerl.config_io import plain_json
from offlinerl.episodes.info import INFO_FILE
from offlinerl.episodes.io import parquet_files

__all__ = ["CHECKS_VERSION", "cache_dir", "current", "fingerprint", "lookup", "record", "recorded_fingerprint"]

#: Bumped whenever a check changes what it accepts, so older records stop counting.
CHECKS_VERSION = 2  # 2: a module_id that cannot name a module (empty, or with a dot) fails episode_ids
#: Largest record read back (a record is a few KB).
_MAX_RECORD_BYTES = 1 << 20


def cache_dir() -> Path | None:
    """Where records are kept; ``None`` when ``OFFLINERL_CACHE_DIR=off``."""
    configured = os.environ.get("OFFLINERL_CACHE_DIR")
    if configured:
        return None if configured.lower() in ("off", "0", "none") else Path(configured) / "validated"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "offlinerl" / "validated"


def fingerprint(path: str | Path) -> str:
    """Hex digest identifying the dataset's exact files (see the module docstring)."""
    from offlinerl import __version__

    root = Path(path).resolve()
    raw = (root / INFO_FILE).read_bytes()
    h = hashlib.sha256()
    h.update(json.dumps([_content_fingerprint(raw), str(root), __version__, CHECKS_VERSION]).encode())
    h.update(raw)
    for f in parquet_files(root):
        st = f.stat()
        h.update(json.dumps([f.name, st.st_size, st.st_ino, st.st_dev, st.st_mtime_ns, st.st_ctime_ns]).encode())
    return h.hexdigest()


def _content_fingerprint(raw: bytes) -> str | None:
    """The content fingerprint ``dataset.json`` (its bytes) records, or None."""
    try:
        value = plain_json(raw).get("fingerprint")
    except (ValueError, AttributeError):  # bad JSON, deep nesting or huge integers (NestingError): none recorded
        return None
    return value if isinstance(value, str) else None


def recorded_fingerprint(path: str | Path) -> str | None:
    """The content fingerprint the ``dataset.json`` of ``path`` records (None: none, or unreadable)."""
    try:
        return _content_fingerprint((Path(path) / INFO_FILE).read_bytes()[: 1 << 24])
    except OSError:
        return None


def current(path: str | Path) -> str | None:
    """``fingerprint(path)``, or ``None`` when records are off or the files cannot be listed."""
    if cache_dir() is None:
        return None
    try:
        return fingerprint(path)
    except OSError:  # unreadable dataset.json or files: let the validator say what is wrong
        return None


def _record_path(digest: str | None) -> Path | None:
    directory = cache_dir()
    return None if directory is None or digest is None else directory / f"{digest}.json"


def lookup(path: str | Path) -> dict[str, Any] | None:
    """The stored valid report of the dataset at ``path`` exactly as it is now, or ``None``."""
    record_path = _record_path(current(path))
    if record_path is None or not record_path.is_file():
        return None
    try:
        if record_path.stat().st_size > _MAX_RECORD_BYTES:
            return None
        data = json.loads(record_path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("report"), dict):
        return None
    return data["report"] if data.get("fingerprint") == recorded_fingerprint(path) else None


def record(path: str | Path, report: dict[str, Any], before: str | None) -> None:
    """Store a valid ``report`` (``ValidationReport.to_json()``) of the files whose fingerprint was ``before``
    when validation started: nothing is stored if they changed meanwhile. Failures to write are ignored."""
    if before is None or current(path) != before:
        return
    record_path = _record_path(before)
    tmp = None
    try:
        record_path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=record_path.parent, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump({"dataset": str(Path(path).resolve()), "fingerprint": recorded_fingerprint(path),
                       "report": report}, f)
        os.replace(tmp, record_path)
    except OSError:
        if tmp is not None:  # a full disk mid-write: leave no half-written temp file behind
            Path(tmp).unlink(missing_ok=True)
