"""``offlinerl collect``: datasets written atomically, complete, checked, with provenance."""

from __future__ import annotations

import json

import numpy as np
import pytest

from offlinerl.cli import main
from offlinerl.episodes import OutputExistsError, batch_equal, load_episodes, read_info
from offlinerl.episodes.validate import validate_dataset
from offlinerl.env.collect import CollectConfig, collect


def test_collect_random_cartpole(tmp_path):
    out = tmp_path / "cp"
    config = CollectConfig(env="CartPole-v1", output=str(out), num_episodes=7, num_envs=3, seed=0)
    info = collect(config, progress=False)
    episodes = load_episodes(out)
    assert len(episodes) == 7 == info.num_episodes
    assert info.num_steps == sum(len(e) for e in episodes)
    for e in episodes:
        assert e.terminated or e.truncated
        np.testing.assert_array_equal(e.extras["action_logp"], np.float32(-np.log(2.0)))
    stored = read_info(out)
    assert stored.env_id == "CartPole-v1" and stored.env_spec["id"] == "CartPole-v1"
    assert stored.provenance["policy"] == "random" and stored.provenance["seed"] == 0
    assert stored.provenance["return_mean"] == pytest.approx(np.mean([e.episode_return for e in episodes]))
    assert set(stored.extra_columns) == {"action_logp"}
    report = validate_dataset(out)
    assert report.ok, report.format()
    # Same seed, same data.
    again = collect(CollectConfig(env="CartPole-v1", output=str(tmp_path / "cp2"), num_episodes=7, num_envs=3, seed=0),
                    progress=False)
    assert again.num_steps == info.num_steps
    for a, b in zip(episodes, load_episodes(tmp_path / "cp2")):
        assert batch_equal(a.obs, b.obs) and batch_equal(a.actions, b.actions)
    # Never overwritten unless asked; nothing half-written left behind.
    with pytest.raises(OutputExistsError):
        collect(config, progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cp", "cp2"]


def test_collect_with_remote_runners_and_epsilon(tmp_path, ray_session):
    out = tmp_path / "pend"
    config = CollectConfig(env="Pendulum-v1", output=str(out), num_episodes=3, num_env_runners=2,
                           max_episode_steps=30, seed=1, epsilon=0.5)
    info = collect(config, progress=False)
    episodes = load_episodes(out)
    assert len(episodes) == 3 and all(e.truncated and len(e) == 30 for e in episodes)
    # A continuous policy mixed with uniform actions has no evaluable density: no action_logp column.
    assert info.extra_columns == {}
    assert {e.id.split("-")[1] for e in episodes} == {"w1", "w2"}
    assert read_info(out).env_spec["max_episode_steps"] == 30


def test_collect_cli(tmp_path, capsys):
    out = tmp_path / "d"
    argv = ["collect", "--env", "CartPole-v1", "--episodes", "4", "-o", str(out),
            "--num-envs", "2", "--seed", "3", "--epsilon", "0.1", "--no-progress"]
    assert main(argv) == 0
    assert "wrote" in capsys.readouterr().out
    assert len(load_episodes(out)) == 4
    assert json.loads((out / "dataset.json").read_text())["provenance"]["epsilon"] == 0.1
    assert main(argv) == 2  # exists
    assert "already exists" in capsys.readouterr().err
    assert main(["collect", "--env", "CartPole-v1", "--episodes", "0", "-o", str(tmp_path / "x")]) == 2
    assert main(["collect", "--env", "NoSuchEnv-v0", "--episodes", "1", "-o", str(tmp_path / "y")]) == 2
    assert "NoSuchEnv" in capsys.readouterr().err and not (tmp_path / "y").exists()
    # a keyword the env does not take, and a negative seed: one line each, before any env runs, nothing written
    for extra, message in ((["--env-kwargs", '{"foo": 1}'], "unexpected keyword argument 'foo'"),
                           (["--seed", "-1"], "--seed must be >= 0"),
                           (["--greedy"], "the random policy has none"),
                           (["--max-episode-steps", "9", "--env-kwargs", '{"max_episode_steps": 5}'], "two time limits")):
        assert main(["collect", "--env", "CartPole-v1", "--episodes", "1", "-o", str(tmp_path / "z"), *extra]) == 2
        printed = capsys.readouterr().err
        assert printed.startswith("offlinerl collect: ") and message in printed and len(printed.splitlines()) == 1
        assert not (tmp_path / "z").exists()
