"""Multi-agent end to end in a real PettingZoo env (MPE simple_spread from mpe2): ``pettingzoo:MODULE`` ids under
the trust rule, ``collect`` recording every agent's episode, a job evaluating the joint policy (team return and
per-agent returns) in the dataset's own env, and ``evaluate`` reproducing the job's evaluation exactly."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from offlinerl.env.multi_agent import RandomJointPolicy, env_spaces, run_team_episodes
from offlinerl.episodes import load_episodes, read_info
from offlinerl.trusted import ENV_PACKAGES_VAR, UntrustedNameError, env_id_problem, make_env, make_parallel_env

pytest.importorskip("mpe2")

from tests.env.spread import AGENTS, KWARGS, SPREAD
from tests.env.spread import run_cli as _run


def test_pettingzoo_ids_follow_the_trust_rule(monkeypatch):
    monkeypatch.delenv(ENV_PACKAGES_VAR, raising=False)
    problem = env_id_problem(SPREAD, "the dataset d")
    assert "would import the module 'mpe2.simple_spread_v3'" in problem and "--env-package mpe2" in problem
    assert env_id_problem(SPREAD, explicit=True) is None
    assert "does not name a module" in env_id_problem("pettingzoo:os;rm", explicit=True)
    with pytest.raises(UntrustedNameError, match="would import"):
        make_parallel_env(SPREAD, KWARGS, what="the dataset d")
    with pytest.raises(UntrustedNameError, match="multi-agent PettingZoo env"):
        make_env(SPREAD, explicit=True)
    with pytest.raises(UntrustedNameError, match="no module 'no_such_pkg'"):
        make_parallel_env("pettingzoo:no_such_pkg.env", explicit=True)
    monkeypatch.setenv(ENV_PACKAGES_VAR, "mpe2")
    assert env_id_problem(SPREAD, "the dataset d") is None
    make_parallel_env(SPREAD, KWARGS, what="the dataset d").close()


def test_team_loop_sums_agents_and_records_each_agent():
    env = make_parallel_env(SPREAD, KWARGS, explicit=True)
    obs_spaces, act_spaces = env_spaces(env)
    played = run_team_episodes(env, RandomJointPolicy(obs_spaces, act_spaces, seed=3), [5, 6], record=True)
    assert played.lengths == [10, 10]
    assert [e.agent_id for e in played.episodes] == AGENTS * 2
    assert [e.id for e in played.episodes] == ["ep-0"] * 3 + ["ep-1"] * 3
    for j in range(2):
        rows = played.episodes[3 * j:3 * j + 3]
        assert played.returns[j] == pytest.approx(sum(e.episode_return for e in rows), abs=1e-4)
        for e in rows:
            assert played.agent_returns[e.agent_id][j] == pytest.approx(e.episode_return, abs=1e-4)
            assert len(e) == 10 and e.truncated and not e.terminated
            np.testing.assert_allclose(e.extras["action_logp"], np.log(1 / 5), rtol=1e-6)
    # replay agent_0's first episode: the same seed and the recorded joint actions give the recorded observations
    obs, _ = env.reset(seed=5)
    first = played.episodes[:3]
    np.testing.assert_array_equal(first[0].obs[0], obs["agent_0"])
    for t in range(10):
        obs, rewards, *_ = env.step({e.agent_id: int(e.actions[t]) for e in first})
        for e in first:
            np.testing.assert_array_equal(e.obs[t + 1], obs[e.agent_id])
            assert e.rewards[t] == np.float32(rewards[e.agent_id])
    env.close()


def _collect(capsys, out: Path, episodes: int = 4, seed: int = 1) -> None:
    code, text, err = _run(capsys, "collect", "--env", SPREAD, "--env-kwargs", json.dumps(KWARGS), "--episodes",
                           episodes, "--seed", seed, "-o", out, "--no-progress")
    assert code == 0, err
    assert f"{episodes} episodes x 3 agents (agent_0, agent_1, agent_2)" in text and "team return" in text


def test_collect_records_every_agents_episode(tmp_path, capsys):
    _collect(capsys, tmp_path / "a")
    _collect(capsys, tmp_path / "b")
    info = read_info(tmp_path / "a")
    assert info.module_ids == AGENTS
    assert (info.num_rows, info.num_steps) == (12, 120)
    assert info.env_id == SPREAD and info.env_kwargs == KWARGS
    assert info.fingerprint == read_info(tmp_path / "b").fingerprint  # same seed, same data
    rows = load_episodes(tmp_path / "a")
    team: dict[str, float] = {}
    for e in rows:
        team[e.id] = team.get(e.id, 0.0) + e.episode_return
    assert sorted(team) == ["1", "2", "3", "4"]
    assert info.provenance["return_mean"] == pytest.approx(np.mean(list(team.values())), rel=1e-5)
    code, _, err = _run(capsys, "collect", "--env", SPREAD, "--episodes", 1, "--max-episode-steps", 5, "-o",
                        tmp_path / "c", "--no-progress")
    assert code == 2 and "max_cycles" in (err + _)
    # a vector width the team loop has no use for was ignored without a word (rc 0)
    code, _, err = _run(capsys, "collect", "--env", SPREAD, "--episodes", 1, "--num-envs", 2, "-o", tmp_path / "c",
                        "--no-progress")
    assert code == 2 and "--num-envs is a gymnasium env's vector width" in err and not (tmp_path / "c").exists()


@pytest.mark.usefixtures("ray_session")
def test_train_evaluates_the_team_and_evaluate_reproduces_it(tmp_path, capsys, monkeypatch):
    data = tmp_path / "spread"
    _collect(capsys, data, episodes=6)
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump({
        "algorithm": "bc", "dataset": str(data), "stop": {"iterations": 2},
        "config": {"updates_per_iteration": 20, "train_batch_size": 32, "model": {"hidden": [16]},
                   "normalize_observations": True, "evaluation": {"episodes": 3, "interval": 1}}}))
    monkeypatch.delenv(ENV_PACKAGES_VAR, raising=False)
    code, out, err = _run(capsys, "train", job, "--no-progress", "-o", tmp_path / "refused")
    assert code != 0 and "--env-package mpe2" in out + err  # the dataset's id imports nothing by itself
    monkeypatch.setenv(ENV_PACKAGES_VAR, "mpe2")
    code, out, err = _run(capsys, "train", job, "--no-progress", "-o", tmp_path / "run")
    assert code == 0, out + err
    last = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()][-1]
    agents = [last[f"eval/{a}/return_mean"] for a in AGENTS]
    assert last["eval/return_mean"] == pytest.approx(sum(agents), rel=1e-6)
    ckpt = tmp_path / "run" / "checkpoints" / "final"
    state = json.loads((ckpt / "algorithm.json").read_text())["connector_state"]
    assert sorted(state) == AGENTS  # observation statistics per module
    code, out, err = _run(capsys, "evaluate", ckpt, "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["env"] == SPREAD and result["env_kwargs"] == KWARGS
    assert result["eval/return_mean"] == pytest.approx(last["eval/return_mean"], rel=1e-9)
    assert [result[f"eval/{a}/return_mean"] for a in AGENTS] == pytest.approx(agents, rel=1e-9)
    # the checkpoint's joint policy records a dataset: greedy, on the evaluation's reset seeds, the same returns
    code, out, err = _run(capsys, "collect", "--env", SPREAD, "--env-kwargs", json.dumps(KWARGS), "--policy", ckpt,
                          "--greedy", "--episodes", 3, "--seed", 10_000,  # evaluation.seed
                          "-o", tmp_path / "recorded", "--no-progress")
    assert code == 0, out + err
    recorded = read_info(tmp_path / "recorded")
    assert recorded.num_rows == 9 and recorded.provenance["algorithm"] == "bc"
    assert recorded.provenance["return_mean"] == pytest.approx(result["eval/return_mean"], rel=1e-5)
    code, out, err = _run(capsys, "evaluate", ckpt, "--env", "CartPole-v1")
    assert code == 1 and "needs a multi-agent env (pettingzoo:MODULE)" in err


def test_checkpoint_selection_by_ope_is_refused_for_several_modules(tmp_path, capsys):
    data = tmp_path / "spread"
    _collect(capsys, data, episodes=2)
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump({
        "algorithm": "bc", "dataset": str(data), "stop": {"iterations": 1}, "checkpoint_interval": 1,
        "config": {"updates_per_iteration": 2, "evaluation": {"interval": 0, "ope": "fqe"},
                   "data": {"holdout": {"fraction": 0.5}}}}))
    code, out, err = _run(capsys, "train", job, "--no-progress", "-o", tmp_path / "run")
    assert code == 2 and "trains 3 modules; selection scores one policy per checkpoint" in out + err
    assert not (tmp_path / "run").exists()


@pytest.mark.usefixtures("ray_session")
def test_a_step_table_with_an_agent_column_trains_a_team_evaluated_in_the_env(tmp_path, capsys, monkeypatch):
    from offlinerl.convert.table.export import write_step_table

    collected = tmp_path / "collected"
    code, _, err = _run(capsys, "collect", "--env", SPREAD, "--episodes", 3, "--seed", 2, "-o", collected,
                        "--no-progress")
    assert code == 0, err
    spec = write_step_table(collected, tmp_path / "steps.csv")  # a CSV with an agent column, env named in the spec
    assert "agent: agent" in spec.read_text() and f"env: {SPREAD}" in spec.read_text()
    monkeypatch.delenv(ENV_PACKAGES_VAR, raising=False)
    code, out, err = _run(capsys, "convert", "table", tmp_path / "steps.csv", "--spec", spec, "-o", tmp_path / "ds")
    assert code == 2 and "--env-package mpe2" in out + err  # the spec's env imports nothing by itself
    monkeypatch.setenv(ENV_PACKAGES_VAR, "mpe2")
    code, out, err = _run(capsys, "convert", "table", tmp_path / "steps.csv", "--spec", spec, "-o", tmp_path / "ds")
    assert code == 0, out + err
    info = read_info(tmp_path / "ds")
    assert info.fingerprint == read_info(collected).fingerprint and info.module_ids == AGENTS
    assert info.env_id == SPREAD
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump({
        "algorithm": "bc", "dataset": str(tmp_path / "ds"), "stop": {"iterations": 1},
        "config": {"updates_per_iteration": 5, "train_batch_size": 16, "model": {"hidden": [8]},
                   "evaluation": {"episodes": 2, "interval": 1}}}))
    code, out, err = _run(capsys, "train", job, "--no-progress", "-o", tmp_path / "run")
    assert code == 0, out + err
    last = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()][-1]
    assert last["eval/length_mean"] == 25 and all(f"eval/{a}/return_mean" in last for a in AGENTS)
