"""`offlinerl train` and `offlinerl evaluate` smoke runs with tiny budgets."""

import json
from pathlib import Path

import pytest
import yaml

from offlinerl.cli import main
from tests.datagen import make_dataset


@pytest.fixture(scope="module")
def pendulum(tmp_path_factory):
    return make_dataset(tmp_path_factory.mktemp("d") / "pendulum", env_id="Pendulum-v1", episodes=4, max_steps=50)


def _pipeline(tmp_path, dataset, **extra):
    spec = {"algorithm": "marwil", "dataset": str(dataset),
            "config": {"updates_per_iteration": 10, "train_batch_size": 16, "normalize_observations": True,
                       "model": {"hidden": [16]}, "evaluation": {"episodes": 2, "interval": 1}},
            "stop": {"iterations": 5}, "output": str(tmp_path / "runs"), **extra}
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_train_then_evaluate(ray_session, tmp_path, pendulum, capsys):
    job = _pipeline(tmp_path, pendulum, checkpoint_interval=2)
    run = tmp_path / "run"
    code = main(["train", str(job), "--output", str(run), "--set", "stop.iterations=3", "--set", "config.lr=5e-4",
                 "--no-progress"])
    assert code == 0
    out = capsys.readouterr().out
    assert "marwil on" in out and "final return" in out
    result = json.loads((run / "result.json").read_text())
    assert result["updates"] == 30 and result["algorithm"] == "marwil"
    for key in ("updates_per_s", "final_eval_return", "best_eval_return", "checkpoint"):
        assert result[key] is not None
    resolved = yaml.safe_load((run / "config.yaml").read_text())
    assert resolved["config"]["lr"] == 5e-4 and resolved["stop"]["iterations"] == 3
    lines = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [int(x["learner/updates"]) for x in lines] == [10, 20, 30]
    assert (run / "checkpoints" / "iter-000002" / "algorithm.json").is_file()
    assert list((run / "tensorboard").iterdir()) and (run / "learning_curve.png").stat().st_size > 1000

    # evaluate the checkpoint: same weights, same preprocessing, same seeds -> the job's own final evaluation
    assert main(["evaluate", result["checkpoint"], "--json", "--episodes", "2"]) == 0
    ev = json.loads(capsys.readouterr().out)
    assert ev["eval/return_mean"] == pytest.approx(result["final_eval_return"], rel=1e-9)


def test_bad_override_and_existing_output_are_clear_errors(ray_session, tmp_path, pendulum, capsys):
    job = _pipeline(tmp_path, pendulum)
    assert main(["train", str(job), "--set", "config.lr=fast"]) == 2
    assert "config.lr" in capsys.readouterr().err
    assert main(["train", str(job), "--set", "config.bogus=1"]) == 2
    assert "config.bogus" in capsys.readouterr().err
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    assert main(["train", str(job), "--output", str(tmp_path / "full")]) == 1
    assert "not empty" in capsys.readouterr().err


def test_evaluate_refuses_a_non_checkpoint(tmp_path, capsys):
    assert main(["evaluate", str(tmp_path)]) == 1
    assert "not a checkpoint" in capsys.readouterr().err


def test_a_dataset_validated_before_is_said_once_and_not_under_quiet(ray_session, tmp_path, pendulum, capsys):
    """The second job on an unchanged dataset says it was not read again; --quiet drops that info line."""
    job = _pipeline(tmp_path, pendulum, stop={"iterations": 1})
    assert main(["train", str(job), "--output", str(tmp_path / "a"), "--no-progress"]) == 0
    assert main(["train", str(job), "--output", str(tmp_path / "b"), "--no-progress"]) == 0
    printed = capsys.readouterr()
    assert "unchanged since it passed validation, not read again" in printed.err
    assert main(["train", str(job), "--output", str(tmp_path / "c"), "--no-progress", "--quiet"]) == 0
    printed = capsys.readouterr()
    assert "unchanged since it passed validation" not in printed.out + printed.err
    assert "marwil on" in printed.out  # the job's result stays


def test_evaluation_counts_are_checked_before_any_env_in_python_too():
    """``episodes=0`` was read as "the default" and a typo of 10**11 episodes filled memory with seeds."""
    from offlinerl.env.evaluation import MAX_EVAL_EPISODES
    from offlinerl.evaluation.evaluate import evaluate_checkpoint

    ckpt = Path(__file__).resolve().parents[1] / "fixtures" / "checkpoints" / "v1-bc-cartpole"
    for episodes in (0, -3, MAX_EVAL_EPISODES + 1, 10**11):
        with pytest.raises(ValueError, match="evaluation episodes must be between 1 and 1,000,000"):
            evaluate_checkpoint(ckpt, episodes=episodes)
    with pytest.raises(ValueError, match="the evaluation seed must be >= 0"):
        evaluate_checkpoint(ckpt, episodes=1, seed=-1)
    assert evaluate_checkpoint(ckpt, episodes=1)["eval/episodes"] == 1
