"""Agents of different spaces in one dataset (format version 2): storage spaces, padding, per-agent decoding,
validation in each agent's own spaces, the module spaces a job derives, and refusals."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest

from offlinerl.episodes import load_episodes, read_info, write_dataset
from offlinerl.episodes.agent_spaces import AgentSpacesError, module_spaces, storage_spaces
from offlinerl.episodes.episode import SingleAgentEpisode
from offlinerl.episodes.info import DatasetInfoError
from offlinerl.episodes.validate import validate_dataset

SMALL = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
LARGE = gym.spaces.Box(np.array([-2, -2, -2, -5, -5], np.float32), np.array([2, 2, 2, 5, 5], np.float32))
OBS = {"speaker": SMALL, "listener": LARGE}
ACT = {"speaker": gym.spaces.Discrete(3), "listener": gym.spaces.Discrete(5)}


def _episodes(seed: int = 0) -> list[SingleAgentEpisode]:
    rng = np.random.default_rng(seed)
    out = []
    for k in range(3):
        for agent, width, n in (("speaker", 3, 3), ("listener", 5, 5)):
            t = 4 + k
            out.append(SingleAgentEpisode(
                id=str(k), agent_id=agent, obs=rng.uniform(-1, 1, (t + 1, width)).astype(np.float32),
                actions=rng.integers(0, n, t), rewards=rng.normal(size=t).astype(np.float32), truncated=True,
                extras={"action_logp": np.full(t, -np.log(n), np.float32)}))
    return out


def _write(path, episodes=None):
    obs, act, agents = storage_spaces(OBS, ACT)
    return write_dataset(episodes or _episodes(), path, observation_space=obs, action_space=act, agent_spaces=agents)


def test_storage_spaces_pad_boxes_and_widen_discretes():
    obs, act, agents = storage_spaces(OBS, ACT)
    assert obs == gym.spaces.Box(np.array([-2, -2, -2, -5, -5], np.float32), np.array([2, 2, 2, 5, 5], np.float32))
    assert act == gym.spaces.Discrete(5)
    assert agents == {"listener": (LARGE, ACT["listener"]), "speaker": (SMALL, ACT["speaker"])}
    # a dimension only the wider agent has holds the narrower one's padding, 0: the bounds include it
    obs, _, _ = storage_spaces({"a": gym.spaces.Box(1.0, 2.0, (1,), np.float32),
                                "b": gym.spaces.Box(1.0, 2.0, (2,), np.float32)}, {"a": ACT["listener"], "b": ACT["listener"]})
    np.testing.assert_array_equal(obs.low, [1.0, 0.0])
    np.testing.assert_array_equal(obs.high, [2.0, 2.0])
    same = storage_spaces({"a": SMALL, "b": SMALL}, {"a": ACT["speaker"], "b": ACT["speaker"]})
    assert same == (SMALL, ACT["speaker"], None)  # one space for every agent: a version-1 dataset
    with pytest.raises(AgentSpacesError, match=r"agents a and b have observation spaces .* only when all are 1-D "
                                               r"Boxes of one dtype or all are Discrete"):
        storage_spaces({"a": SMALL, "b": gym.spaces.Discrete(4)}, {"a": ACT["speaker"], "b": ACT["speaker"]})


def test_round_trip_keeps_every_value_in_each_agents_own_space(tmp_path):
    episodes = _episodes()
    info = _write(tmp_path / "d", episodes)
    assert info.format_version == 2
    stored = json.loads((tmp_path / "d" / "dataset.json").read_text())
    assert stored["format_version"] == 2 and stored["observation_space"]["shape"] == [5]
    assert stored["agent_spaces"]["speaker"]["observation_space"]["shape"] == [3]
    assert read_info(tmp_path / "d").agent_spaces == {"listener": (LARGE, ACT["listener"]),
                                                      "speaker": (SMALL, ACT["speaker"])}
    back = load_episodes(tmp_path / "d")
    assert [(e.id, e.agent_id) for e in back] == [(e.id, e.agent_id) for e in episodes]
    for a, b in zip(episodes, back):
        assert b.obs.shape == a.obs.shape
        np.testing.assert_array_equal(b.obs, a.obs)
        np.testing.assert_array_equal(b.actions, a.actions)
        np.testing.assert_array_equal(b.rewards, a.rewards)
        np.testing.assert_array_equal(b.extras["action_logp"], a.extras["action_logp"])
    assert validate_dataset(tmp_path / "d", local=True).ok


def test_fingerprint_covers_the_agent_spaces(tmp_path):
    a = _write(tmp_path / "a")
    obs, act, agents = storage_spaces(OBS, ACT)
    agents["speaker"] = (gym.spaces.Box(-3.0, 3.0, (3,), np.float32), ACT["speaker"])  # the same values, other bounds
    b = write_dataset(_episodes(), tmp_path / "b", observation_space=obs, action_space=act, agent_spaces=agents)
    assert a.fingerprint != b.fingerprint


def test_validation_checks_each_agent_in_its_own_space(tmp_path):
    episodes = _episodes()
    episodes[0] = SingleAgentEpisode(id="0", agent_id="speaker", obs=episodes[0].obs,
                                     actions=np.array([0, 1, 2, 4]), rewards=episodes[0].rewards, truncated=True,
                                     extras=episodes[0].extras)  # 4: inside the storage Discrete(5), not Discrete(3)
    _, _, agents = storage_spaces(OBS, ACT)
    agents["speaker"] = (SMALL, gym.spaces.Discrete(5))
    obs, act, _ = storage_spaces(OBS, ACT)
    write_dataset(episodes, tmp_path / "d", observation_space=obs, action_space=act, agent_spaces=agents)
    meta = json.loads((tmp_path / "d" / "dataset.json").read_text())
    meta["agent_spaces"]["speaker"]["action_space"]["n"] = 3
    (tmp_path / "d" / "dataset.json").write_text(json.dumps(meta))
    report = validate_dataset(tmp_path / "d", local=True)
    assert [c.name for c in report.failed] == ["actions"]
    example = report.check("actions").examples[0]
    assert (example.row, example.episode_id) == (1, "0") and "actions[3] = 4, allowed 0..2" in example.detail


def test_padding_must_be_zero(tmp_path):
    _write(tmp_path / "d")
    import pyarrow as pa
    import pyarrow.parquet as pq

    f = next((tmp_path / "d").glob("part-*.parquet"))
    table = pq.read_table(f)
    obs = table.column("obs").to_pylist()
    obs[0][0][4] = 0.5  # the speaker's first observation, in its padding
    table = table.set_column(table.schema.get_field_index("obs"), "obs",
                             pa.array(obs, type=table.schema.field("obs").type))
    pq.write_table(table, f)
    report = validate_dataset(tmp_path / "d", local=True)
    assert "observations" in [c.name for c in report.warnings]
    assert report.check("observations").examples[0].row == 1


def test_dataset_json_is_checked(tmp_path):
    _write(tmp_path / "d")
    path = tmp_path / "d" / "dataset.json"
    meta = json.loads(path.read_text())
    for change, message in (
            (lambda m: m.pop("agent_spaces"), "format_version 2 needs agent_spaces"),
            (lambda m: m.update(format_version=1), "format_version 1 has no agent_spaces"),
            (lambda m: m["agent_spaces"]["listener"]["observation_space"].update(
                shape=[7], low=[0] * 7, high=[1] * 7), r"agent 'listener''s observation space .* is not stored"),
            (lambda m: m["agent_spaces"].update(x=1), r"agent_spaces\['x'\] must hold"),
            (lambda m: m["agent_spaces"].update({f"a{i}": {  # 16 x 2**21 bounds: refused before any is made
                "observation_space": {"type": "Box", "dtype": "float32", "shape": [2**21], "low": 0, "high": 1},
                "action_space": {"type": "Discrete", "n": 2}} for i in range(16)}),
             r"declare 33,554,4\d\d Box elements in all, more than 16,777,216")):
        broken = json.loads(json.dumps(meta))
        change(broken)
        path.write_text(json.dumps(broken))
        with pytest.raises(DatasetInfoError, match=message):
            read_info(tmp_path / "d")


def test_module_spaces_follow_the_agents_and_refuse_a_mixed_module():
    _, _, agents = storage_spaces(OBS, ACT)
    obs, act = LARGE, ACT["listener"]
    pairs = [("speaker", "speaker"), ("listener", "listener")]
    assert module_spaces(pairs, agents, obs, act, ["listener", "speaker"]) == {
        "listener": (LARGE, ACT["listener"]), "speaker": (SMALL, ACT["speaker"])}
    assert module_spaces([], None, obs, act, ["m"]) == {"m": (obs, act)}
    with pytest.raises(AgentSpacesError, match=r"module 'shared' would act for agents listener and speaker, whose "
                                               r"spaces differ .* map them to different modules"):
        module_spaces([("shared", "speaker"), ("shared", "listener")], agents, obs, act, ["shared"])


def test_writer_refuses_an_agent_without_spaces(tmp_path):
    episodes = _episodes()
    episodes.append(SingleAgentEpisode(id="9", agent_id="eve", obs=np.zeros((2, 3), np.float32), actions=np.zeros(1),
                                       rewards=np.zeros(1, np.float32), truncated=True))
    with pytest.raises(ValueError, match=r"episode '9': agent 'eve' has no entry in agent_spaces"):
        _write(tmp_path / "d", episodes)
    assert not (tmp_path / "d").exists()


def test_inspect_summarises_each_agent_in_its_own_spaces(tmp_path):
    from offlinerl.episodes.stats import dataset_stats, format_stats

    episodes = _episodes()
    _write(tmp_path / "d", episodes)
    stats = dataset_stats(tmp_path / "d", local=True)
    for agent, width in (("speaker", 3), ("listener", 5)):
        obs = np.concatenate([e.obs[:-1] for e in episodes if e.agent_id == agent]).astype(np.float64)
        actions = np.concatenate([e.actions for e in episodes if e.agent_id == agent])
        (leaf,) = stats["agents"][agent]["observations"]
        assert leaf["count"] == len(obs) and len(leaf["mean"]) == width
        np.testing.assert_allclose(leaf["mean"], obs.mean(0), rtol=1e-6)
        np.testing.assert_allclose(leaf["max"], obs.max(0), rtol=1e-6)
        (act,) = stats["agents"][agent]["actions"]
        assert act["histogram"] == {str(v): int((actions == v).sum()) for v in np.unique(actions)}
    text = format_stats(stats)
    assert "agent speaker: observations (obs[:T] of its rows):\n  Box(-1.0, 1.0, (3,), float32)" in text
    # the team's episodes first, in the unit collect and the data ops count: returns summed over agents, the
    # longest agent's steps; then the agents' episodes
    team: dict[str, list] = {}
    for e in episodes:
        t = team.setdefault(e.id, [0.0, 0])
        t[0], t[1] = t[0] + float(np.sum(e.rewards, dtype=np.float64)), max(t[1], len(e))
    returns = [t[0] for t in team.values()]
    assert stats["team"]["episodes"] == len(team) and stats["episodes"] == len(episodes)
    assert stats["team"]["returns"]["mean"] == pytest.approx(np.mean(returns), rel=1e-6)
    assert stats["team"]["lengths"]["max"] == max(t[1] for t in team.values())
    assert f"  team episodes {len(team)} ({len(episodes)} agent episodes)\n  team returns mean " in text
    assert f"\n  agent episodes {len(episodes)} (rows " in text
