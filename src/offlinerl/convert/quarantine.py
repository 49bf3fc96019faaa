"""The one quarantine layout of every converter: ``OUT/_quarantine/records.jsonl``.

One JSON object per line, one line per record that was not converted, with the
same keys for every converter: ``file`` (the source file); its 1-based position,
``line`` (text recordings) or ``row`` (parquet; ``null`` when the whole file is
quarantined); ``level`` (``line``/``row``: the record itself is bad, ``episode``:
its episode was quarantined whole, ``file``); ``reason`` (a short code);
``message`` (the text for a person); context such as the episode. A text
record's ``raw`` holds the record as it was, cut to :data:`MAX_RAW_CHARS`
characters (``raw_chars`` then says how long it was). Readers of a dataset only
glob top-level ``*.parquet``, so the folder never looks like data. Documented
in docs/convert.md ("The quarantine layout").
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TextIO

__all__ = ["QUARANTINE_DIR", "QUARANTINE_FILE", "QUARANTINE_PATH", "MAX_RAW_CHARS", "QuarantineWriter", "raw_excerpt"]

QUARANTINE_DIR = "_quarantine"
QUARANTINE_FILE = "records.jsonl"
QUARANTINE_PATH = f"{QUARANTINE_DIR}/{QUARANTINE_FILE}"
#: A raw record longer than this is cut (a bomb line may be megabytes long).
MAX_RAW_CHARS = 64 * 1024


def raw_excerpt(raw: str) -> dict[str, Any]:
    """``{"raw": ...}`` for a record, cut to :data:`MAX_RAW_CHARS` (with ``raw_chars``, its full length, if cut)."""
    if len(raw) <= MAX_RAW_CHARS:
        return {"raw": raw}
    return {"raw": raw[:MAX_RAW_CHARS], "raw_chars": len(raw)}


class QuarantineWriter:
    """Writes records to ``out_dir/_quarantine/records.jsonl``; the file is created on the first record only."""

    def __init__(self, out_dir: str | Path) -> None:
        self.path = Path(out_dir) / QUARANTINE_DIR / QUARANTINE_FILE
        self.count = 0
        self._fh: TextIO | None = None

    def write(self, record: dict[str, Any]) -> None:
        if self._fh is None:
            self.path.parent.mkdir()
            self._fh = open(self.path, "w")
        self._fh.write(json.dumps(record) + "\n")
        self.count += 1

    @property
    def relative_path(self) -> str | None:
        """``_quarantine/records.jsonl`` once something was written, else None (for reports)."""
        return QUARANTINE_PATH if self.count else None

    def __enter__(self) -> QuarantineWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fh is not None:
            self._fh.close()
