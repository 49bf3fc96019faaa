"""``offlinerl convert table`` with an ``agent`` column: one episode row per (episode, agent), every check per
agent, ``module_ids`` listing the agents, agents that differ refused, a missing agent column named."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import gymnasium as gym
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from offlinerl.cli import main
from offlinerl.convert.interface import ConvertUsageError
from offlinerl.convert.quarantine import QUARANTINE_PATH
from offlinerl.convert.table.convert import convert_table
from offlinerl.convert.table.export import write_step_table
from offlinerl.convert.table.infer import Seen, check_agents_agree, infer_spaces, merged
from offlinerl.convert.table.rows import ACTION, obs_col
from offlinerl.convert.table.spec import spec_from_dict
from offlinerl.episodes import load_episodes, read_info
from offlinerl.episodes.validate import validate_dataset
from tests.convert.helpers import run_cli
from tests.convert.test_table import BOX1, DISCRETE2, SPEC, _equal, _error

AGENT_SPEC = {**SPEC, "agent": "agent"}
DIFFER = "(column 'agent'); a dataset has one observation space and one action space for all its agents: " \
         "convert agents that differ into datasets of their own"
# two episodes x two agents, rows in no particular order; the last row of each (episode, agent) is its final
# observation; e2/b's end flag is on its final row
TWO_BY_TWO = """episode,agent,t,obs,action,reward,done
e1,a,1,"[0.25, 1.25]",0,2.0,true
e1,b,0,"[2.5, 3.5]",0,-1.0,false
e1,a,0,"[0.5, 1.5]",1,1.0,false
e2,b,0,"[7, 8]",1,0.25,false
e1,b,1,"[2.25, 3.25]",1,-2.0,false
e1,a,2,"[0.125, 1.125]",,,
e2,a,0,"[5, 6]",0,0.5,false
e1,b,2,"[2.125, 3.125]",,,
e2,b,1,"[7.5, 8.5]",,,true
e2,a,1,"[5.5, 6.5]",,,
"""
# (episode, agent) -> obs, actions, rewards, terminated, truncated
EXPECTED = {
    ("e1", "a"): ([[0.5, 1.5], [0.25, 1.25], [0.125, 1.125]], [1, 0], [1.0, 2.0], True, False),
    ("e1", "b"): ([[2.5, 3.5], [2.25, 3.25], [2.125, 3.125]], [0, 1], [-1.0, -2.0], False, True),
    ("e2", "a"): ([[5.0, 6.0], [5.5, 6.5]], [0], [0.5], False, True),
    ("e2", "b"): ([[7.0, 8.0], [7.5, 8.5]], [1], [0.25], True, False),
}
# parquet: the same rows with integer episode and agent ids, which become text
AS_INTEGERS = {"e1": 1, "e2": 2, "a": 0, "b": 1}


def _parquet(text: str) -> pa.Table:
    rows = list(csv.DictReader(io.StringIO(text)))
    return pa.table({
        "episode": [AS_INTEGERS[r["episode"]] for r in rows], "agent": [AS_INTEGERS[r["agent"]] for r in rows],
        "t": [int(r["t"]) for r in rows], "obs": [json.loads(r["obs"]) for r in rows],
        "action": pa.array([int(r["action"]) if r["action"] else None for r in rows], pa.int64()),
        "reward": pa.array([float(r["reward"]) if r["reward"] else None for r in rows], pa.float64()),
        "done": pa.array([r["done"] == "true" if r["done"] else None for r in rows], pa.bool_()),
    })


def _episodes(path: Path) -> dict[tuple[str, str | None], object]:
    return {(e.id, e.agent_id): e for e in load_episodes(path)}


def _check(episodes: dict, rename: dict[str, str]) -> None:
    """``episodes`` are EXPECTED's, every value, ids renamed by ``rename``."""
    assert sorted(episodes) == sorted((rename.get(e, e), rename.get(a, a)) for e, a in EXPECTED)
    for (episode, agent), (obs, actions, rewards, terminated, truncated) in EXPECTED.items():
        e = episodes[(rename.get(episode, episode), rename.get(agent, agent))]
        _equal(e.obs, np.array(obs, np.float32))
        _equal(e.actions, np.array(actions, np.int64))
        _equal(e.rewards, np.array(rewards, np.float32))
        assert (e.t_start, e.terminated, e.truncated, e.module_id) == (0, terminated, truncated, None)


