"""Training jobs lose no work: the env is checked before training, a failure keeps the trained state,
``--resume`` continues a killed job exactly, and retention bounds the checkpoints kept."""

from __future__ import annotations

import json
import time
from pathlib import Path

import gymnasium as gym
from gymnasium.envs.classic_control import CartPoleEnv
import pytest
import yaml

from offlinerl.cli import main
from tests.datagen import make_dataset
from tests.processes import kill_once_written



class _BrokenStepCartPole(CartPoleEnv):
    """Makes fine, fails on its first step: an env that breaks only when the job evaluates."""

    def step(self, action):
        raise RuntimeError("the simulator crashed")


gym.register("BrokenStepCartPole-v0", entry_point=_BrokenStepCartPole, max_episode_steps=500)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    return make_dataset(tmp_path_factory.mktemp("d") / "cartpole", episodes=6)


def _job(tmp_path: Path, dataset: Path, **extra) -> Path:
    spec = {"algorithm": "bc", "dataset": str(dataset),
            "config": {"updates_per_iteration": 10, "train_batch_size": 32, "model": {"hidden": [16]},
                       "normalize_observations": True, "evaluation": {"episodes": 2, "interval": 2}},
            "stop": {"iterations": 6}, "checkpoint_interval": 1, **extra}
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def _train(capsys, *args) -> tuple[int, str]:
    code = main(["train", *map(str, args), "--no-progress"])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return code, captured.out + captured.err


def _metrics(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def _comparable(records: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if not k.startswith(("perf/", "time/"))} for r in records]


@pytest.mark.parametrize("env,expected", [("Pendulum-v1", "observation space: shape (4,) expected, the env has (3,)"),
                                          ("NoSuchEnv-v3", "cannot make the env 'NoSuchEnv-v3'")])
def test_a_wrong_evaluation_env_stops_the_job_before_training(ray_session, dataset, tmp_path, capsys, env, expected):
    run = tmp_path / "run"
    t0 = time.perf_counter()
    code, out = _train(capsys, _job(tmp_path, dataset), "-o", run, "--set", f"config.evaluation.env={env}")
    assert code == 1 and expected in out
    assert not run.exists()  # nothing left behind: the same --output works once the env is fixed
    assert time.perf_counter() - t0 < 60  # no training ran (it would take far longer under load, too)


def test_output_that_is_a_file_is_a_message(ray_session, dataset, tmp_path, capsys):
    target = tmp_path / "file"
    target.write_text("keep me")
    code, out = _train(capsys, _job(tmp_path, dataset), "-o", target)
    assert code == 1 and "is a file" in out and target.read_text() == "keep me"


def test_a_failure_after_training_keeps_the_checkpoint(ray_session, dataset, tmp_path, capsys):
    run = tmp_path / "run"
    code, out = _train(capsys, _job(tmp_path, dataset, checkpoint_interval=0), "-o", run,
                       "--set", "config.evaluation.env=BrokenStepCartPole-v0", "--set", "config.evaluation.interval=0")
    assert code == 1 and "the simulator crashed" in out
    assert (run / "checkpoints" / "final" / "learner_group.pt").is_file()  # written before the final evaluation
    assert main(["evaluate", str(run / "checkpoints" / "final"), "--env", "CartPole-v1", "--episodes", "1"]) == 0


def test_checkpoint_keep_bounds_the_periodic_checkpoints(ray_session, dataset, tmp_path, capsys):
    run = tmp_path / "run"
    code, _ = _train(capsys, _job(tmp_path, dataset, checkpoint_keep=2), "-o", run)
    assert code == 0
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["final", "iter-000005", "iter-000006"]


def test_resume_refuses_what_would_change_the_job(ray_session, dataset, tmp_path, capsys):
    code, out = _train(capsys, "--resume", tmp_path)
    assert code == 1 and "not a run directory" in out
    run = tmp_path / "run"
    assert _train(capsys, _job(tmp_path, dataset), "-o", run, "--set", "stop.iterations=1")[0] == 0
    code, out = _train(capsys, "--resume", run, "--set", "config.lr=0.1")
    assert code == 2 and "only stop.*" in out
    code, out = _train(capsys, _job(tmp_path, dataset), "-o", run)
    assert code == 1 and "--resume" in out


def test_kill_9_then_resume_equals_the_uninterrupted_job(ray_session, dataset, tmp_path, capsys):
    """A job killed at a random point (mid-iteration or mid-checkpoint) resumes from its newest checkpoint
    and ends with exactly the metrics and weights of a job that was never interrupted (in-memory data)."""

    job = _job(tmp_path, dataset, stop={"iterations": 60})
    whole = tmp_path / "whole"
    assert _train(capsys, job, "-o", whole)[0] == 0

    killed = tmp_path / "killed"
    kill_once_written(["train", str(job), "-o", str(killed)], killed / "checkpoints" / "iter-000003", timeout=240)

    code, out = _train(capsys, "--resume", killed)
    assert code == 0 and "resuming" in out
    assert _comparable(_metrics(killed)) == _comparable(_metrics(whole))
    a = json.loads((whole / "result.json").read_text())
    b = json.loads((killed / "result.json").read_text())
    assert (a["updates"], a["final_eval_return"]) == (b["updates"], b["final_eval_return"])
    import torch

    wa = torch.load(whole / "checkpoints" / "final" / "learner_group.pt", weights_only=True)
    wb = torch.load(killed / "checkpoints" / "final" / "learner_group.pt", weights_only=True)
    for key, value in wa["learners"][0]["learner"]["module"].items():
        assert torch.equal(value, wb["learners"][0]["learner"]["module"][key]), key


def test_resume_extends_a_finished_job(ray_session, dataset, tmp_path, capsys):
    job = _job(tmp_path, dataset, checkpoint_interval=0)
    whole, part = tmp_path / "whole", tmp_path / "part"
    assert _train(capsys, job, "-o", whole)[0] == 0
    assert _train(capsys, job, "-o", part, "--set", "stop.iterations=3")[0] == 0
    assert _train(capsys, "--resume", part, "--set", "stop.iterations=6")[0] == 0
    # the finished part had one extra evaluation line (its final evaluation at iteration 3); the rest is equal
    assert [r for r in _comparable(_metrics(part)) if r["iteration"] != 3] == \
        [r for r in _comparable(_metrics(whole)) if r["iteration"] != 3]
