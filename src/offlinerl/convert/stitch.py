"""Stitching the fragments of one episode (found in different lines, files or
blocks) into a single episode, refusing anything ambiguous.

Generic over the recording format, two entry points:

- :func:`stitch`: fragments that know their env step (legacy SampleBatch
  lines): a fragment is a run of consecutive steps ``t_first .. t_first +
  length - 1`` with per-step columns, the observation after its last step and
  a ``source`` that orders fragments found at the same ``t`` (file, position).
- :func:`stitch_rows`: per-step rows that do not (RLlib new-stack step rows):
  they are taken in recording order (file, row) and joined by checking that
  each row's ``obs`` is the previous row's ``new_obs``, compared through
  fingerprints so that the caller keeps the values in Arrow.

Both refuse anything ambiguous (overlaps that are not exact re-writes, gaps,
steps after an end flag): those episodes are quarantined, never merged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

__all__ = ["Piece", "Stitched", "StitchProblem", "stitch", "StepRun", "stitch_rows"]


@dataclass
class Piece:
    """One fragment: ``columns`` holds ``obs``, ``actions``, ``rewards``, ``terminated``,
    ``truncated`` and extras (T entries each) and ``next_obs`` (1 entry)."""

    t_first: int
    source: tuple
    columns: dict[str, Any]
    obs_continuous: bool = True

    @property
    def length(self) -> int:
        return len(self.columns["rewards"])

    @property
    def t_stop(self) -> int:
        return self.t_first + self.length


@dataclass
class Stitched:
    """A whole episode (or the part of it that was recorded)."""

    t_start: int
    columns: dict[str, Any]
    """``obs`` (T+1 entries), ``actions``, ``rewards`` and extras (T entries)."""
    terminated: bool
    truncated: bool
    truncated_by_recording: bool
    num_fragments: int


@dataclass
class StitchProblem:
    """Why the fragments do not form one episode; they are quarantined, never merged."""

    reason: str
    message: str
    sources: list[tuple] = field(default_factory=list)


def _cat(parts: list[Any]) -> Any:
    if all(isinstance(p, np.ndarray) for p in parts):
        return np.concatenate(parts, axis=0)
    return [x for p in parts for x in (p.tolist() if isinstance(p, np.ndarray) else p)]


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=a.dtype.kind == "f" and b.dtype.kind == "f"))


def stitch(pieces: Sequence[Piece], check_obs: bool = True) -> Stitched | StitchProblem:
    """Order ``pieces`` by ``(t_first, source)`` and join them.

    Problems: overlapping or duplicate steps (``duplicate``), missing steps
    between pieces (``gap``), an end flag before the last step
    (``ended_early``), ``next_obs`` of a piece differing from ``obs[0]`` of the
    next one or ``new_obs``/``obs`` disagreeing inside one (``obs_mismatch``),
    pieces with different columns (``column_mismatch``). An episode whose last
    step has no end flag was cut by the end of the recording: it is marked
    truncated.
    """
    pieces = sorted(pieces, key=lambda p: (p.t_first, p.source))
    sources = [p.source for p in pieces]
    for prev, nxt in zip(pieces, pieces[1:]):
        if nxt.t_first < prev.t_stop:
            return StitchProblem(
                "duplicate",
                f"steps t={nxt.t_first}..{min(prev.t_stop, nxt.t_stop) - 1} are recorded more than once",
                sources,
            )
        if nxt.t_first > prev.t_stop:
            return StitchProblem("gap", f"steps t={prev.t_stop}..{nxt.t_first - 1} are missing", sources)
    names = list(pieces[0].columns)
    for p in pieces[1:]:
        if list(p.columns) != names:
            return StitchProblem("column_mismatch", f"fragments have different columns: {names} vs {list(p.columns)}", sources)
    if check_obs:
        if not all(p.obs_continuous for p in pieces):
            return StitchProblem("obs_mismatch", "new_obs[i] != obs[i+1] inside a fragment", sources)
        for prev, nxt in zip(pieces, pieces[1:]):
            if not _same(np.asarray(prev.columns["next_obs"][0]), np.asarray(nxt.columns["obs"][0])):
                return StitchProblem("obs_mismatch", f"new_obs at t={prev.t_stop - 1} != obs at t={nxt.t_first}", sources)
    columns = {n: _cat([p.columns[n] for p in pieces]) for n in names if n != "next_obs"}
    terminated = np.asarray(columns.pop("terminated"), dtype=bool)
    truncated = np.asarray(columns.pop("truncated"), dtype=bool)
    ends = np.flatnonzero(terminated[:-1] | truncated[:-1])
    if len(ends):
        t_end = pieces[0].t_first + int(ends[0])
        return StitchProblem("ended_early", f"an end flag is set at t={t_end} but the episode continues", sources)
    columns["obs"] = _cat([columns["obs"], pieces[-1].columns["next_obs"]])
    term, trunc = bool(terminated[-1]), bool(truncated[-1])
    cut = not (term or trunc)
    return Stitched(
        t_start=pieces[0].t_first,
        columns=columns,
        terminated=term,
        truncated=trunc and not term or cut,
        truncated_by_recording=cut,
        num_fragments=len(pieces),
    )


@dataclass
class StepRun:
    """The rows of one episode that :func:`stitch_rows` keeps, in order."""

    kept: list[int]
    """Indices of the kept rows (exact re-writes of earlier steps are dropped)."""
    duplicates: int
    """Rows dropped as exact re-writes."""
    truncated_by_recording: bool
    """The last kept row has neither end flag: the recording stopped mid-episode."""


def stitch_rows(source: Sequence[Any], sig: Sequence[bytes], obs_sig: Sequence[bytes], next_sig: Sequence[bytes],
                ended: Sequence[bool], where: Callable[[int], str]) -> StepRun | StitchProblem:
    """Join one episode's per-step rows, given in recording order (sorted by (file, row)).

    ``source[i]`` is row i's file (a new file may re-write earlier steps, as
    RLlib does at each flush), ``sig`` a fingerprint of the whole step,
    ``obs_sig``/``next_sig`` of its ``obs``/``new_obs``, ``ended`` its
    terminated-or-truncated flag, ``where(i)`` names the row in messages. A
    run of rows in a new file that repeats earlier steps exactly is dropped
    (counted in ``duplicates``); one that repeats them with a difference
    (``overlap``), a row after an end flag (``ended_early``) and a row whose
    obs is not the previous new_obs (``obs_mismatch``) are problems.
    """
    kept: list[int] = []
    seen: dict[bytes, int] = {}
    repeat_at: int | None = None
    duplicates = 0
    for i in range(len(sig)):
        if repeat_at is not None and repeat_at < len(kept):
            if sig[i] == sig[kept[repeat_at]]:
                duplicates += 1
                repeat_at += 1
                continue
            return StitchProblem("overlap", f"rows re-write steps of this episode but row {where(i)} differs "
                                            f"from step {repeat_at} written before (overlapping, not identical)")
        repeat_at = None
        if i > 0 and source[i] != source[i - 1] and sig[i] in seen:
            duplicates += 1
            repeat_at = seen[sig[i]] + 1
            continue
        if kept:
            last = kept[-1]
            if ended[last]:
                return StitchProblem("ended_early", f"row {where(i)} continues the episode after its last step "
                                                    f"(terminated/truncated at {where(last)}) and is not an "
                                                    "exact re-write")
            if obs_sig[i] != next_sig[last]:
                return StitchProblem("obs_mismatch", f"row {where(i)}: obs is not the previous step's new_obs "
                                                     "(missing, reordered or overlapping steps)")
        seen.setdefault(sig[i], len(kept))
        kept.append(i)
    return StepRun(kept, duplicates, truncated_by_recording=not ended[kept[-1]])
