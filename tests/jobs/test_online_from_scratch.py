"""Online jobs from scratch (no checkpoint, no dataset): the job file, the CLI run with its warm-up dataset,
checkpoints and --resume, and SAC learning Pendulum from nothing."""

from __future__ import annotations

import json

import pytest

from offlinerl.cli import main
from offlinerl.config_io import ConfigError
from offlinerl.episodes import load_episodes, read_info
from offlinerl.episodes.validate import validate_dataset
from offlinerl.jobs.spec import load_finetune_spec

TINY = """algorithm: sac
warmup_steps: 150
config: {seed: 1, updates_per_iteration: 8, train_batch_size: 32, model: {hidden: [16, 16]},
         evaluation: {episodes: 2, interval: 1}}
online: {env: Pendulum-v1, env_steps_per_iteration: 200}
stop: {iterations: 2}
checkpoint_interval: 1
"""


def test_a_job_file_from_scratch_is_checked_and_defaults_to_one_buffer(tmp_path):
    path = tmp_path / "scratch.yaml"
    path.write_text(TINY)
    spec = load_finetune_spec(path)
    assert spec.from_scratch and spec.algorithm == "sac" and spec.warmup_steps == 150
    assert spec.online.mixing == "proportional"  # warm-up steps and replay sampled as one buffer
    assert load_finetune_spec(path, ["online.mixing=fixed"]).online.mixing == "fixed"
    for overrides, message in (([ "online.env=null"], "online.env: a job from scratch names the env"),
                               (["algorithm=null"], "or set algorithm"),
                               (["algorithm=nope"], "unknown algorithm 'nope'"),
                               (["dataset=data/x"], "dataset: a job from scratch"),
                               (["warmup_steps=0"], "warmup_steps: must be >= 1")):
        with pytest.raises(ConfigError, match=message):
            load_finetune_spec(path, overrides)
    with pytest.raises(ConfigError, match="set algorithm only for a job from scratch"):
        load_finetune_spec(path, checkpoint="runs/x/checkpoints/final")


def test_sac_from_scratch_writes_its_warmup_trains_checkpoints_and_resumes(ray_session, tmp_path, capsys):
    path = tmp_path / "scratch.yaml"
    path.write_text(TINY)
    run = tmp_path / "run"
    assert main(["finetune", str(path), "-o", str(run), "--no-progress"]) == 0
    assert "sac from scratch (150 random warm-up steps" in capsys.readouterr().out
    result = json.loads((run / "result.json").read_text())
    assert result["from_checkpoint"] is None and result["checkpoint_eval_return"] is None
    assert (result["iterations"], result["updates"], result["env_steps"]) == (2, 16, 400)
    # The warm-up is the job's dataset: 150 random steps of the env's own task, valid, recorded in the checkpoint.
    warmup = run / "warmup"
    assert validate_dataset(warmup).ok
    info = read_info(warmup)
    assert (info.num_steps, info.env_id, info.provenance["policy"]) == (150, "Pendulum-v1", "random")
    meta = json.loads((run / "checkpoints" / "final" / "algorithm.json").read_text())
    assert meta["algorithm"] == "sac" and meta["dataset"] == str(warmup)
    assert sum(len(e) for e in load_episodes(result["online_episodes"])) == 400
    lines = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert lines[-1]["online/replay_size"] == 400 and "eval/return_mean" in lines[-1]
    # --resume continues the same job: same warm-up, more iterations.
    assert main(["finetune", "--resume", str(run), "--set", "stop.iterations=3", "--no-progress"]) == 0
    resumed = json.loads((run / "result.json").read_text())
    assert (resumed["iterations"], resumed["updates"], resumed["env_steps"]) == (3, 24, 600)


@pytest.mark.slow
def test_sac_from_scratch_learns_pendulum(ray_session, tmp_path):
    """SAC from nothing: 1,000 random steps, then 1 update per env step; a random policy scores about -1,200,
    a swing-up policy better than -400 (measured: -125 after 5,000 env steps)."""
    path = tmp_path / "learn.yaml"
    path.write_text("""algorithm: sac
warmup_steps: 1000
config: {seed: 0, updates_per_iteration: 1000, model: {hidden: [64, 64]}, evaluation: {episodes: 5, interval: 1}}
online: {env: Pendulum-v1, env_steps_per_iteration: 1000}
stop: {iterations: 7, eval_return: -400}
""")
    assert main(["finetune", str(path), "-o", str(tmp_path / "run"), "--no-progress"]) == 0
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result["best_eval_return"] >= -400, result["curve"]
