"""Parsing single recording lines (no Ray): formats, packing, NaN, legacy dones, errors, safety."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from offlinerl.convert.payload import decode_columns, encode_columns
from offlinerl.convert.samplebatch.lines import LineError, parse_line
from tests.convert.samplebatch_recordings import batch, merge, pack, sample_batch_line

BIG_ID = 2**60 + 12345  # above 2**53: a float would round it


def test_one_line_with_two_episodes_becomes_two_fragments_with_exact_ids():
    line = sample_batch_line(merge(batch(BIG_ID, 0, 3, end="terminated"), batch(7, 0, 2)))
    frags = parse_line(line)
    assert [(f.eps_id, f.t_first, f.length) for f in frags] == [(str(BIG_ID), 0, 3), ("7", 0, 2)]
    f = frags[0]
    assert f.policy is None and f.agent_index == 0 and f.obs_continuous
    assert f.columns["terminated"].tolist() == [False, False, True]
    assert f.columns["next_obs"].shape == (1, 2)
    assert set(f.columns) == {"obs", "next_obs", "actions", "rewards", "terminated", "truncated", "infos", "action_logp"}
    assert f.columns["infos"] == [{"step": 0}, {"step": 1}, {"step": 2}]
    assert set(f.dropped) >= {"prev_actions", "prev_rewards", "unroll_id", "t", "eps_id", "new_obs"}


def test_multi_agent_batch_yields_one_fragment_per_policy_and_agent():
    record = {"type": "MultiAgentBatch", "count": 3, "policy_batches": {
        "pol_a": batch(5, 0, 3, agent_index=0), "pol_b": batch(5, 0, 3, agent_index=1)}}
    frags = parse_line(json.dumps(record))
    assert [(f.policy, f.eps_id, f.agent_index) for f in frags] == [("pol_a", "5", 0), ("pol_b", "5", 1)]


def test_packed_columns_any_column_and_bytes_repr():
    cols = batch(3, 0, 4)
    for bytes_repr in (False, True):
        f, = parse_line(sample_batch_line(cols, packed=("obs", "new_obs", "action_logp"), bytes_repr=bytes_repr))
        assert f.columns["obs"].dtype == np.float32
        np.testing.assert_array_equal(f.columns["obs"], np.asarray(cols["obs"], dtype=np.float32))
        np.testing.assert_array_equal(f.columns["action_logp"], np.asarray(cols["action_logp"], dtype=np.float32))


def test_nan_token_and_null_string_read_as_nan():
    cols = batch(3, 0, 3)
    cols["obs"][1][0] = float("nan")
    cols["new_obs"][0][0] = float("nan")
    cols["rewards"][2] = "null"
    cols["action_logp"][0] = None
    line = json.dumps({"type": "SampleBatch", **cols})
    assert "NaN" in line
    f, = parse_line(line)
    assert np.isnan(f.columns["obs"][1, 0]) and np.isnan(f.columns["rewards"][2]) and np.isnan(f.columns["action_logp"][0])
    assert f.obs_continuous  # NaN == NaN for the new_obs/obs check


def test_legacy_dones_split_by_time_limit_info():
    f1, = parse_line(sample_batch_line(batch(1, 0, 3, end="truncated", dones=True)))
    f2, = parse_line(sample_batch_line(batch(2, 0, 3, end="terminated", dones=True)))
    assert f1.legacy_dones and f1.columns["truncated"].tolist() == [False, False, True]
    assert not f1.columns["terminated"].any()
    assert f2.columns["terminated"].tolist() == [False, False, True] and not f2.columns["truncated"].any()


def test_non_contiguous_t_in_one_line_splits_into_fragments():
    cols = merge(batch(4, 0, 2), batch(4, 5, 2, total=7))
    assert [(f.t_first, f.length) for f in parse_line(sample_batch_line(cols))] == [(0, 2), (5, 2)]


@pytest.mark.parametrize("mutate, reason", [
    (lambda c: "{not json", "bad_json"),
    (lambda c: sample_batch_line(c).replace('"obs": [[', '"obs": "BCJNGG@@@" , "x": [[', 1), "bad_base64"),
    (lambda c: sample_batch_line({**c, "rewards": c["rewards"][:-1]}), "inconsistent_lengths"),
    (lambda c: sample_batch_line({k: v for k, v in c.items() if k != "t"}), "missing_column"),
    (lambda c: json.dumps({"type": "Weird"}), "bad_record"),
])
def test_unreadable_lines_raise_with_a_reason(mutate, reason):
    with pytest.raises(LineError) as err:
        parse_line(mutate(batch(1, 0, 3)))
    assert err.value.reason == reason


class _RunsACommand:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_packed_pickle_that_runs_a_command_is_refused_and_nothing_runs(tmp_path):
    marker = tmp_path / "pwned"
    cols = batch(1, 0, 3)
    cols["obs"] = pack(_RunsACommand(marker))
    with pytest.raises(LineError) as err:
        parse_line(json.dumps({"type": "SampleBatch", **cols}))
    assert err.value.reason == "refused_pickle" and "system" in str(err.value)
    assert not marker.exists()


def test_payload_round_trip_is_exact():
    cols = {"a": np.arange(6, dtype=np.float32).reshape(3, 2), "b": np.array([True, False]),
            "c": [{"x": 1}, None], "d": np.array([2**62], dtype=np.int64)}
    out = decode_columns(encode_columns(cols))
    assert out["c"] == cols["c"]
    for k in ("a", "b", "d"):
        assert out[k].dtype == cols[k].dtype and np.array_equal(out[k], cols[k])
