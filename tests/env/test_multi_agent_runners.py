"""Multi-agent recording on ``MultiAgentEnvRunner`` Ray actors (MPE simple_spread from mpe2): episode ``k`` resets
with ``seed + k`` and draws its random numbers from ``(seed, k)``, so ``collect`` writes the same dataset (the same
fingerprint) on 0, 1 or 2 runners, with a random joint policy and with a checkpoint's sampling modules; a killed
runner is replaced once and its episodes are played again identically."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from offlinerl.cli import main
from offlinerl.env.multi_agent import RandomJointPolicy, env_spaces
from offlinerl.env.multi_agent_runner import MultiAgentEnvRunnerGroup, TeamRunnerConfig, record_team_episodes
from offlinerl.episodes import load_episodes, read_info
from offlinerl.trusted import ENV_PACKAGES_VAR, make_parallel_env

pytest.importorskip("mpe2")

from tests.env.spread import KWARGS, SPREAD


def _collect(capsys, out: Path, runners: int, *extra) -> None:
    code = main([str(a) for a in ("collect", "--env", SPREAD, "--env-kwargs", json.dumps(KWARGS), "--episodes", 6,
                                  "--seed", 3, "--num-env-runners", runners, "-o", out, "--no-progress", *extra)])
    captured = capsys.readouterr()
    assert code == 0, captured.out + captured.err
    assert "6 episodes x 3 agents" in captured.out and "Traceback" not in captured.err


def _same(a, b) -> None:
    assert (a.id, a.agent_id) == (b.id, b.agent_id)
    np.testing.assert_array_equal(a.obs, b.obs)
    np.testing.assert_array_equal(a.actions, b.actions)
    np.testing.assert_array_equal(a.rewards, b.rewards)
    assert sorted(a.extras) == sorted(b.extras)
    for name in a.extras:
        np.testing.assert_array_equal(a.extras[name], b.extras[name])


def test_an_episode_depends_only_on_the_seed_and_its_index():
    env = make_parallel_env(SPREAD, KWARGS, explicit=True)
    policy = RandomJointPolicy(*env_spaces(env))
    whole = record_team_episodes(env, policy, 3, range(4))
    tail = record_team_episodes(env, policy, 3, [2, 3])  # another "runner": a fresh start at episode 2
    assert [e.id for e in whole.episodes] == [str(3 + k) for k in range(4) for _ in range(3)]
    assert whole.lengths == [10] * 4 and tail.returns == whole.returns[2:]
    for a, b in zip(whole.episodes[6:], tail.episodes, strict=True):
        _same(a, b)
    mixed = record_team_episodes(env, policy, 3, [3], epsilon=0.5)
    assert not mixed.episodes[0].extras  # an epsilon mixture records no action_logp
    for a, b in zip(mixed.episodes, record_team_episodes(env, policy, 3, [3], epsilon=0.5).episodes, strict=True):
        _same(a, b)
    assert record_team_episodes(env, policy, 4, [1]).returns != whole.returns[2:3]  # (4, 1) is not (3, 2)
    env.close()


@pytest.mark.usefixtures("ray_session")
def test_a_random_collection_is_the_same_on_0_1_and_2_runners(tmp_path, capsys):
    for n in (0, 1, 2):
        _collect(capsys, tmp_path / f"r{n}", n)
    infos = [read_info(tmp_path / f"r{n}") for n in (0, 1, 2)]
    assert len({i.fingerprint for i in infos}) == 1
    assert [i.provenance["num_env_runners"] for i in infos] == [0, 1, 2]
    assert [i.provenance["env_runner_restarts"] for i in infos] == [0, 0, 0]
    assert infos[0].num_rows == 18 and infos[0].num_steps == 180
    rows = load_episodes(tmp_path / "r2")
    assert sorted({e.id for e in rows}, key=int) == ["3", "4", "5", "6", "7", "8"]
    for a, b in zip(load_episodes(tmp_path / "r0"), rows, strict=True):
        _same(a, b)
    np.testing.assert_allclose(rows[0].extras["action_logp"], np.log(1 / 5), rtol=1e-6)


@pytest.mark.usefixtures("ray_session")
def test_a_sampling_checkpoint_records_the_same_dataset_on_0_1_and_2_runners(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv(ENV_PACKAGES_VAR, "mpe2")
    _collect(capsys, tmp_path / "data", 0)
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump({
        "algorithm": "bc", "dataset": str(tmp_path / "data"), "stop": {"iterations": 1},
        "config": {"updates_per_iteration": 5, "train_batch_size": 16, "model": {"hidden": [8]},
                   "normalize_observations": True, "evaluation": {"interval": 0}}}))
    code = main(["train", str(job), "--no-progress", "-o", str(tmp_path / "run")])
    assert code == 0, capsys.readouterr()
    ckpt = tmp_path / "run" / "checkpoints" / "final"
    for n in (0, 1, 2):
        _collect(capsys, tmp_path / f"s{n}", n, "--policy", ckpt)
    _collect(capsys, tmp_path / "greedy", 2, "--policy", ckpt, "--greedy")
    infos = [read_info(tmp_path / f"s{n}") for n in (0, 1, 2)]
    assert len({i.fingerprint for i in infos}) == 1
    assert [i.provenance["num_env_runners"] for i in infos] == [0, 1, 2]
    assert infos[2].provenance["algorithm"] == "bc" and infos[2].provenance["explore"] is True
    assert "action_logp" in infos[2].extra_columns
    greedy = read_info(tmp_path / "greedy")
    assert greedy.fingerprint != infos[0].fingerprint and greedy.provenance["explore"] is False


@pytest.mark.usefixtures("ray_session")
def test_a_killed_runner_is_restarted_once_and_replays_its_episodes(ray_session):
    config = TeamRunnerConfig(env=SPREAD, env_kwargs=KWARGS, seed=3)
    group = MultiAgentEnvRunnerGroup(config, 2)
    try:
        before = group.record(range(4))
        ray_session.kill(group._actors[0], no_restart=True)
        after = group.record(range(4))
        assert group.num_restarts == 1 and after.returns == before.returns
        for a, b in zip(before.episodes, after.episodes, strict=True):
            _same(a, b)
        ray_session.kill(group._actors[0], no_restart=True)
        with pytest.raises(RuntimeError, match="multi-agent env runner 1 died again after a restart"):
            group.record(range(4))
    finally:
        group.stop()
