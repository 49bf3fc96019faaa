"""Online experience from a PettingZoo env (MPE simple_spread from mpe2): whole team episodes, each agent's
experience to the module acting for it, the same for any number of multi-agent runners; ``finetune`` from an
offline multi-agent checkpoint, evaluated (and gated) on the team, resumed exactly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml

from offlinerl.algorithms.iql import IQLConfig
from offlinerl.config_io import ConfigError
from offlinerl.episodes import load_episodes, read_info
from offlinerl.training.algorithm import Algorithm
from offlinerl.training.online_config import OnlineConfig
from offlinerl.trusted import ENV_PACKAGES_VAR

pytest.importorskip("mpe2")

from tests.env.spread import AGENTS, KWARGS, SPREAD
from tests.env.spread import run_cli as _run


@pytest.fixture(scope="module")
def spread(tmp_path_factory) -> Path:
    """Six random-policy episodes of simple_spread (3 agents, 10 steps)."""
    from offlinerl.cli import main

    out = tmp_path_factory.mktemp("spread") / "data"
    assert main(["collect", "--env", SPREAD, "--env-kwargs", json.dumps(KWARGS), "--episodes", "6", "--seed", "1",
                 "-o", str(out), "--no-progress"]) == 0
    return out


@pytest.fixture(autouse=True)
def _trust_mpe2(monkeypatch):
    monkeypatch.setenv(ENV_PACKAGES_VAR, "mpe2")


def _config(**extra) -> IQLConfig:
    return IQLConfig.from_dict({"updates_per_iteration": 5, "train_batch_size": 16, "model": {"hidden": [16]},
                                "normalize_observations": True, "evaluation": {"episodes": 2, "interval": 0},
                                **extra})


def _run_online(data: Path, runners: int, iterations: int = 2, **extra) -> tuple[list[dict], dict, Algorithm]:
    algo = Algorithm("iql", _config(**extra), data,
                     online=OnlineConfig(env_steps_per_iteration=25, num_env_runners=runners))
    try:
        metrics = [algo.train() for _ in range(iterations)]
        return metrics, algo.learner_group.get_weights(), algo
    finally:
        algo.stop()


@pytest.mark.usefixtures("ray_session")
def test_each_agents_experience_goes_to_its_module_and_runners_do_not_change_it(spread):
    metrics, weights, algo = _run_online(spread, runners=0)
    # 25 steps asked, whole 10-step episodes: 3 episodes (30 team steps) of 3 agents per iteration
    assert [m["online/env_steps"] for m in metrics] == [30, 60]
    assert [m["env_runners/episode/episodes"] for m in metrics] == [3, 3]
    assert metrics[-1]["online/replay_size"] == 2 * 3 * 30
    adds = algo.experience._adds
    assert [a.rows for a in adds] == [[30, 30, 30]] * 2  # one replay per module, each its agent's 30 steps
    assert sorted({e.agent_id for a in adds for e in a.episodes}) == AGENTS
    assert [e.id for e in adds[1].episodes][::3] == ["online-2-0", "online-2-1", "online-2-2"]
    # two runner actors play the same episodes with the same synced weights: the same job
    remote, remote_weights, _ = _run_online(spread, runners=2)
    for a, b in zip(metrics, remote):
        assert a["env_runners/episode/return_mean"] == b["env_runners/episode/return_mean"]
        assert a["agent_1/losses/critic"] == b["agent_1/losses/critic"]
    for key, value in weights.items():
        torch.testing.assert_close(value, remote_weights[key], rtol=0, atol=0)


@pytest.mark.usefixtures("ray_session")
def test_the_team_evaluation_on_evaluation_runners_plays_the_drivers_episodes(spread):
    local = Algorithm("iql", _config(), spread, online=OnlineConfig(env_steps_per_iteration=25))
    remote = Algorithm("iql", _config(), spread, online=OnlineConfig(env_steps_per_iteration=25,
                                                                        num_eval_env_runners=2))
    try:
        assert local.experience.eval_runners is None and remote.experience.eval_runners.num_env_runners == 2
        for algo in (local, remote):
            algo.train()
            algo.set_weights(local.learner_group.get_weights())  # one policy, two ways of playing it
        here, there = local.evaluate(5), remote.evaluate(5)
        assert here.keys() == there.keys() and "eval/agent_2/return_mean" in there
        for key, value in here.items():
            assert there[key] == pytest.approx(value, rel=1e-9, abs=1e-9), key
    finally:
        local.stop()
        remote.stop()


@pytest.mark.usefixtures("ray_session")
def test_a_shared_module_learns_from_every_agent_online(spread):
    metrics, _, algo = _run_online(spread, runners=0, iterations=1, policy_mapping="shared")
    assert algo.offline_data.module_ids == ["shared"]
    assert [a.rows for a in algo.experience._adds] == [[90]]  # 3 agents x 30 steps into the one replay
    assert metrics[0]["online/replay_size"] == 90 and "losses/critic" in metrics[0]  # one module: unprefixed


def test_online_experience_needs_a_team_env_and_team_settings(spread):
    from offlinerl.data.offline_data import OfflineData
    from offlinerl.training.setup import check_online_env

    config = _config()
    data = OfflineData(spread, config)
    with pytest.raises(ConfigError, match="trains 3 modules; their online experience comes from a multi-agent env"):
        check_online_env(config, OnlineConfig(env="CartPole-v1"), data, str(spread))
    with pytest.raises(ConfigError, match="^online.num_envs: a multi-agent runner plays one"):
        check_online_env(config, OnlineConfig(num_envs=2), data, str(spread))
    check_online_env(config, OnlineConfig(env=SPREAD, env_kwargs=KWARGS), data, str(spread))


@pytest.mark.usefixtures("ray_session")
def test_finetune_a_team_from_an_offline_checkpoint_gated_recorded_and_resumed(spread, tmp_path, capsys):
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump({
        "algorithm": "iql", "dataset": str(spread), "stop": {"iterations": 1},
        "config": {"updates_per_iteration": 20, "train_batch_size": 32, "model": {"hidden": [16]},
                   "normalize_observations": True, "evaluation": {"episodes": 3, "interval": 1}}}))
    code, out, err = _run(capsys, "train", job, "--no-progress", "-o", tmp_path / "offline")
    assert code == 0, out + err

    def finetune_spec(iterations: int) -> Path:
        spec = tmp_path / f"finetune-{iterations}.yaml"
        spec.write_text(yaml.safe_dump({
            "checkpoint": str(tmp_path / "offline" / "checkpoints" / "final"),
            "config": {"updates_per_iteration": 10, "evaluation": {"episodes": 3, "interval": 1}},
            "online": {"env_steps_per_iteration": 30, "promotion": "gated", "gate_episodes": 2, "gate_interval": 1},
            "checkpoint_interval": 1, "stop": {"iterations": iterations}}))
        return spec

    code, out, err = _run(capsys, "finetune", finetune_spec(3), "--no-progress", "-o", tmp_path / "whole")
    assert code == 0, out + err
    assert f"fine-tuned online in {SPREAD}" in out
    result = json.loads((tmp_path / "whole" / "result.json").read_text())
    # 3 x 30 sampled + 3 gates x 2 policies x 2 episodes x 10 steps
    assert result["env"] == SPREAD and result["env_steps"] == 90 + 120
    whole = [json.loads(line) for line in (tmp_path / "whole" / "metrics.jsonl").read_text().splitlines()]
    last = whole[-1]
    assert last["eval/return_mean"] == pytest.approx(sum(last[f"eval/{a}/return_mean"] for a in AGENTS), rel=1e-6)
    assert "online/candidate_return" in last
    recorded = read_info(tmp_path / "whole" / "online-episodes")
    assert recorded.module_ids == AGENTS and recorded.num_steps == 3 * 3 * 30
    assert {e.agent_id for e in load_episodes(tmp_path / "whole" / "online-episodes")} == set(AGENTS)
    # stopped after 2 iterations and resumed: the job the uninterrupted one was
    code, out, err = _run(capsys, "finetune", finetune_spec(2), "--no-progress", "-o", tmp_path / "cut")
    assert code == 0, out + err
    code, out, err = _run(capsys, "finetune", "--resume", tmp_path / "cut", "--set", "stop.iterations=3",
                          "--no-progress")
    assert code == 0, out + err
    cut = [json.loads(line) for line in (tmp_path / "cut" / "metrics.jsonl").read_text().splitlines()]
    keys = [k for k in last if "/losses/" in k or k.startswith(("eval/", "env_runners/episode/return"))]
    assert keys and all(cut[-1][k] == last[k] for k in keys)