@pytest.mark.usefixtures("ray_session")
@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_an_agent_column_gives_one_episode_row_per_episode_and_agent(tmp_path, fmt):
    table = tmp_path / f"steps.{fmt}"
    if fmt == "csv":
        table.write_text(TWO_BY_TWO)
        rename, chunk = {}, []
    else:  # integer ids; --max-steps-per-row cuts each (episode, agent) on its own
        pq.write_table(_parquet(TWO_BY_TWO), table)
        rename, chunk = {k: str(v) for k, v in AS_INTEGERS.items()}, ["--max-steps-per-row", "1"]
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(AGENT_SPEC))
    out = tmp_path / "out"
    assert run_cli(["convert", "table", str(table), "--spec", str(tmp_path / "spec.yaml"), "-o", str(out),
                    *chunk]) == 0
    _check(_episodes(out), rename)
    info = read_info(out)
    agents = sorted(rename.get(a, a) for a in ("a", "b"))
    assert info.module_ids == agents  # one module per agent
    assert (info.num_episodes, info.num_steps, info.num_rows) == (4, 6, 6 if chunk else 4)
    report = info.provenance["report"]
    assert (report["records_read"], report["episodes"], report["rows"], report["details"]["agents"]) == (
        10, 4, 6 if chunk else 4, 2)
    assert report["records_quarantined"] == report["episodes_quarantined"] == 0
    assert validate_dataset(out).ok and main(["validate", str(out)]) == 0
    # written back out as a step table, the agent column and its spec convert back to the same episodes
    spec = write_step_table(out, tmp_path / "back.csv", "csv")
    assert yaml.safe_load(spec.read_text())["agent"] == "agent"
    assert run_cli(["convert", "table", str(tmp_path / "back.csv"), "--spec", str(spec),
                    "-o", str(tmp_path / "again")]) == 0
    _check(_episodes(tmp_path / "again"), rename)
    assert read_info(tmp_path / "again").module_ids == agents


PER_AGENT_CSV = """episode,agent,t,obs,action,reward,done
e3,a,0,"[1, 1]",0,1.0,false
e3,a,1,"[2, 2]",1,1.0,false
e3,a,1,"[2, 2]",1,1.0,false
e3,a,2,"[3, 3]",,,
e3,b,0,"[1, 1]",0,1.0,false
e3,b,2,"[3, 3]",,,
e3,c,0,"[4, 4]",1,1.5,true
e3,c,1,"[5, 5]",,,
e4,,0,"[1, 1]",0,1.0,false
e4,d,0,"[6, 6]",0,2.5,false
e4,d,1,"[7, 7]",,,
"""


@pytest.mark.usefixtures("ray_session")
def test_steps_are_checked_per_agent_and_only_the_bad_agent_episode_is_quarantined(tmp_path):
    (tmp_path / "steps.csv").write_text(PER_AGENT_CSV)
    spec = spec_from_dict({**AGENT_SPEC, "observation_space": {**BOX1, "shape": [2], "low": ["-inf"] * 2,
                                                               "high": ["inf"] * 2}, "action_space": DISCRETE2})
    report = convert_table([tmp_path / "steps.csv"], tmp_path / "out", spec)
    episodes = _episodes(tmp_path / "out")
    assert sorted(episodes) == [("e3", "c"), ("e4", "d")]
    _equal(episodes[("e3", "c")].obs, np.array([[4.0, 4], [5, 5]]))
    _equal(episodes[("e4", "d")].obs, np.array([[6.0, 6], [7, 7]]))
    _equal(episodes[("e4", "d")].rewards, np.array([2.5], np.float32))
    records = [json.loads(line) for line in (tmp_path / "out" / QUARANTINE_PATH).read_text().splitlines()]
    # e3/a repeats a step, e3/b skips one (the same step index in other agents is no duplicate); a row without
    # an agent id is quarantined on its own
    assert sorted((r["line"], r["reason"], r["level"], r.get("episode_id"), r.get("agent_id")) for r in records) == [
        (2, "duplicate_step", "episode", "e3", "a"), (3, "duplicate_step", "episode", "e3", "a"),
        (4, "duplicate_step", "episode", "e3", "a"), (5, "duplicate_step", "episode", "e3", "a"),
        (6, "gap", "episode", "e3", "b"), (7, "gap", "episode", "e3", "b"),
        (10, "bad_agent_id", "line", None, None)]
    assert all(r["file"] == str((tmp_path / "steps.csv").resolve()) for r in records)
    assert [r["message"] for r in records if r["line"] == 10] == ["column 'agent': '' is not an agent id (text or "
                                                                  "integer)"]
    assert (report.episodes, report.episodes_quarantined, report.episode_reasons, report.details["agents"]) == (
        2, 2, {"duplicate_step": 1, "gap": 1}, 2)
    assert (report.records_read, report.records_quarantined) == (11, 7)
    assert read_info(tmp_path / "out").module_ids == ["c", "d"]
    assert validate_dataset(tmp_path / "out").ok


