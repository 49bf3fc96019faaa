"""``offlinerl convert table``: spec parsing, round trips of shipped datasets, bad rows quarantined, timestamp
steps, next_observation, Dict observations, inferred spaces and ``--overwrite``."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import gymnasium as gym
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from offlinerl.convert.interface import ConvertUsageError
from offlinerl.convert.quarantine import QUARANTINE_PATH
from offlinerl.convert.table.convert import convert_table
from offlinerl.convert.table.export import write_step_table
from offlinerl.convert.table.spec import load_spec, spec_from_dict
from offlinerl.episodes import load_episodes, read_info
from offlinerl.episodes.io import write_dataset
from offlinerl.episodes.spaces import space_from_json, space_to_json
from offlinerl.episodes.validate import validate_dataset
from tests.convert.helpers import run_cli
from tests.episodes.builders import make_episode

ROOT = Path(__file__).resolve().parents[2]
SPEC = {"episode_id": "episode", "step": "t", "observation": "obs", "action": "action", "reward": "reward",
        "terminated": {"column": "done"}, "truncated": {"rule": "none"}}


def test_spec_forms_and_errors(tmp_path):
    spec = spec_from_dict({**SPEC, "observation": {"pos": ["x", "y"], "vel": "v"}, "propensity": "p",
                           "step": {"column": "ts", "kind": "timestamp"}})
    assert spec.observation.is_dict and spec.step_kind == "timestamp" and spec.logp_column == "p"
    with pytest.raises(ConvertUsageError, match="unknown key 'rewards'"):
        spec_from_dict({**SPEC, "rewards": "r"})
    with pytest.raises(ConvertUsageError, match="terminated"):
        spec_from_dict({**SPEC, "terminated": {"rule": "sometimes"}})
    aliased = tmp_path / "a.yaml"
    aliased.write_text("episode_id: &e ep\nstep: *e\n")
    with pytest.raises(ConvertUsageError, match="aliases"):
        load_spec(aliased)
    big = tmp_path / "big.yaml"
    big.write_text("#" * (1024 * 1024 + 1))
    with pytest.raises(ConvertUsageError, match="1 MiB"):
        load_spec(big)


def _slice(name: str, n: int, out: Path) -> Path:
    info = read_info(ROOT / "datasets" / name)
    eps = load_episodes(ROOT / "datasets" / name)[:n]
    for ep in eps:
        ep.extras = {"action_logp": ep.extras["action_logp"]}
    write_dataset(eps, out, observation_space=info.observation_space, action_space=info.action_space,
                  env_id=info.env_id, extra_columns={"action_logp": info.extra_columns["action_logp"]})
    return out


@pytest.mark.usefixtures("ray_session")
@pytest.mark.parametrize("name, fmt", [("cartpole-mixed", "csv"), ("pendulum-mixed", "parquet")])
def test_round_trip_is_identical(tmp_path, name, fmt):
    src = _slice(name, 4, tmp_path / "src")
    spec = write_step_table(src, tmp_path / f"steps.{fmt}", fmt)
    assert run_cli(["convert", "table", str(tmp_path / f"steps.{fmt}"), "--spec", str(spec),
                    "-o", str(tmp_path / "out")]) == 0
    a, b = read_info(src), read_info(tmp_path / "out")
    assert (a.observation_space, a.action_space, a.num_steps) == (b.observation_space, b.action_space, b.num_steps)
    before = {e.id: e for e in load_episodes(src)}
    after = {e.id: e for e in load_episodes(tmp_path / "out")}
    assert before.keys() == after.keys()
    for key, e in before.items():
        f = after[key]
        assert (e.terminated, e.truncated, e.t_start) == (f.terminated, f.truncated, f.t_start)
        for x, y in ((e.obs, f.obs), (e.actions, f.actions), (e.rewards, f.rewards),
                     (e.extras["action_logp"], f.extras["action_logp"])):
            assert np.asarray(x).dtype == np.asarray(y).dtype and np.array_equal(x, y)
    assert validate_dataset(tmp_path / "out").ok


GOOD_CSV = """episode,t,obs,action,reward,done
good1,1,"[0, 0, 0, 0]",1,1.0,false
good1,0,"[1, 1, 1, 1]",0,1.0,false
good1,2,"[2, 2, 2, 2]",1,1.0,true
good1,3,"[3, 3, 3, 3]",,,
e_nonnum,0,"[1, x, 2, 3]",1,1.0,false
e_nonnum,1,"[1, 2, 2, 3]",,,
e_nan,0,"[1, 1, 2, 3]",1,nan,false
e_nan,1,"[1, 1, 2, 3]",,,
e_width,0,"[1, 1, 2]",1,1.0,false
e_width,1,"[1, 1, 2, 3]",,,
e_missing,0,"[1, 1, 2, 3]",1,,false
e_missing,1,"[1, 1, 2, 3]",,,
e_dup,0,"[1, 1, 2, 3]",1,1.0,false
e_dup,0,"[1, 1, 2, 3]",1,1.0,false
e_dup,1,"[1, 1, 2, 3]",,,
e_gap,0,"[1, 1, 2, 3]",1,1.0,false
e_gap,2,"[1, 1, 2, 3]",,,
,0,"[1, 1, 2, 3]",1,1.0,false
e_space,0,"[1, 1, 2, 3]",5,1.0,false
e_space,1,"[1, 1, 2, 3]",,,
e_flag,0,"[1, 1, 2, 3]",1,1.0,maybe
e_flag,1,"[1, 1, 2, 3]",,,
e_cells,0,"[1, 1, 2, 3]",1,1.0,false,extra
e_cells,1,"[1, 1, 2, 3]",,,
"""
GOOD_JSONL = """{"episode": 7, "t": 0, "obs": [0.5, 0, 0, 0], "action": 0, "reward": 2.5, "done": false}
{"episode": 7, "t": 1, "obs": [0.25, 0, 0, 0], "action": null, "reward": null, "done": null}
{"episode": 8, "t": 0, "obs": [0.5, 0, 0, 0],
{"episode": 9, "t": 0, "obs": [0.5, 0, 0, 0], "action": 1, "reward": Infinity, "done": false}
{"episode": 9, "t": 1, "obs": [0.5, 0, 0, 0]}
"""
KINDS = {"non_numeric": 6, "nan": 8, "wrong_width": 10, "missing_value": 12, "duplicate_step": 14,
         "gap": 17, "bad_episode_id": 19, "out_of_space": 20, "bad_flag": 22}  # CSV line numbers (header = 1)


@pytest.mark.usefixtures("ray_session")
def test_bad_rows_are_quarantined_and_no_good_row_is_lost(tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.csv").write_text(GOOD_CSV)
    (tmp_path / "in" / "b.jsonl").write_text(GOOD_JSONL)
    spec = {**SPEC, "observation_space": {"type": "Box", "dtype": "float32", "shape": [4], "low": ["-inf"] * 4,
                                          "high": ["inf"] * 4},
            "action_space": {"type": "Discrete", "dtype": "int64", "n": 2, "start": 0}}
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    out = tmp_path / "out"
    code = run_cli(["convert", "table", str(tmp_path / "in"), "--spec", str(tmp_path / "spec.yaml"), "-o", str(out)])
    assert code == 1
    episodes = {e.id: e for e in load_episodes(out)}
    assert sorted(episodes) == ["7", "good1"]
    good = episodes["good1"]
    np.testing.assert_array_equal(good.obs[:, 0], [1, 0, 2, 3])  # sorted by step
    np.testing.assert_array_equal(good.actions, [0, 1, 1])
    assert good.terminated and not good.truncated
    assert not episodes["7"].terminated and episodes["7"].truncated  # no end flag: cut by the recording
    records = [json.loads(line) for line in (out / QUARANTINE_PATH).read_text().splitlines()]
    csv_path = str((tmp_path / "in" / "a.csv").resolve())
    by_line = {r["line"]: r for r in records if r["file"] == csv_path}
    for reason, line in KINDS.items():
        assert by_line[line]["reason"] == reason, (reason, by_line[line])
    assert by_line[15]["level"] == "episode" and by_line[6]["level"] == "line" and by_line[19]["level"] == "line"
    assert by_line[24]["reason"] == "wrong_width"  # a line with more cells than the header
    jsonl = {r["line"]: r["reason"] for r in records if r["file"].endswith("b.jsonl")}
    assert jsonl == {3: "bad_json", 4: "non_finite", 5: "partly_unreadable"}
    # every input row is written or quarantined, exactly once
    csv_rows, jsonl_rows = GOOD_CSV.count("\n") - 1, GOOD_JSONL.count("\n")
    positions = [(r["file"], r["line"]) for r in records]
    assert len(positions) == len(set(positions))
    assert len(records) + 4 + 2 == csv_rows + jsonl_rows
    report = read_info(out).provenance["report"]
    assert report["records_read"] == csv_rows + jsonl_rows
    assert report["records_quarantined"] == len(records) and report["episodes"] == 2
    assert validate_dataset(out).ok


@pytest.mark.usefixtures("ray_session")
def test_a_dataset_without_an_env_validates_trains_and_is_scored_offline(tmp_path, capsys):
    from offlinerl.cli import main

    src = _slice("cartpole-mixed", 3, tmp_path / "src")
    spec_path = write_step_table(src, tmp_path / "steps.csv", "csv")
    spec = yaml.safe_load(spec_path.read_text())
    spec.pop("env")  # logs from a system without a simulator
    spec_path.write_text(yaml.safe_dump(spec))
    out = tmp_path / "logs"
    assert run_cli(["convert", "table", str(tmp_path / "steps.csv"), "--spec", str(spec_path), "-o", str(out)]) == 0
    assert read_info(out).env_id is None
    assert main(["validate", str(out)]) == 0

    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump({
        "algorithm": "bc", "dataset": str(out), "output": str(tmp_path / "runs"), "stop": {"iterations": 2},
        "config": {"updates_per_iteration": 5, "train_batch_size": 16, "model": {"hidden": [8]}}}))
    capsys.readouterr()
    assert main(["train", str(job), "--output", str(tmp_path / "run"), "--no-progress"]) == 0
    assert "no evaluation env: the dataset names no env" in capsys.readouterr().out
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result["updates"] == 10 and result["env"] is None and result["final_eval_return"] is None
    assert main(["ope", result["checkpoint"], "--dataset", str(out), "--method", "fqe", "--fqe-updates", "50",
                 "--resamples", "20", "--skip-validation", "--out", str(tmp_path / "ope.json")]) == 0
    report = json.loads((tmp_path / "ope.json").read_text())
    assert "fqe" in json.dumps(report)


# --- the step column as a timestamp, next_observation, Dict observations, inferred spaces, --overwrite ---

BOX1 = {"type": "Box", "dtype": "float64", "shape": [1], "low": ["-inf"], "high": ["inf"]}
DISCRETE2 = {"type": "Discrete", "dtype": "int64", "n": 2, "start": 0}


def _convert(tmp_path: Path, files: dict[str, str | pa.Table], spec: dict):
    """Write ``files`` under tmp_path/in, convert them with ``spec`` (library call) into tmp_path/out; the report,
    the episodes by id, the quarantine records by (file name, position)."""
    (tmp_path / "in").mkdir()
    for name, content in files.items():
        if isinstance(content, str):
            (tmp_path / "in" / name).write_text(content)
        else:
            pq.write_table(content, tmp_path / "in" / name)
    report = convert_table([tmp_path / "in"], tmp_path / "out", spec_from_dict(spec))
    episodes = {e.id: e for e in load_episodes(tmp_path / "out")}
    quarantine = tmp_path / "out" / QUARANTINE_PATH
    records = [json.loads(line) for line in quarantine.read_text().splitlines()] if quarantine.exists() else []
    by_position = {(Path(r["file"]).name, r.get("line", r.get("row"))): r for r in records}
    assert len(by_position) == len(records)  # each row quarantined at most once
    return report, episodes, by_position


def _equal(a, b) -> None:
    """Same values and same dtype."""
    assert np.asarray(a).dtype == np.asarray(b).dtype, (np.asarray(a).dtype, np.asarray(b).dtype)
    np.testing.assert_array_equal(a, b)


TS_CSV = """episode,ts,x,action,reward,done
iso,2024-01-01T00:00:09,3.5,,,
iso,2024-01-01T00:00:01.5,1.5,1,0.75,false
iso,2024-01-01 00:00:00,0.5,0,0.25,false
iso,2024-01-01T00:00:02.000,2.5,1,0.5,true
same,2024-01-01T00:00:00Z,1,0,1,false
same,2024-01-01T00:00:00+00:00,2,0,1,false
same,2024-01-01T00:00:05Z,3,,,
late,yesterday,1,0,1,false
late,2024-01-01T00:00:05Z,3,,,
"""
TS_JSONL = """{"episode": 7, "ts": 1700000000.25, "x": 1.25, "action": 1, "reward": 2, "done": true}
{"episode": 7, "ts": 1700000000, "x": 0.25, "action": 0, "reward": 1, "done": false}
{"episode": 7, "ts": 1700003600, "x": 2.25}
"""


@pytest.mark.usefixtures("ray_session")
def test_timestamp_steps_are_sorted_by_time_may_leave_gaps_and_may_not_repeat(tmp_path):
    utc = timezone.utc
    parquet = pa.table({
        "episode": ["pq"] * 3, "x": [2.0, 0.0, 1.0], "action": [None, 1, 0], "reward": [None, 0.5, 1.5],
        "done": [None, False, False],
        "ts": pa.array([datetime(2024, 5, 1, 0, 0, 3, tzinfo=utc), datetime(2024, 5, 1, 0, 0, 1, tzinfo=utc),
                        datetime(2024, 5, 1, 0, 0, 2, 500, tzinfo=utc)], pa.timestamp("us", tz="UTC")),
    })
    spec = {**SPEC, "step": {"column": "ts", "kind": "timestamp"}, "observation": ["x"],
            "observation_space": BOX1, "action_space": DISCRETE2}
    report, episodes, quarantine = _convert(tmp_path, {"a.csv": TS_CSV, "b.jsonl": TS_JSONL, "c.parquet": parquet},
                                            spec)
    assert sorted(episodes) == ["7", "iso", "pq"]
    # ISO-8601 text (naive: all in one zone), epoch seconds, a parquet timestamp column: sorted by time, the
    # latest row is the final observation, irregular intervals are fine, and t counts rows from 0
    iso, seven, pq_ep = episodes["iso"], episodes["7"], episodes["pq"]
    _equal(iso.obs, np.array([[0.5], [1.5], [2.5], [3.5]]))
    _equal(iso.actions, np.array([0, 1, 1]))
    _equal(iso.rewards, np.array([0.25, 0.75, 0.5], np.float32))
    assert (iso.t_start, iso.terminated, iso.truncated) == (0, True, False)
    _equal(seven.obs, np.array([[0.25], [1.25], [2.25]]))
    _equal(seven.actions, np.array([0, 1]))
    _equal(seven.rewards, np.array([1, 2], np.float32))
    assert (seven.t_start, seven.terminated, seven.truncated) == (0, True, False)
    _equal(pq_ep.obs, np.array([[0.0], [1.0], [2.0]]))
    _equal(pq_ep.actions, np.array([1, 0]))
    assert (pq_ep.t_start, pq_ep.terminated, pq_ep.truncated) == (0, False, True)  # no end flag: cut
    # the same instant written two ways is a repeated step; text that is no timestamp is a bad step
    assert {k: (r["reason"], r["level"]) for k, r in quarantine.items()} == {
        ("a.csv", 6): ("duplicate_step", "episode"), ("a.csv", 7): ("duplicate_step", "episode"),
        ("a.csv", 8): ("duplicate_step", "episode"),
        ("a.csv", 9): ("bad_step", "line"), ("a.csv", 10): ("partly_unreadable", "episode")}
    assert "step 1704067200.0 appears more than once" == quarantine[("a.csv", 6)]["message"]
    assert (report.records_read, report.steps, report.episodes) == (15, 7, 3)
    assert validate_dataset(tmp_path / "out").ok
    # a timestamp column read as an integer index (no kind: timestamp) is a bad step, not epoch seconds
    convert_table([tmp_path / "in" / "c.parquet"], tmp_path / "index", spec_from_dict({**spec, "step": "ts"}))
    records = [json.loads(line) for line in (tmp_path / "index" / QUARANTINE_PATH).read_text().splitlines()]
    assert [(r["row"], r["reason"], r["level"]) for r in records] == [(i, "bad_step", "row") for i in (1, 2, 3)]
    assert records[0]["message"] == ("column 'ts': 2024-05-01 00:00:03+00:00 is a timestamp, not an integer step "
                                     "index (declare step: {column: ts, kind: timestamp})")


NEXT_JSONL = """{"episode": "e", "t": 4, "obs": [1, 2], "next_obs": [2, 3], "action": 1, "reward": 2, "done": true}
{"episode": "e", "t": 3, "obs": [0, 1], "next_obs": [1, 2], "action": 0, "reward": 1, "done": false}
{"episode": "one", "t": 0, "obs": [5, 5], "next_obs": [6, 6.5], "action": 1, "reward": 3, "done": false}
{"episode": "jump", "t": 0, "obs": [5, 5], "next_obs": [6, 6], "action": 1, "reward": 3, "done": false}
{"episode": "jump", "t": 1, "obs": [7, 7], "next_obs": [8, 8], "action": 1, "reward": 3, "done": true}
{"episode": "last", "t": 0, "obs": [1, 1], "next_obs": [2, 2], "action": 1, "reward": 3, "done": false}
{"episode": "last", "t": 1, "obs": [2, 2], "next_obs": [3, 3], "action": null, "reward": null, "done": true}
"""


@pytest.mark.usefixtures("ray_session")
def test_next_observation_makes_every_row_a_step_and_gives_the_final_observation(tmp_path):
    spec = {**SPEC, "next_observation": "next_obs",
            "observation_space": {**BOX1, "shape": [2], "low": ["-inf"] * 2, "high": ["inf"] * 2},
            "action_space": DISCRETE2}
    report, episodes, quarantine = _convert(tmp_path, {"steps.jsonl": NEXT_JSONL}, spec)
    assert sorted(episodes) == ["e", "one"]
    e, one = episodes["e"], episodes["one"]
    # n rows -> n steps; obs[n] is the last row's next_observation
    _equal(e.obs, np.array([[0.0, 1], [1, 2], [2, 3]]))
    _equal(e.actions, np.array([0, 1]))
    _equal(e.rewards, np.array([1, 2], np.float32))
    assert (e.t_start, e.terminated, e.truncated) == (3, True, False)
    _equal(one.obs, np.array([[5.0, 5], [6, 6.5]]))  # one row is a whole episode of one step
    _equal(one.actions, np.array([1]))
    assert (one.t_start, one.terminated, one.truncated) == (0, False, True)
    # next_observation must be the next row's observation; the last row is a step too, so needs its action
    assert {k: (r["reason"], r["level"]) for k, r in quarantine.items()} == {
        ("steps.jsonl", 4): ("obs_mismatch", "episode"), ("steps.jsonl", 5): ("obs_mismatch", "episode"),
        ("steps.jsonl", 6): ("partly_unreadable", "episode"), ("steps.jsonl", 7): ("missing_value", "line")}
    assert (report.records_read, report.steps, report.details["final_observation"]) == (
        7, 3, "next_observation column")
    assert validate_dataset(tmp_path / "out").ok


DICT_CSV = """episode,t,x,y,mode,a0,a1,reward,done
d,1,1.1,-1.2,0,-1,1,2.5,false
d,0,0.1,-0.2,2,0.5,-0.25,1.5,false
d,2,2.1,-2.2,1,,,,true
far,0,0.1,-0.2,3,0.5,-0.25,1.5,false
far,1,0.1,-0.2,0,,,,
"""
DICT_SPACE = {"type": "Dict", "subspaces": {
    "pos": {"type": "Box", "dtype": "float64", "shape": [2], "low": [-10.0, -5.0], "high": [10.0, 5.0]},
    "mode": {"type": "Discrete", "dtype": "int64", "n": 3, "start": 0}}}
ACTION_BOX = {"type": "Box", "dtype": "float32", "shape": [2], "low": [-1.0, -1.0], "high": [1.0, 1.0]}


@pytest.mark.usefixtures("ray_session")
def test_dict_observation_from_columns_keeps_the_declared_spaces_and_every_value(tmp_path):
    spec = {**SPEC, "observation": {"pos": ["x", "y"], "mode": "mode"}, "action": ["a0", "a1"],
            "observation_space": DICT_SPACE, "action_space": ACTION_BOX}
    report, episodes, quarantine = _convert(tmp_path, {"d.csv": DICT_CSV}, spec)
    info = read_info(tmp_path / "out")
    assert info.observation_space == space_from_json(DICT_SPACE) and info.action_space == space_from_json(ACTION_BOX)
    assert space_to_json(info.observation_space) == space_to_json(space_from_json(DICT_SPACE))
    assert report.observation_space_from == report.action_space_from == "given"
    assert sorted(episodes) == ["d"]
    d = episodes["d"]
    assert sorted(d.obs) == ["mode", "pos"]
    _equal(d.obs["pos"], np.array([[0.1, -0.2], [1.1, -1.2], [2.1, -2.2]]))
    _equal(d.obs["mode"], np.array([2, 0, 1]))
    _equal(d.actions, np.array([[0.5, -0.25], [-1, 1]], np.float32))
    _equal(d.rewards, np.array([1.5, 2.5], np.float32))
    assert (d.t_start, d.terminated, d.truncated) == (0, True, False)  # the flag on the final row counts
    # a leaf value outside its space (Discrete(3) here) quarantines the row and its episode
    assert {k: (r["reason"], r["level"]) for k, r in quarantine.items()} == {
        ("d.csv", 5): ("out_of_space", "line"), ("d.csv", 6): ("partly_unreadable", "episode")}
    assert "observation.mode: 3 is not in Discrete(3)" == quarantine[("d.csv", 5)]["message"]
    assert validate_dataset(tmp_path / "out").ok


INFER_JSONL = """{"episode": 1, "t": 0, "p": [0.5, 1], "s": 2, "action": 0, "reward": 1, "done": false}
{"episode": 1, "t": 1, "p": [1.5, 2], "s": 3, "action": 2, "reward": 1, "done": true}
{"episode": 1, "t": 2, "p": [2.5, 3], "s": 4}
"""
INFERRED_OBS = "Dict('pos': Box(-inf, inf, (2,), float32), 'speed': Box(-inf, inf, (1,), float32))"


@pytest.mark.usefixtures("ray_session")
def test_inferred_spaces_are_reported_for_the_user_to_check_and_the_dataset_validates(tmp_path, capsys):
    (tmp_path / "steps.jsonl").write_text(INFER_JSONL)
    spec = {**SPEC, "observation": {"speed": "s", "pos": "p"}}
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    out = tmp_path / "out"
    capsys.readouterr()
    assert run_cli(["convert", "table", str(tmp_path / "steps.jsonl"), "--spec", str(tmp_path / "spec.yaml"),
                    "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    box = gym.spaces.Box(-np.inf, np.inf, (1,), np.float32)
    obs_space = gym.spaces.Dict({"pos": gym.spaces.Box(-np.inf, np.inf, (2,), np.float32), "speed": box})
    note = (f"spaces inferred from the data: observation {INFERRED_OBS}, action Discrete(3) (check them; declare "
            "observation_space/action_space in the spec for the real bounds)")
    for line in ("observation space:      inferred from the data", "action space:           inferred from the data",
                 f"note: {note}", f"observation space json: {space_to_json(obs_space)}",
                 f"action space json:      {space_to_json(gym.spaces.Discrete(3))}"):
        assert f"  {line}\n" in printed, line
    info = read_info(out)
    assert (info.observation_space, info.action_space) == (obs_space, gym.spaces.Discrete(3))
    stored = info.provenance["report"]
    assert stored["notes"] == [note]
    assert stored["observation_space_from"] == stored["action_space_from"] == "inferred from the data"
    assert (stored["details"]["observation_space_json"], stored["details"]["action_space_json"]) == (
        space_to_json(obs_space), space_to_json(gym.spaces.Discrete(3)))
    (ep,) = load_episodes(out)
    _equal(ep.obs["pos"], np.array([[0.5, 1], [1.5, 2], [2.5, 3]], np.float32))
    _equal(ep.obs["speed"], np.array([[2], [3], [4]], np.float32))
    _equal(ep.actions, np.array([0, 2]))
    assert validate_dataset(out).ok

    # one space declared: only the other is inferred, and the note names only that one
    report = convert_table([tmp_path / "steps.jsonl"], tmp_path / "half", spec_from_dict(
        {**spec, "action_space": {"type": "Discrete", "dtype": "int64", "n": 5, "start": 0}}))
    assert read_info(tmp_path / "half").action_space == gym.spaces.Discrete(5)
    assert (report.observation_space_from, report.action_space_from) == ("inferred from the data", "given")
    assert report.notes == [f"spaces inferred from the data: observation {INFERRED_OBS} (check them; declare "
                            "observation_space in the spec for the real bounds)"]
    assert validate_dataset(tmp_path / "half").ok


TINY_CSV = "episode,t,x,action,reward,done\na,0,0.5,1,1.0,false\na,1,1.5,,,\n"
GAP_CSV = "episode,t,x,action,reward,done\ng,0,0.5,1,1.0,false\ng,2,1.5,,,\n"  # its only episode has a gap


def _logs(work: Path, table: str) -> tuple[Path, Path]:
    """``work/logs/steps.csv`` and ``work/spec.yaml`` (spaces declared: an all-quarantined input still converts)."""
    (work / "logs").mkdir(parents=True)
    (work / "logs" / "steps.csv").write_text(table)
    (work / "spec.yaml").write_text(yaml.safe_dump({**SPEC, "observation": ["x"], "observation_space": BOX1,
                                                    "action_space": DISCRETE2}))
    return work / "logs", work / "spec.yaml"


def _old_dataset(path: Path) -> None:
    space = space_from_json(BOX1)
    write_dataset([make_episode(i, space, gym.spaces.Discrete(2), steps=3, terminated=True) for i in range(5)],
                  path, observation_space=space, action_space=gym.spaces.Discrete(2))


def _snapshot(root: Path) -> dict[str, bytes | None]:
    """Every file (its bytes) and directory (None) under ``root``."""
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))}


def _error(capsys) -> str:
    """The one error line of ``convert table`` on stderr."""
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("offlinerl convert table: error: ")]
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.usefixtures("ray_session")
def test_overwrite_replaces_a_dataset_of_ours_only_when_asked(tmp_path, capsys):
    logs, spec = _logs(tmp_path / "work", TINY_CSV)
    _old_dataset(tmp_path / "ds")
    argv = ["convert", "table", str(logs), "--spec", str(spec), "-o", str(tmp_path / "ds")]
    before = _snapshot(tmp_path)
    assert run_cli(argv) == 2
    assert "already exists (pass overwrite=True / --overwrite to replace it)" in _error(capsys)
    assert _snapshot(tmp_path) == before
    assert run_cli([*argv, "--overwrite"]) == 0, capsys.readouterr().err
    (ep,) = load_episodes(tmp_path / "ds")
    assert ep.id == "a" and read_info(tmp_path / "ds").num_episodes == 1
    _equal(ep.obs, np.array([[0.5], [1.5]]))
    assert {k: v for k, v in _snapshot(tmp_path).items() if k.startswith("work")} == {
        k: v for k, v in before.items() if k.startswith("work")}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds", "work"]  # no temporary or old copy left


@pytest.mark.usefixtures("ray_session")
@pytest.mark.parametrize("target, reason", [
    ("work/logs/steps.csv", "is an input of this command"),
    ("work/logs", "is an input of this command"),
    ("work", "holds the input"),
    ("work/logs/ds", "lies inside the input directory"),
    ("photos", "is a non-empty directory that is not a dataset (no dataset.json)"),
])
def test_overwrite_refuses_an_input_and_a_directory_that_is_not_a_dataset(tmp_path, capsys, target, reason):
    logs, spec = _logs(tmp_path / "work", TINY_CSV)
    (tmp_path / "photos").mkdir()
    (tmp_path / "photos" / "cat.jpg").write_bytes(b"\xff\xd8 not really a cat")
    before = _snapshot(tmp_path)
    rc = run_cli(["convert", "table", str(logs), "--spec", str(spec), "-o", str(tmp_path / target), "--overwrite"])
    assert rc == 2
    message = _error(capsys)
    assert reason in message and str((tmp_path / target).resolve()) in message
    assert _snapshot(tmp_path) == before  # every input byte for byte, nothing new


@pytest.mark.usefixtures("ray_session")
def test_overwrite_with_every_episode_quarantined_keeps_our_dataset_allowed_or_not(tmp_path, capsys):
    logs, spec = _logs(tmp_path / "work", GAP_CSV)
    _old_dataset(tmp_path / "ds")
    argv = ["convert", "table", str(logs), "--spec", str(spec), "-o", str(tmp_path / "ds"), "--overwrite"]
    before = _snapshot(tmp_path)
    assert run_cli(argv) == 2
    assert (f"2 record(s) were quarantined, so the existing dataset at {(tmp_path / 'ds').resolve()} was kept"
            in _error(capsys))
    assert _snapshot(tmp_path) == before
    # allowed or not: a conversion of no episodes never replaces a dataset
    assert run_cli([*argv, "--allow-quarantine"]) == 2
    assert (f"no episodes were converted (2 record(s) quarantined), so the existing dataset at "
            f"{(tmp_path / 'ds').resolve()} was kept" in _error(capsys))
    assert _snapshot(tmp_path) == before
    # into a new place: written with its quarantine to read, but exit 2, and the dataset is not valid
    new = tmp_path / "new"
    assert run_cli([*argv[:-3], "-o", str(new), "--allow-quarantine"]) == 2
    assert "no episodes were converted; 3 record(s) quarantined" in capsys.readouterr().err  # 2 rows, 1 episode
    assert read_info(new).num_episodes == 0 and load_episodes(new) == []
    records = [json.loads(line) for line in (new / QUARANTINE_PATH).read_text().splitlines()]
    assert [(r["line"], r["reason"]) for r in records] == [(2, "gap"), (3, "gap")]
    assert not validate_dataset(new).ok
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds", "new", "work"]
