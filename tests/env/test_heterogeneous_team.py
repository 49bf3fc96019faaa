"""A team whose agents act in different spaces, end to end in a real PettingZoo env (MPE speaker-listener: the
speaker observes 3 numbers and has 3 actions, the listener 11 and 5): collect, validate, a data operation, train
with a team evaluation, evaluate (the job's numbers again), export one file for the team, and fine-tune online
with the online episodes recorded."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

from offlinerl.episodes import load_episodes, read_info
from offlinerl.episodes.validate import validate_dataset
from offlinerl.trusted import ENV_PACKAGES_VAR

pytest.importorskip("mpe2")

from tests.env.spread import run_cli as _run

ENV = "pettingzoo:mpe2.simple_speaker_listener_v4"
KWARGS = {"max_cycles": 10}
WIDTHS = {"listener_0": (11, 5), "speaker_0": (3, 3)}  # observation width, number of actions


@pytest.fixture(autouse=True)
def _trust_mpe2(monkeypatch):
    monkeypatch.setenv(ENV_PACKAGES_VAR, "mpe2")


def test_a_team_of_different_spaces_from_collect_to_finetune(tmp_path, capsys):
    data = tmp_path / "sl"
    code, out, err = _run(capsys, "collect", "--env", ENV, "--env-kwargs", json.dumps(KWARGS), "--episodes", 12,
                          "--seed", 3, "-o", data, "--no-progress")
    assert code == 0, out + err
    info = read_info(data)
    assert info.format_version == 2 and info.observation_space.shape == (11,) and info.action_space.n == 5
    assert {a: (o.shape[0], s.n) for a, (o, s) in info.agent_spaces.items()} == WIDTHS
    episodes = load_episodes(data)
    assert len(episodes) == 24 and {e.agent_id: e.obs.shape[1] for e in episodes} == {a: w for a, (w, _) in WIDTHS.items()}
    assert max(int(e.actions.max()) for e in episodes if e.agent_id == "speaker_0") <= 2
    assert validate_dataset(data, local=True).ok

    code, out, err = _run(capsys, "data", "filter", data, "--top", "50%", "-o", tmp_path / "top")
    assert code == 0, out + err
    # one unit: whole episodes of the team, and the agents' episodes they hold
    assert "kept 6 of 12 episodes" in out and ": 6 episodes (12 agent episodes)," in out, out
    top = read_info(tmp_path / "top")
    assert top.agent_spaces == info.agent_spaces and top.num_rows == 12 and validate_dataset(tmp_path / "top").ok
    code, out, err = _run(capsys, "data", "mix", data, tmp_path / "top", "-o", tmp_path / "mixed")
    assert code == 0, out + err
    assert ": 18 episodes (36 agent episodes)," in out, out  # said "36 episodes": the agents' rows, unlike its inputs
    # a Minari dataset holds one agent's episodes: refused, not the speaker padded into the listener's spaces
    code, out, err = _run(capsys, "export", "minari", data, "--dataset-id", "team/sl-v0", "--root", tmp_path / "m")
    assert code == 2 and "a multi-agent dataset (rows of 2 agents" in err and not (tmp_path / "m").exists()

    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump({
        "algorithm": "iql", "dataset": str(data), "stop": {"iterations": 2},
        "config": {"updates_per_iteration": 20, "train_batch_size": 32, "model": {"hidden": [16]},
                   "normalize_observations": True, "evaluation": {"episodes": 3, "interval": 1}}}))
    code, out, err = _run(capsys, "train", job, "--no-progress", "-o", tmp_path / "run")
    assert code == 0, out + err
    last = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()][-1]
    ckpt = tmp_path / "run" / "checkpoints" / "final"
    spaces = json.loads((ckpt / "algorithm.json").read_text())["module_spaces"]
    assert {m: s["observation_space"]["shape"][0] for m, s in spaces.items()} == {a: w for a, (w, _) in WIDTHS.items()}
    code, out, err = _run(capsys, "evaluate", ckpt, "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["eval/return_mean"] == pytest.approx(last["eval/return_mean"], rel=1e-9)

    code, out, err = _run(capsys, "export", "policy", ckpt, "--format", "torchscript", "--joint",
                          "-o", tmp_path / "team.pt")
    assert code == 0, out + err
    described = json.loads((tmp_path / "team.pt.json").read_text())
    assert {i["module_id"]: i["shape"][1] for i in described["inputs"]} == {a: w for a, (w, _) in WIDTHS.items()}
    assert sorted(described["module_spaces"]) == sorted(WIDTHS)

    spec = tmp_path / "finetune.yaml"
    spec.write_text(yaml.safe_dump({
        "checkpoint": str(ckpt), "config": {"updates_per_iteration": 10, "evaluation": {"episodes": 2, "interval": 1}},
        "online": {"env_steps_per_iteration": 20}, "stop": {"iterations": 1}}))
    code, out, err = _run(capsys, "finetune", spec, "--no-progress", "-o", tmp_path / "online",
                          "--record", tmp_path / "online-episodes")
    assert code == 0, out + err
    recorded = read_info(tmp_path / "online-episodes")
    assert recorded.agent_spaces == info.agent_spaces and validate_dataset(tmp_path / "online-episodes").ok
    online = load_episodes(tmp_path / "online-episodes")
    assert {e.agent_id: e.obs.shape[1] for e in online} == {a: w for a, (w, _) in WIDTHS.items()}
    assert all(np.isfinite(e.obs).all() for e in online)


def test_agents_whose_spaces_cannot_share_columns_are_refused(tmp_path, capsys):
    # one module for a speaker and a listener: refused before training, naming the two agents
    code, _, err = _run(capsys, "collect", "--env", ENV, "--env-kwargs", json.dumps(KWARGS), "--episodes", 2,
                        "-o", tmp_path / "sl", "--no-progress")
    assert code == 0, err
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump({"algorithm": "bc", "dataset": str(tmp_path / "sl"), "stop": {"iterations": 1},
                                   "config": {"policy_mapping": "team", "evaluation": {"interval": 0}}}))
    code, out, err = _run(capsys, "train", job, "--no-progress", "-o", tmp_path / "run")
    assert code == 1 and "module 'team' would act for agents listener_0 and speaker_0, whose spaces differ" in err


def test_a_step_table_of_agents_of_different_spaces_converts_back_to_the_same_dataset(tmp_path, capsys):
    from offlinerl.convert.table.export import write_step_table

    data = tmp_path / "sl"
    code, _, err = _run(capsys, "collect", "--env", ENV, "--env-kwargs", json.dumps(KWARGS), "--episodes", 4,
                        "--seed", 5, "-o", data, "--no-progress")
    assert code == 0, err
    spec = write_step_table(data, tmp_path / "steps.csv")  # each agent's values, empty cells after them
    header, first = (tmp_path / "steps.csv").read_text().splitlines()[:2]
    assert header.split(",")[3:14] == [f"obs_{i}" for i in range(11)]
    assert first.split(",")[1] == "listener_0" or first.split(",")[3 + 3] == ""
    declared = yaml.safe_load(spec.read_text())
    assert sorted(declared["agent_spaces"]) == sorted(WIDTHS) and "observation_space" not in declared
    code, out, err = _run(capsys, "convert", "table", tmp_path / "steps.csv", "--spec", spec, "-o", tmp_path / "back")
    assert code == 0, out + err
    back = read_info(tmp_path / "back")
    assert back.fingerprint == read_info(data).fingerprint  # every value, every space
    assert declared["env_kwargs"] == KWARGS and back.env_spec == read_info(data).env_spec  # the recorded task

    # the spaces inferred per agent where the agents' widths differ (and the env's, without agent_spaces)
    for name, drop in (("inferred", ("agent_spaces", "env", "env_kwargs")), ("env", ("agent_spaces",))):
        other = tmp_path / f"{name}.spec.yaml"
        other.write_text(yaml.safe_dump({k: v for k, v in declared.items() if k not in drop}))
        code, out, err = _run(capsys, "convert", "table", tmp_path / "steps.csv", "--spec", other, "-o",
                              tmp_path / name)
        assert code == 0, out + err
        got = read_info(tmp_path / name)
        assert {a: (o.shape[0], s.n) for a, (o, s) in got.agent_spaces.items()} == WIDTHS
        assert validate_dataset(tmp_path / name, local=True).ok
    assert "agents of different spaces, each inferred from its own rows" in json.dumps(
        read_info(tmp_path / "inferred").provenance["report"])

    # an agent the declared spaces do not name: its episodes are quarantined, the others written
    declared["agent_spaces"].pop("speaker_0")
    partial = tmp_path / "partial.spec.yaml"
    partial.write_text(yaml.safe_dump(declared))
    code, out, err = _run(capsys, "convert", "table", tmp_path / "steps.csv", "--spec", partial, "-o",
                          tmp_path / "partial", "--allow-quarantine")
    assert code == 0, out + err
    assert read_info(tmp_path / "partial").num_rows == 4 and "unknown_agent" in out
