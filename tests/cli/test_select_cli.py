"""Model selection without an env: `offlinerl train --select-by fqe` / `evaluation: {ope: fqe}` on held-out episodes."""

import json

import pytest
import yaml

from offlinerl.algorithms.algorithm_config import OPE_METHODS
from offlinerl.cli import main
from offlinerl.evaluation.ope.run import METHODS
from offlinerl.training.checkpoint import load_checkpoint
from tests.datagen import make_dataset


@pytest.fixture(scope="module")
def cartpole(tmp_path_factory):
    return make_dataset(tmp_path_factory.mktemp("d") / "cartpole", episodes=8, max_steps=60)


@pytest.fixture(scope="module")
def envless(tmp_path_factory):
    path = make_dataset(tmp_path_factory.mktemp("d") / "envless", episodes=8, max_steps=60)
    info = json.loads((path / "dataset.json").read_text())
    info["env_id"] = None
    (path / "dataset.json").write_text(json.dumps(info))
    return path


def _pipeline(tmp_path, dataset, config=None, **extra):
    spec = {"algorithm": "bc", "dataset": str(dataset),
            "config": {"updates_per_iteration": 10, "train_batch_size": 16, "model": {"hidden": [16]},
                       "evaluation": {"episodes": 2, "interval": 2, "ope_updates": 200}, **(config or {})},
            "stop": {"iterations": 4}, "output": str(tmp_path / "runs"), **extra}
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_select_by_fqe_scores_checkpoints_beside_env_returns_and_again_on_resume(ray_session, tmp_path, cartpole,
                                                                                 capsys):
    job = _pipeline(tmp_path, cartpole, checkpoint_interval=2)
    run = tmp_path / "run"
    assert main(["train", str(job), "--output", str(run), "--select-by", "fqe", "--no-progress",
                 "--set", "config.data.holdout.fraction=0.25"]) == 0
    out = capsys.readouterr().out
    assert "model selection by fqe on 2 held-out episodes" in out and "selected by fqe" in out
    sel = json.loads((run / "result.json").read_text())["selection"]
    assert sel["method"] == "fqe" and sel["holdout_episodes"] == 2
    assert [(c["iteration"], c["updates"]) for c in sel["checkpoints"]] == [(2, 20), (4, 40)]
    assert sel["checkpoints"][-1]["path"].endswith("final")  # final replaces iter-000004 (same weights)
    for c in sel["checkpoints"]:
        assert c["ci_low"] <= c["estimate"] <= c["ci_high"] and c["env_return"] is not None
    best = max(sel["checkpoints"], key=lambda c: c["estimate"])
    assert sel["selected"] == best["path"] and sel["selected_estimate"] == best["estimate"]
    assert load_checkpoint(sel["selected"]).algorithm == "bc"

    assert main(["train", "--resume", str(run), "--set", "stop.iterations=6", "--no-progress"]) == 0
    sel = json.loads((run / "result.json").read_text())["selection"]
    assert [c["updates"] for c in sel["checkpoints"]] == [20, 40, 60]


def test_an_envless_dataset_selects_without_any_env(ray_session, tmp_path, envless, capsys):
    job = _pipeline(tmp_path, envless, checkpoint_interval=2,
                    config={"evaluation": {"ope": "fqe", "ope_updates": 200}, "data": {"holdout": {"fraction": 0.25}}})
    run = tmp_path / "run"
    assert main(["train", str(job), "--output", str(run), "--no-progress"]) == 0
    result = json.loads((run / "result.json").read_text())
    assert result["env"] is None and result["final_eval_return"] is None
    sel = result["selection"]
    assert len(sel["checkpoints"]) == 2 and all(c["env_return"] is None for c in sel["checkpoints"])
    assert sel["selected"] in [c["path"] for c in sel["checkpoints"]]
    assert "no evaluation" in capsys.readouterr().out


@pytest.mark.parametrize("args, message", [
    (["--select-by", "fqe"], "set data.holdout"),
    (["--select-by", "fqe", "--set", "config.data.holdout.fraction=0.2", "--set", "checkpoint_interval=0"],
     "set checkpoint_interval"),
    (["--select-by", "wis", "--set", "config.data.holdout.fraction=0.2"], "action_logp"),
    (["--set", "config.evaluation.ope=magic", "--set", "config.data.holdout.fraction=0.2"], "unknown estimator"),
    (["--set", "config.data.holdout.fraction=1.5"], "data.holdout.fraction"),
])
def test_selection_config_errors_are_one_line_and_exit_2(tmp_path, cartpole, capsys, args, message):
    job = _pipeline(tmp_path, cartpole, checkpoint_interval=2)
    assert main(["train", str(job), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err


def test_config_and_ope_agree_on_the_estimators():
    assert OPE_METHODS == METHODS