def test_agents_are_compared_on_every_observation_leaf_and_on_what_their_rows_hold():
    spec = spec_from_dict({**AGENT_SPEC, "observation": {"pos": ["x", "y"], "speed": "s"}})
    pos, speed = obs_col("pos"), obs_col("speed")
    a = Seen({pos: {2: 5}, speed: {1: 5}, ACTION: {1: 4}}, integers=True, low=0.0, high=2.0)
    # c's rows are final observations only (no action), and one of its three pos values has another width
    c = Seen({pos: {2: 2, 3: 1}, speed: {1: 3}})
    check_agents_agree({"a": a, "c": c}, spec, infer_action=True)
    assert infer_spaces(merged({"a": a, "c": c}), spec)[:2] == (gym.spaces.Dict({
        "pos": gym.spaces.Box(-np.inf, np.inf, (2,), np.float32),
        "speed": gym.spaces.Box(-np.inf, np.inf, (1,), np.float32)}), gym.spaces.Discrete(3))
    d = Seen({pos: {2: 4}, speed: {1: 1, 2: 3}, ACTION: {1: 4}}, integers=True, low=1.0, high=1.0)
    with pytest.raises(ConvertUsageError) as exc:
        check_agents_agree({"a": a, "c": c, "d": d}, spec, infer_action=True)
    assert str(exc.value) == f"agents 'a' and 'd' differ in observation.speed width: 1 value for 'a', 2 values " \
                             f"for 'd' {DIFFER}"


WIDER_B = TWO_BY_TWO.replace('"[2.5, 3.5]"', '"[2.5, 3.5, 4.5]"').replace('"[2.25, 3.25]"', '"[2.25, 3.25, 4]"'
                                                                         ).replace('"[2.125, 3.125]"', '"[2, 3, 4]"')
FLOAT_B = TWO_BY_TWO.replace('e1,b,0,"[2.5, 3.5]",0,', 'e1,b,0,"[2.5, 3.5]",0.5,')


DECLARED_FOR_ALL = "(column 'agent'); a declared observation_space / action_space applies to every agent: " \
                   "declare each agent's spaces in agent_spaces, or leave them out to infer them per agent"


@pytest.mark.usefixtures("ray_session")
@pytest.mark.parametrize("table, declared, difference, hint", [
    (WIDER_B, {"observation_space": {**BOX1, "shape": [2], "low": ["-inf"] * 2, "high": ["inf"] * 2}},
     "observation width: 2 values for 'a', 3 values for 'b'", DECLARED_FOR_ALL),  # one space for every agent
    (FLOAT_B, {}, "action kind: integers 0 or more (Discrete) for 'a', other numbers (Box) for 'b'", DIFFER),
], ids=["observation-width-declared", "action-kind"])
def test_agents_whose_observations_or_actions_differ_are_refused_naming_both(tmp_path, capsys, table, declared,
                                                                              difference, hint):
    (tmp_path / "steps.csv").write_text(table)
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump({**AGENT_SPEC, **declared}))
    capsys.readouterr()
    assert run_cli(["convert", "table", str(tmp_path / "steps.csv"), "--spec", str(tmp_path / "spec.yaml"),
                    "-o", str(tmp_path / "out")]) == 2
    assert _error(capsys) == f"offlinerl convert table: error: agents 'a' and 'b' differ in {difference} {hint}"
    assert not (tmp_path / "out").exists()


