"""``convert samplebatch`` end to end on real Ray: the RLlib-made fixtures must
reproduce their expected.json, and crafted recordings exercise every messy case."""

from __future__ import annotations

import argparse
import json
import math
import os

import numpy as np
import pytest

from offlinerl.cli import convert as convert_cli
from offlinerl.convert.samplebatch import SampleBatchConvertConfig, convert_samplebatch
from offlinerl.episodes import load_episodes, read_info
from offlinerl.episodes.fingerprint import dataset_fingerprint, is_fingerprint
from offlinerl.episodes.io import parquet_files
from offlinerl.episodes.validate import validate_dataset
from tests.convert.samplebatch_recordings import batch, merge, pack, sample_batch_line, write_lines

BIG_ID = 2**60 + 1  # above 2**53


def cli(*argv: str) -> int:
    parser = argparse.ArgumentParser()
    convert_cli.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["convert", "samplebatch", *argv])
    return args.func(args)


def check_against_expected(out, expected_path):
    exp = json.loads(expected_path.read_text())
    info = read_info(out)
    episodes = load_episodes(out)
    assert (info.num_episodes, info.num_steps) == (exp["num_episodes"], exp["num_steps"])
    assert len(episodes) == exp["num_episodes"]
    by_id = {e.id: e for e in episodes}
    for want in exp["episodes"]:
        ep = by_id[str(want["eps_id"])]  # exact integer ids, as decimal strings
        ep.check()
        assert len(ep) == want["length"] and ep.t_start == want["t_first"]
        assert (ep.terminated, ep.truncated) == (want["terminated"], want["truncated"])
        # Rewards are stored as float32; RLlib wrote float32 rewards widened to double, so the
        # float64 sum of the stored values equals expected.json's fsum (1e-6 covers summation order).
        assert math.isclose(math.fsum(ep.rewards.astype(np.float64)), want["return"], rel_tol=1e-6, abs_tol=1e-9)
    report = info.provenance["report"]
    assert report["records_read"] == exp["num_records"] and report["records_quarantined"] == 0
    assert report["episodes_quarantined"] == 0 and report["truncated_by_recording"] == exp["num_incomplete"]
    return info, episodes, exp


def test_cartpole_packed_fixture_reproduces_expected(ray_session, shared_fixtures, tmp_path):
    src = shared_fixtures / "legacy_samplebatch" / "cartpole_packed"
    # small byte ranges: each ~40 kB file is read by several tasks, as a multi-GB file would be
    report = convert_samplebatch(SampleBatchConvertConfig(inputs=(str(src),), output=str(tmp_path / "ds"), range_bytes=8192))
    info, episodes, exp = check_against_expected(tmp_path / "ds", src / "expected.json")
    assert report.observation_space_from == "inferred" and info.provenance["observation_space"] == "inferred"
    assert str(info.observation_space) == "Box(-inf, inf, (4,), float32)" and info.action_space.n == 2
    assert episodes[0].agent_id is None and episodes[0].obs.dtype == np.float32
    kept = set(info.extra_columns)
    assert {"action_logp", "action_prob", "action_dist_inputs", "vf_preds", "advantages", "value_targets", "infos"} <= kept
    assert not kept & {"prev_actions", "prev_rewards", "unroll_id", "t", "eps_id", "new_obs", "agent_index"}
    assert info.extra_columns["action_dist_inputs"] == {"dtype": "float32", "shape": [2]}
    assert not (tmp_path / "ds" / "_quarantine").exists()


def test_pendulum_fixture_with_env_unsquash_and_chunks(ray_session, shared_fixtures, tmp_path):
    src = shared_fixtures / "legacy_samplebatch" / "pendulum_plain"
    out = tmp_path / "ds"
    rc = cli(str(src / "output-*.json"), "-o", str(out), "--env", "Pendulum-v1", "--unsquash-actions",
             "--max-steps-per-row", "150")
    assert rc == 0
    info, episodes, exp = check_against_expected(out, src / "expected.json")
    assert info.env_id == "Pendulum-v1" and info.num_rows == 2 * exp["num_episodes"]
    assert info.provenance["actions"].startswith("unsquashed") and info.provenance["report"]["details"]["actions_unsquashed"]
    assert info.provenance["report"]["details"]["observations_out_of_bounds"] == info.provenance["report"]["details"]["actions_out_of_bounds"] == 0
    # actions were recorded in RLlib's normalised space; the env received clip(2a, -2, 2)
    first_line = json.loads((sorted(src.glob("output-*_0.json"))[0]).read_text().splitlines()[0])
    ep = next(e for e in episodes if e.id == str(first_line["eps_id"][0]))
    raw = np.asarray(first_line["actions"], dtype=np.float64)[:100].reshape(-1, 1)
    np.testing.assert_allclose(ep.actions[:100], np.clip(2 * raw, -2, 2).astype(np.float32))
    assert np.abs(ep.actions).max() <= 2.0


