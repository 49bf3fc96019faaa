"""``offlinerl convert table``: spec parsing, round trips of shipped datasets, and bad rows quarantined."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from offlinerl.convert.interface import ConvertUsageError
from offlinerl.convert.quarantine import QUARANTINE_PATH
from offlinerl.convert.table.export import write_step_table
from offlinerl.convert.table.spec import load_spec, spec_from_dict
from offlinerl.episodes import load_episodes, read_info
from offlinerl.episodes.io import write_dataset
from offlinerl.episodes.validate import validate_dataset
from tests.convert.helpers import run_cli

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
