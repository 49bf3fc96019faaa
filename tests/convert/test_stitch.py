"""Stitching fragments into episodes (no Ray): order, duplicates, gaps, cut recordings."""

from __future__ import annotations

import numpy as np

from offlinerl.convert.stitch import Piece, StepRun, Stitched, StitchProblem, stitch, stitch_rows

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


def rows(steps, files):
    """Fingerprints of step rows as stitch_rows sees them: step t has obs t, new_obs t+1."""
    sig = [f"step{t}".encode() for t in steps]
    return dict(source=files, sig=sig, obs_sig=[f"o{t}".encode() for t in steps],
                next_sig=[f"o{t + 1}".encode() for t in steps], where=lambda i: f"#{i}")


def test_step_rows_join_and_exact_rewrites_in_a_later_file_are_dropped():
    run = stitch_rows(**rows([0, 1, 2, 1, 2, 3], [0, 0, 0, 1, 1, 1]), ended=[False] * 5 + [True])
    assert isinstance(run, StepRun)
    assert run.kept == [0, 1, 2, 5] and run.duplicates == 2 and not run.truncated_by_recording
    cut = stitch_rows(**rows([0, 1], [0, 0]), ended=[False, False])
    assert cut.kept == [0, 1] and cut.truncated_by_recording


def test_step_rows_that_overlap_gap_or_continue_after_the_end_are_refused():
    changed = rows([0, 1, 0, 1], [0, 0, 1, 1])
    changed["sig"][3] = b"changed step 1"
    assert stitch_rows(**changed, ended=[False] * 4).reason == "overlap"
    assert stitch_rows(**rows([0, 2], [0, 0]), ended=[False, False]).reason == "obs_mismatch"
    assert stitch_rows(**rows([0, 1], [0, 0]), ended=[True, False]).reason == "ended_early"