def messy_recording(root, marker):
    """Three files, written out of name order, with every problem we know of."""
    a = root / "output-2026-01-01_00-00-00_worker-0_2.json"
    b = root / "output-2026-01-01_00-00-01_worker-0_10.json.gz"
    c = root / "output-2026-01-01_00-00-02_worker-1_0.json"
    nan_cols = batch(40, 0, 3, end="terminated")  # NaN in obs and rewards: cannot be trained on → quarantined
    nan_cols["obs"][1][0] = nan_cols["new_obs"][0][0] = float("nan")
    nan_cols["rewards"][1] = "null"
    nan_extra = batch(41, 0, 2, end="terminated")  # NaN only in an extra column: kept
    nan_extra["action_logp"] = [float("nan"), "null"]
    nan_cols = merge(nan_cols, nan_extra)
    bad_b64 = json.loads(sample_batch_line(batch(50, 0, 2, end="terminated")))
    bad_b64["obs"] = "BCJNGG!!not base64!!"
    evil = json.loads(sample_batch_line(batch(51, 0, 2, end="terminated")))
    evil["action_logp"] = pack(_RunsACommand(marker))
    short = batch(52, 0, 3, end="terminated")
    short["actions"] = short["actions"][:2]
    write_lines(a, [
        sample_batch_line(merge(batch(BIG_ID, 0, 5, total=8), batch(20, 0, 3, end="terminated"))),
        '{"type": "SampleBatch", "obs": [[1.0, 2.0]',  # cut line
        sample_batch_line(batch(30, 0, 4, end="terminated"), packed=("obs", "new_obs", "action_logp"), bytes_repr=True),
        sample_batch_line(short),
    ])
    write_lines(b, [
        sample_batch_line(merge(batch(BIG_ID, 5, 3, end="terminated", total=8), batch(60, 0, 4))),  # 60: cut
        json.dumps(nan_cols),
        json.dumps(bad_b64),
        json.dumps(evil),
        sample_batch_line(batch(20, 0, 3, end="terminated")),  # duplicate of episode 20
    ])
    write_lines(c, [
        sample_batch_line(batch(70, 0, 3, end="truncated", dones=True)),
        sample_batch_line(batch(71, 0, 2, end="terminated", dones=True)),
    ])
    return root


class _RunsACommand:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_messy_recording_quarantines_and_reports_exactly(ray_session, tmp_path, capsys):
    marker = tmp_path / "marker"
    src = messy_recording(tmp_path / "rec", marker)
    out = tmp_path / "ds"
    assert cli(str(src), "-o", str(out)) == 1  # something was quarantined
    assert not marker.exists()
    text = capsys.readouterr()
    assert "  lines quarantined:      4 (" in text.out and "--allow-quarantine" in text.err
    info = read_info(out)
    report = info.provenance["report"]
    assert report["files"] == 3 and report["records_read"] == 11
    assert report["record_reasons"] == {"bad_json": 1, "bad_base64": 1, "refused_pickle": 1, "inconsistent_lengths": 1}
    assert report["duplicate_episodes"] == 1 and report["episode_reasons"] == {"duplicate": 1, "non_finite": 1}
    assert report["truncated_by_recording"] == 1 and report["details"]["legacy_dones_lines"] == 2
    assert report["observation_space_from"] == "inferred" and info.action_space.n == 3
    episodes = {e.id: e for e in load_episodes(out)}
    assert sorted(episodes) == sorted(["30", "41", "60", "70", "71", str(BIG_ID)])
    big = episodes[str(BIG_ID)]
    assert len(big) == 8 and big.terminated and len(big.obs) == 9  # stitched across files, final obs from new_obs
    np.testing.assert_array_equal(big.obs, np.asarray(batch(BIG_ID, 0, 8)["obs"] + [batch(BIG_ID, 0, 8)["new_obs"][-1]], dtype=np.float32))
    assert big.extras["infos"] == [{"step": t} for t in range(8)]
    assert episodes["60"].truncated and not episodes["60"].terminated
    assert episodes["70"].truncated and not episodes["70"].terminated  # dones + TimeLimit.truncated
    assert episodes["71"].terminated and not episodes["71"].truncated
    assert np.isnan(episodes["41"].extras["action_logp"]).all()  # NaN token and "null" both read as NaN
    np.testing.assert_array_equal(episodes["30"].extras["action_logp"], np.float32(batch(30, 0, 4)["action_logp"]))
    assert info.num_steps == sum(len(e) for e in episodes.values()) == 8 + 4 + 2 + 4 + 3 + 2
    assert [p.name for p in parquet_files(out)] and not list((out / "_quarantine").glob("*.parquet"))
    records = [json.loads(x) for x in (out / "_quarantine" / "records.jsonl").read_text().splitlines()]
    where = {(os.path.basename(r["file"]), r["line"], r["reason"]) for r in records}
    assert where == {
        ("output-2026-01-01_00-00-00_worker-0_2.json", 2, "bad_json"),
        ("output-2026-01-01_00-00-00_worker-0_2.json", 4, "inconsistent_lengths"),
        ("output-2026-01-01_00-00-01_worker-0_10.json.gz", 3, "bad_base64"),
        ("output-2026-01-01_00-00-01_worker-0_10.json.gz", 4, "refused_pickle"),
        ("output-2026-01-01_00-00-00_worker-0_2.json", 1, "duplicate"),
        ("output-2026-01-01_00-00-01_worker-0_10.json.gz", 5, "duplicate"),
        ("output-2026-01-01_00-00-01_worker-0_10.json.gz", 2, "non_finite"),
    }
    assert all(r["raw"] for r in records if r["level"] == "line")
    # the output exists: refused without --overwrite (usage error), untouched
    before = sorted(p.name for p in out.iterdir())
    assert cli(str(src), "-o", str(out)) == 2
    assert sorted(p.name for p in out.iterdir()) == before


