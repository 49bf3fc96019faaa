"""A dataset evaluates on the task it recorded, with no env option given: the env spec's kwargs and time limit
(written by ``collect`` and the converters) reach training's evaluation, the checkpoint and ``evaluate``; an
env package the user allows registers the env a dataset names."""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path

import pytest
import yaml

from offlinerl.cli import main
from offlinerl.episodes import load_episodes, read_info
from offlinerl.trusted import ENV_PACKAGES_VAR


def _run(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return code, captured.out, captured.err


def _train(tmp_path: Path, capsys, dataset: Path, *extra) -> Path:
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump({
        "algorithm": "bc", "dataset": str(dataset), "stop": {"iterations": 1},
        "config": {"updates_per_iteration": 5, "train_batch_size": 16, "model": {"hidden": [8]},
                   "evaluation": {"episodes": 2, "interval": 1}}}))
    code, out, err = _run(capsys, "train", job, "--no-progress", "-o", tmp_path / "run", *extra)
    assert code == 0, err
    return tmp_path / "run" / "checkpoints" / "final"


@pytest.mark.usefixtures("ray_session")
def test_collected_kwargs_and_time_limit_are_the_evaluation_task(tmp_path, capsys):
    data = tmp_path / "pendulum-g2"
    code, _, err = _run(capsys, "collect", "--env", "Pendulum-v1", "--env-kwargs", '{"g": 2.0}', "--max-episode-steps",
                        "30", "--episodes", "3", "--seed", "0", "-o", data, "--no-progress")
    assert code == 0, err
    info = read_info(data)
    assert info.env_kwargs == {"g": 2.0, "max_episode_steps": 30}
    ckpt = _train(tmp_path, capsys, data)
    meta = json.loads((ckpt / "algorithm.json").read_text())
    assert meta["env_kwargs"] == {"g": 2.0, "max_episode_steps": 30}
    metrics = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert metrics[-1]["eval/length_mean"] == 30  # the recorded time limit, not Pendulum's 200
    code, out, _ = _run(capsys, "evaluate", ckpt, "--json", "--episodes", "2")
    result = json.loads(out)
    assert code == 0 and result["env_kwargs"] == {"g": 2.0, "max_episode_steps": 30}
    assert result["eval/length_mean"] == 30
    code, out, _ = _run(capsys, "evaluate", ckpt, "--episodes", "1")
    assert "Pendulum-v1 (g=2.0, max_episode_steps=30)" in out
    # the user overrides the recorded task
    code, out, _ = _run(capsys, "evaluate", ckpt, "--json", "--episodes", "1", "--env-kwargs", '{"max_episode_steps": 7}')
    assert json.loads(out)["eval/length_mean"] == 7
    # naming the checkpoint's own env is still its task; --env-kwargs '{}' asks for the plain env
    code, out, _ = _run(capsys, "evaluate", ckpt, "--json", "--episodes", "1", "--env", "Pendulum-v1")
    assert json.loads(out)["env_kwargs"] == {"g": 2.0, "max_episode_steps": 30} and json.loads(out)["eval/length_mean"] == 30
    code, out, _ = _run(capsys, "evaluate", ckpt, "--json", "--episodes", "1", "--env", "Pendulum-v1", "--env-kwargs", "{}")
    assert json.loads(out)["env_kwargs"] == {} and json.loads(out)["eval/length_mean"] == 200
    # collect with the checkpoint's policy in its own env records the same task
    code, _, err = _run(capsys, "collect", "--env", "Pendulum-v1", "--policy", ckpt, "--episodes", "1", "-o",
                        tmp_path / "again", "--no-progress")
    assert code == 0, err
    assert read_info(tmp_path / "again").env_kwargs == {"g": 2.0, "max_episode_steps": 30}
    assert [len(e) for e in load_episodes(tmp_path / "again")] == [30]
    # bad numbers are one line, before any env is made
    for argv, message in ((["--episodes", "100000000000"], "--episodes must be between 1 and 1,000,000"),
                          (["--seed", "-1"], "--seed must be >= 0")):
        code, out, err = _run(capsys, "evaluate", ckpt, *argv)
        assert code == 2 and message in err, err
    with pytest.raises(SystemExit) as exit_:
        main(["evaluate", str(ckpt), "--env-kwargs", "[1, 2]"])
    assert exit_.value.code == 2 and "expected a JSON object" in capsys.readouterr().err


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """An env package that registers ``<name>/Plugged-v0`` (CartPole with a 25-step limit) when imported."""
    name = f"plugin_{uuid.uuid4().hex[:8]}"
    (tmp_path / "mods").mkdir()
    (tmp_path / "mods" / f"{name}.py").write_text(
        "import gymnasium as gym\n"
        f"gym.register('{name}/Plugged-v0', entry_point='gymnasium.envs.classic_control.cartpole:CartPoleEnv', "
        "max_episode_steps=25)\n")
    monkeypatch.syspath_prepend(str(tmp_path / "mods"))
    monkeypatch.setenv(ENV_PACKAGES_VAR, "")  # restored (removed) after the test
    yield name
    sys.modules.pop(name, None)


@pytest.mark.usefixtures("ray_session")
def test_a_plugin_env_named_by_the_data_is_found_once_its_package_is_allowed(tmp_path, capsys, plugin):
    data = tmp_path / "plugged"
    code, _, err = _run(capsys, "collect", "--env", f"{plugin}/Plugged-v0", "--episodes", "2", "--seed", "0",
                        "-o", data, "--no-progress", "--env-package", plugin)
    assert code == 0, err
    assert read_info(data).env_id == f"{plugin}/Plugged-v0"
    sys.modules.pop(plugin, None)
    import gymnasium as gym

    gym.registry.pop(f"{plugin}/Plugged-v0", None)  # a fresh process: nothing registered the env yet
    ckpt = _train(tmp_path, capsys, data, "--env-package", plugin)
    code, out, err = _run(capsys, "evaluate", ckpt, "--json", "--episodes", "1")
    assert code == 0 and json.loads(out)["eval/length_mean"] <= 25
