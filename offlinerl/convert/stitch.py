"""Stitching the fragments of one episode (found in different lines, files or
blocks) into a single episode, refusing anything ambiguous.

Generic over the recording format: a fragment is a run of consecutive steps
``t_first .. t_first + length - 1`` with per-step columns, the observation
after its last step and a ``source`` that orders fragments found at the same
``t`` (file, position). Per-step rows are fragments of length 1.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

__all__ = ["Piece", "Stitched", "StitchProblem", "stitch", "pieces_from_steps"]


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


def pieces_from_steps(
    t: np.ndarray,
    columns: dict[str, Any],
    next_obs: np.ndarray,
    sources: list[tuple] | None = None,
) -> list[Piece]:
    """Per-step rows of one episode (any order) → pieces of consecutive ``t``, ready for :func:`stitch`.

    ``columns`` holds ``obs``, ``actions``, ``rewards``, ``terminated``, ``truncated``
    and extras, one entry per row; ``next_obs`` the observation after each row's
    step; ``sources`` a sortable origin per row (file, row), used to order rows with
    the same ``t`` (which :func:`stitch` then reports as duplicates). Rows are
    ordered by ``(t, source)``, never by arrival order.
    """
    t = np.asarray(t, dtype=np.int64)
    sources = sources if sources is not None else [(i,) for i in range(len(t))]
    order = np.asarray(sorted(range(len(t)), key=lambda i: (t[i], sources[i])), dtype=np.int64)
    breaks = np.flatnonzero(np.diff(t[order]) != 1) + 1
    pieces = []
    for run in np.split(order, breaks):
        cols = {k: (v[run] if isinstance(v, np.ndarray) else [v[i] for i in run.tolist()]) for k, v in columns.items()}
        nxt = np.asarray(next_obs)[run]
        cols["next_obs"] = nxt[-1:]
        obs = np.asarray(cols["obs"])
        cont = bool(np.array_equal(nxt[:-1], obs[1:], equal_nan=obs.dtype.kind == "f"))
        pieces.append(Piece(t_first=int(t[run[0]]), source=sources[int(run[0])], columns=cols, obs_continuous=cont))
    return pieces