def test_multi_agent_batch_two_policies_and_allowed_quarantine(ray_session, tmp_path):
    def line(t0, n, end=None):
        return json.dumps({"type": "MultiAgentBatch", "count": n, "policy_batches": {
            "pol_a": batch(9, t0, n, end=end, total=5, agent_index=0, seed=1),
            "pol_b": batch(9, t0, n, end=end, total=5, agent_index=1, seed=2),
        }})
    src = write_lines(tmp_path / "output-x_worker-0_0.json", [line(0, 3), "{oops", line(3, 2, end="terminated")])
    obs = json.dumps({"type": "Box", "dtype": "float32", "shape": [2], "low": "-inf", "high": "inf"})
    rc = cli(str(src), "-o", str(tmp_path / "ds"), "--observation-space", obs, "--action-space", '{"type": "Discrete", "n": 3}',
             "--allow-quarantine")
    assert rc == 0  # one line was quarantined, and that was allowed
    info = read_info(tmp_path / "ds")
    assert info.provenance["report"]["records_quarantined"] == 1 and info.provenance["observation_space"] == "given"
    assert info.provenance["report"]["details"]["multi_agent"] and info.provenance["report"]["details"]["policies"] == ["pol_a", "pol_b"]
    assert info.num_episodes == 2 and info.num_steps == 10
    eps = sorted(load_episodes(tmp_path / "ds"), key=lambda e: e.agent_id)
    assert [(e.id, e.agent_id, e.module_id, len(e), e.terminated) for e in eps] == [
        ("9", "0", "pol_a", 5, True), ("9", "1", "pol_b", 5, True)]
    np.testing.assert_array_equal(eps[1].obs, np.asarray(batch(9, 0, 5, seed=2)["obs"] + [batch(9, 0, 5, seed=2)["new_obs"][-1]], dtype=np.float32))


def test_fingerprint_and_lineage_recorded_as_every_writer_does(ray_session, tmp_path):
    src = write_lines(tmp_path / "rec" / "output-x_worker-0_0.json", [
        sample_batch_line(batch(1, 0, 5, end="terminated")), sample_batch_line(batch(2, 0, 3, end="truncated"))])
    out = tmp_path / "ds"
    convert_samplebatch(SampleBatchConvertConfig(inputs=(str(src.parent),), output=str(out), max_steps_per_row=2))
    info = read_info(out)
    assert (info.num_episodes, info.num_steps, info.num_rows, info.module_ids) == (2, 8, 5, ["default_policy"])
    # the shared fingerprint, computed from the rows as written
    assert is_fingerprint(info.fingerprint) and info.fingerprint == dataset_fingerprint(out)
    (step,) = info.lineage
    assert step["operation"] == "offlinerl convert samplebatch" == info.provenance["converter"]
    assert step["parameters"] == {"env": None, "unsquash_actions": False, "max_steps_per_row": 2, "obs_check": True}
    assert (step["parents"], step["parent_paths"]) == ([], [str((tmp_path / "rec").absolute())])
    assert step["fingerprint"] == info.fingerprint and step["tool"].startswith("offlinerl ")
    assert validate_dataset(out).ok


