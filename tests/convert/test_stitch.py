"""Stitching fragments into episodes (no Ray): order, duplicates, gaps, cut recordings."""

from __future__ import annotations

import numpy as np

from offlinerl.convert.stitch import Piece, Stitched, StitchProblem, pieces_from_steps, stitch

OBS = np.arange(20, dtype=np.float32).reshape(10, 2)  # obs of t = 0..9 (row t), next obs of t is row t+1


def piece(t0: int, n: int, source=(0, 0), end: str | None = None) -> Piece:
    flags = np.zeros(n, dtype=bool)
    term, trunc = flags.copy(), flags.copy()
    if end == "terminated":
        term[-1] = True
    if end == "truncated":
        trunc[-1] = True
    return Piece(t_first=t0, source=source, columns={
        "obs": OBS[t0:t0 + n], "next_obs": OBS[t0 + n:t0 + n + 1], "actions": np.arange(t0, t0 + n),
        "rewards": np.full(n, 1.0), "terminated": term, "truncated": trunc, "infos": [{}] * n})


def test_pieces_are_ordered_by_t_not_by_arrival():
    out = stitch([piece(5, 3, (1, 0), end="terminated"), piece(0, 5, (0, 9))])
    assert isinstance(out, Stitched)
    assert out.t_start == 0 and out.terminated and not out.truncated and out.num_fragments == 2
    np.testing.assert_array_equal(out.columns["obs"], OBS[:9])
    assert out.columns["actions"].tolist() == list(range(8)) and len(out.columns["infos"]) == 8


def test_episode_cut_by_the_recording_is_truncated():
    out = stitch([piece(0, 4)])
    assert isinstance(out, Stitched) and out.truncated and out.truncated_by_recording and not out.terminated


def test_duplicates_and_overlaps_are_refused():
    for pieces in ([piece(0, 4, end="terminated"), piece(0, 4, (1, 0), end="terminated")], [piece(0, 4), piece(3, 2)]):
        out = stitch(pieces)
        assert isinstance(out, StitchProblem) and out.reason == "duplicate" and len(out.sources) == 2


def test_gap_early_end_and_obs_mismatch_are_refused():
    assert stitch([piece(0, 2), piece(3, 2)]).reason == "gap"
    assert stitch([piece(0, 2, end="terminated"), piece(2, 2)]).reason == "ended_early"
    bad = piece(2, 2)
    bad.columns["obs"] = bad.columns["obs"] + 1
    assert stitch([piece(0, 2), bad]).reason == "obs_mismatch"
    assert isinstance(stitch([piece(0, 2), bad], check_obs=False), Stitched)


def test_terminated_wins_when_both_flags_are_set():
    p = piece(0, 2, end="terminated")
    p.columns["truncated"][-1] = True
    out = stitch([p])
    assert out.terminated and not out.truncated


def test_per_step_rows_in_any_order_stitch_by_t():
    order = np.array([3, 0, 2, 1])
    t = order
    cols = {"obs": OBS[order], "actions": order.copy(), "rewards": np.ones(4), "infos": [{"t": int(i)} for i in order],
            "terminated": order == 3, "truncated": np.zeros(4, bool)}
    pieces = pieces_from_steps(t, cols, OBS[order + 1], sources=[(0, int(i)) for i in range(4)])
    assert len(pieces) == 1
    out = stitch(pieces)
    assert isinstance(out, Stitched) and out.terminated and out.columns["actions"].tolist() == [0, 1, 2, 3]
    np.testing.assert_array_equal(out.columns["obs"], OBS[:5])
    assert out.columns["infos"] == [{"t": 0}, {"t": 1}, {"t": 2}, {"t": 3}]
    dup = pieces_from_steps(np.array([0, 1, 1]), {k: v[:3] for k, v in cols.items()}, OBS[1:4])
    assert stitch(dup).reason == "duplicate"