@pytest.mark.usefixtures("ray_session")
def test_agents_of_different_widths_get_spaces_of_their_own(tmp_path, capsys):
    (tmp_path / "steps.csv").write_text(WIDER_B)
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(AGENT_SPEC))
    # b's own width is its most common one, 3: its episode e2 of width 2 is quarantined, the rest written
    assert run_cli(["convert", "table", str(tmp_path / "steps.csv"), "--spec", str(tmp_path / "spec.yaml"),
                    "-o", str(tmp_path / "out"), "--allow-quarantine"]) == 0
    records = [json.loads(line) for line in (tmp_path / "out" / QUARANTINE_PATH).read_text().splitlines()]
    assert {(r["episode_id"], r["agent_id"], r["reason"]) for r in records} == {("e2", "b", "wrong_width")}
    info = read_info(tmp_path / "out")
    assert info.format_version == 2 and info.observation_space.shape == (3,) and info.action_space.n == 2
    assert {a: (o.shape, s) for a, (o, s) in info.agent_spaces.items()} == {
        "a": ((2,), gym.spaces.Discrete(2)), "b": ((3,), gym.spaces.Discrete(2))}
    episodes = _episodes(tmp_path / "out")
    assert sorted(episodes) == [("e1", "a"), ("e1", "b"), ("e2", "a")]
    _equal(episodes[("e1", "b")].obs, np.array([[2.5, 3.5, 4.5], [2.25, 3.25, 4], [2, 3, 4]], np.float32))
    _equal(episodes[("e1", "a")].obs, np.array(EXPECTED[("e1", "a")][0], np.float32))
    assert validate_dataset(tmp_path / "out").ok


@pytest.mark.usefixtures("ray_session")
def test_a_missing_or_misnamed_agent_column_is_a_clear_error(tmp_path, capsys):
    (tmp_path / "steps.csv").write_text(TWO_BY_TWO)
    path = str((tmp_path / "steps.csv").resolve())

    def convert(spec: dict, out: str) -> int:
        (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
        capsys.readouterr()
        return run_cli(["convert", "table", path, "--spec", str(tmp_path / "spec.yaml"), "-o", str(tmp_path / out)])

    # the key as the episode schema spells it is not the spec's key
    assert convert({**SPEC, "agent_id": "agent"}, "a") == 2
    assert _error(capsys).startswith("offlinerl convert table: error: spec: unknown key 'agent_id' (did you mean "
                                     "'agent'?) (known: action, action_logp, action_space, agent, ")
    # a column the table does not have: no row is readable, so no space can be inferred, and the error says why
    assert convert({**SPEC, "agent": "agent_id"}, "b") == 2
    assert _error(capsys) == ("offlinerl convert table: error: no readable step rows: cannot infer the spaces "
                              f"(declare them in the spec); file not read: {path}: the header has no column "
                              "'agent_id'")
    # with declared spaces the file is quarantined whole, named in the report
    declared = {"observation_space": {**BOX1, "shape": [2], "low": ["-inf"] * 2, "high": ["inf"] * 2},
                "action_space": DISCRETE2}
    assert convert({**SPEC, "agent": "agent_id", **declared}, "c") == 2  # and nothing was converted: exit 2
    printed = capsys.readouterr()
    assert f"note: file not read: {path}: missing_column: the header has no column 'agent_id'" in printed.out
    assert "no episodes were converted; 1 record(s) quarantined" in printed.err
    records = [json.loads(line) for line in (tmp_path / "c" / QUARANTINE_PATH).read_text().splitlines()]
    assert records == [{"file": path, "line": None, "level": "file", "reason": "missing_column",
                        "message": "the header has no column 'agent_id'"}]
    assert not {"a", "b"} & {p.name for p in tmp_path.iterdir()}
    for bad, message in (({"agent": ["agent", "team"]}, "spec: agent: expected a column name, got ['agent', 'team']"),
                         ({"agent": "episode"}, "spec: agent: 'episode' is also the episode_id column"),
                         ({"agent": "t"}, "spec: agent: 't' is also the step column")):
        with pytest.raises(ConvertUsageError) as exc:
            spec_from_dict({**SPEC, **bad})
        assert str(exc.value) == message