def _records(out):
    return [json.loads(x) for x in (out / "_quarantine" / "records.jsonl").read_text().splitlines()]


def test_policy_id_with_a_dot_is_quarantined_not_left_to_fail_training(ray_session, tmp_path):
    line = json.dumps({"type": "MultiAgentBatch", "count": 4, "policy_batches": {
        "pol_a": batch(6, 0, 4, end="terminated", agent_index=0, seed=1),
        "pol.c": batch(6, 0, 4, end="terminated", agent_index=2, seed=2)}})
    out = tmp_path / "ds"
    assert cli(str(write_lines(tmp_path / "output-x_worker-0_0.json", [line])), "-o", str(out)) == 1
    info = read_info(out)
    report = info.provenance["report"]
    assert report["episode_reasons"] == {"bad_policy_id": 1}
    assert (report["episodes_quarantined"], report["steps_quarantined"], report["episodes"]) == (1, 4, 1)
    assert [(e.id, e.agent_id, e.module_id, len(e)) for e in load_episodes(out)] == [("6", "0", "pol_a", 4)]
    assert info.module_ids == ["pol_a"] and validate_dataset(out).ok
    (rec,) = _records(out)
    assert (rec["line"], rec["level"], rec["reason"]) == (1, "episode", "bad_policy_id")
    assert rec["episode"] == {"policy": "pol.c", "eps_id": "6", "agent": 2, "t_first": 0, "t_last": 3}
    assert rec["message"] == "policy id 'pol.c' is stored as the rows' module_id, and a module id cannot contain '.', got 'pol.c'"


def test_agent_under_two_policies_in_one_episode_is_quarantined(ray_session, tmp_path):
    def line(eps_id, agents):  # {policy: (agent_index, obs seed)}
        return json.dumps({"type": "MultiAgentBatch", "count": 4, "policy_batches": {
            pol: batch(eps_id, 0, 4, end="terminated", agent_index=agent, seed=seed)
            for pol, (agent, seed) in agents.items()}})

    src = write_lines(tmp_path / "output-x_worker-0_0.json", [
        line(1, {"pol_a": (0, 1), "pol_b": (1, 2)}),
        line(2, {"pol_a": (0, 3), "pol_b": (1, 4)}),
        line(1, {"pol_c": (0, 5)}),  # agent 0 of episode 1 again, under another policy, on another line
    ])
    out = tmp_path / "ds"
    assert cli(str(src), "-o", str(out)) == 1
    info = read_info(out)
    report = info.provenance["report"]
    assert report["episode_reasons"] == {"policy_conflict": 2}
    assert (report["episodes_quarantined"], report["steps_quarantined"], report["episodes"]) == (2, 8, 3)
    assert sorted((e.id, e.agent_id, e.module_id) for e in load_episodes(out)) == [
        ("1", "1", "pol_b"), ("2", "0", "pol_a"), ("2", "1", "pol_b")]
    assert info.num_episodes == 3 and info.module_ids == ["pol_a", "pol_b"]
    assert validate_dataset(out).ok
    records = _records(out)
    where = sorted((r["line"], r["level"], r["reason"], r["episode"]["policy"], r["episode"]["agent"]) for r in records)
    assert where == [(1, "episode", "policy_conflict", "pol_a", 0), (3, "episode", "policy_conflict", "pol_c", 0)]
    assert {r["message"] for r in records} == {
        "agent_index 0 of episode 1 is recorded under 2 policies ('pol_a', 'pol_c'); an agent belongs to one "
        "policy within an episode, so these steps are not one episode, and as two they would share one "
        "(episode_id, agent_id)"}


def test_usage_errors_exit_two(tmp_path):
    assert cli(str(tmp_path / "missing"), "-o", str(tmp_path / "ds")) == 2
    src = write_lines(tmp_path / "output-x_worker-0_0.json", ["{}"])
    assert cli(str(src), "-o", str(tmp_path / "ds"), "--env", "CartPole-v1", "--action-space", '{"type": "Discrete", "n": 2}') == 2
    assert cli(str(src), "-o", str(tmp_path / "ds"), "--unsquash-actions") == 2
    assert cli(str(src), "-o", str(tmp_path / "ds"), "--action-space", "{bad") == 2
    tuple_space = '{"type": "Tuple", "subspaces": [{"type": "Discrete", "n": 2}]}'
    assert cli(str(src), "-o", str(tmp_path / "ds"), "--action-space", tuple_space) == 2
    assert not (tmp_path / "ds").exists()
    with pytest.raises(SystemExit) as err:
        cli(str(src))  # -o missing
    assert err.value.code == 2
