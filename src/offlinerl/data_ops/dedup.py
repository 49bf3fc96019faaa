"""``dedup``: exact duplicates removed, counted and reported.

Two kinds (both found from the first pass's digests of each row's content; ``offlinerl.episodes.fingerprint``):

- **duplicate chunks**: rows with the same episode id, agent and chunk index and the same content (a file
  copied twice into the dataset, a recording appended twice). One is kept. Rows that share the key but
  differ are a conflict dedup cannot settle: it stops and names them.
- **duplicate episodes**: episodes (all their rows, in order) whose content is equal in everything but the
  episode id. The one with the smallest id is kept.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from offlinerl.data_ops.errors import DataOpError
from offlinerl.data_ops.summary import summarise
from offlinerl.data_ops.write import KeepRows, OpResult, check_out, write_output

__all__ = ["dedup_dataset", "MAX_EXAMPLES"]

#: Duplicate groups listed in the report (all are counted).
MAX_EXAMPLES = 10


def dedup_dataset(path: str | Path, out: str | Path, *, overwrite: bool = False) -> OpResult:
    """Write ``path`` without its exact duplicates to ``out``; the report counts what was removed."""
    path = Path(path)
    check_out(out, overwrite, [path])
    summary = summarise(path, content=True, desc="dedup")
    rows = summary.rows
    n = len(rows["id"])
    key = np.array([f"{i}\x00{a}\x00{c}" for i, a, c in zip(rows["id"], rows["agent"], rows["chunk"])], dtype=object)
    drop: dict[str, set[int]] = {}
    kept_row = np.ones(n, dtype=bool)
    seen: dict[str, int] = {}
    for r in range(n):
        first = seen.setdefault(key[r], r)
        if first == r:
            continue
        if rows["content"][r] != rows["content"][first]:
            raise DataOpError(f"dedup: {rows['file'][first]} row {rows['row'][first]} and {rows['file'][r]} row "
                              f"{rows['row'][r]} are both episode {rows['id'][r]!r} chunk {rows['chunk'][r]} but "
                              "differ; remove one yourself (nothing was written)")
        kept_row[r] = False
        drop.setdefault(rows["file"][r], set()).add(int(rows["row"][r]))
    duplicate_rows = int(n - kept_row.sum())
    # Episodes by content: the digests of their remaining rows in (agent, chunk) order.
    order = [r for r in np.lexsort((rows["chunk"], rows["agent"].astype(str), rows["id"].astype(str))) if kept_row[r]]
    episode_digest: dict[str, hashlib.blake2b] = {}
    for r in order:
        h = episode_digest.setdefault(rows["id"][r], hashlib.blake2b(digest_size=32))
        h.update(f"{rows['agent'][r]}\x00{rows['chunk'][r]}\x00{rows['content'][r]}|".encode())
    groups: dict[str, list[str]] = {}
    for episode_id in sorted(episode_digest):
        groups.setdefault(episode_digest[episode_id].hexdigest(), []).append(episode_id)
    dropped_ids = {i for members in groups.values() for i in members[1:]}
    examples = [{"kept": m[0], "removed": m[1:MAX_EXAMPLES + 1], "copies": len(m)}
                for m in groups.values() if len(m) > 1][:MAX_EXAMPLES]
    keep_ids = frozenset(i for i in episode_digest if i not in dropped_ids)
    steps_removed = int(sum(rows["steps"][r] for r in range(n) if not kept_row[r] or rows["id"][r] in dropped_ids))
    report = {"rows_in": n, "episodes_in": len(episode_digest), "duplicate_rows_removed": duplicate_rows,
              "duplicate_episodes_removed": len(dropped_ids), "episodes_out": len(keep_ids),
              "steps_removed": steps_removed, "examples": examples}
    transform = KeepRows(ids=keep_ids, drop={f: frozenset(v) for f, v in drop.items()})
    return write_output([(summary, transform)], out, operation="dedup", parameters={}, report=report,
                        overwrite=overwrite)
