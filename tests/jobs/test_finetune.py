"""Offline → online: fine-tuning a checkpoint, collecting with a checkpoint's policy,
and collected data going back into offline training."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import yaml

from offlinerl.algorithms.bc import BCConfig
from offlinerl.cli import main
from offlinerl.env.collect import CollectConfig, collect
from offlinerl.episodes import SingleAgentEpisode, load_episodes, read_info
from offlinerl.episodes.validate import validate_dataset
from offlinerl.jobs.finetune import close_episodes
from offlinerl.jobs.spec import load_finetune_run, load_finetune_spec
from offlinerl.training.algorithm import Algorithm


@pytest.fixture(scope="module")
def bc_checkpoint(tmp_path_factory, ray_session):
    """A deliberately weak BC policy on a small random CartPole dataset, evaluated and saved."""
    root = tmp_path_factory.mktemp("ft")
    collect(CollectConfig(env="CartPole-v1", output=str(root / "random"), num_episodes=20, num_envs=4, seed=0),
            progress=False)
    config = BCConfig.from_dict({"updates_per_iteration": 20, "train_batch_size": 64, "model": {"hidden": [32, 32]},
                                 "normalize_observations": True, "evaluation": {"episodes": 4, "seed": 100}})
    algo = Algorithm("bc", config, root / "random")
    algo.train()
    algo.save_checkpoint(root / "ckpt")
    algo.stop()
    return root / "ckpt"


def test_finetune_hands_over_exactly_and_records_online_episodes(bc_checkpoint, tmp_path, capsys):
    job_file = tmp_path / "ft.yaml"
    job_file.write_text(
        "config: {updates_per_iteration: 10}\n"
        "online: {algorithm: marwil, env_steps_per_iteration: 150, num_envs: 2, num_env_runners: 1, online_fraction: 0.5}\n"
        "stop: {iterations: 2}\n"
    )
    assert main(["finetune", str(job_file), "--from", str(bc_checkpoint), "-o", str(tmp_path / "run"),
                 "--no-progress"]) == 0
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert "checkpoint's own" in capsys.readouterr().out
    # Nothing lost in the hand-over: same weights, same connector state, same evaluation episodes.
    assert result["initial_eval_return"] == result["checkpoint_eval_return"]
    assert result["iterations"] == 2 and result["env_steps"] >= 300 and result["updates"] == 20
    lines = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert lines[0]["iteration"] == 0 and lines[-1]["online/weights_seq_no"] == 2
    assert lines[-1]["online/replay_size"] > 0  # MARWIL learns from complete online episodes only
    # The online experience is a valid episode dataset; every step knows the weights that acted.
    report = validate_dataset(result["online_episodes"])
    assert report.ok, report.format()
    episodes = load_episodes(result["online_episodes"])
    assert sum(len(e) for e in episodes) == result["env_steps"]
    seq = np.concatenate([e.extras["weights_seq_no"] for e in episodes])
    assert set(np.unique(seq)) == {0, 1}
    for e in episodes:
        e.check()
        assert e.terminated or e.truncated
    # The fine-tuned checkpoint is an ordinary checkpoint.
    again = Algorithm.from_checkpoint(result["checkpoint"])
    assert again.name == "marwil" and again.num_updates == 20
    # config.yaml has train's schema: the job spec, with ``config`` the algorithm config it ran, in full.
    written = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())
    assert written["config"] == again.config.to_dict() and written["config"]["updates_per_iteration"] == 10
    assert written["online"]["algorithm"] == "marwil" and "resolved_config" not in written
    again.stop()


def test_collect_with_a_checkpoint_policy_round_trips_through_training(bc_checkpoint, tmp_path):
    out = tmp_path / "by-bc"
    assert main(["collect", "--env", "CartPole-v1", "--policy", str(bc_checkpoint), "--episodes", "5",
                 "-o", str(out), "--num-envs", "2", "--seed", "1", "--no-progress"]) == 0
    info = read_info(out)
    assert set(info.extra_columns) == {"action_logp", "action_dist_inputs"}
    assert info.provenance["algorithm"] == "bc" and info.provenance["policy"] == str(bc_checkpoint)
    for e in load_episodes(out):
        logits = e.extras["action_dist_inputs"].astype(np.float64)
        logp = logits[np.arange(len(e)), e.actions] - np.log(np.exp(logits).sum(1))
        np.testing.assert_allclose(e.extras["action_logp"], logp, atol=1e-5)
    algo = Algorithm("bc", BCConfig.from_dict({"updates_per_iteration": 5, "train_batch_size": 16,
                                              "model": {"hidden": [16]}, "evaluation": {"episodes": 1}}), out)
    assert algo.train()["learner/updates"] == 5
    algo.stop()


def test_close_episodes_marks_unfinished_recordings_truncated():
    def ep(i, k, t0, term=False):
        return SingleAgentEpisode(id=i, obs=np.zeros((3, 1)), actions=np.zeros(2, np.int64), rewards=np.zeros(2),
                                  chunk_index=k, t_start=t0, terminated=term)

    a0, a1, b0 = ep("a", 0, 0), ep("a", 1, 2), ep("b", 0, 0, term=True)
    closed = close_episodes([a0, b0, a1])
    assert [(c.id, c.chunk_index, c.terminated, c.truncated) for c in closed] == [
        ("a", 0, False, False), ("b", 0, True, False), ("a", 1, False, True)]


def test_finetune_job_file_needs_a_checkpoint(tmp_path):
    from offlinerl.config_io import ConfigError

    path = tmp_path / "p.yaml"
    path.write_text("online: {env_steps_per_iteration: 10}\nstop: {iterations: 1}\n")
    with pytest.raises(ConfigError, match="--from"):
        load_finetune_spec(path)
    assert load_finetune_spec(path, ["online.online_fraction=0.25"], checkpoint="x").online.online_fraction == 0.25
    with pytest.raises(ConfigError, match="online_fraction"):
        load_finetune_spec(path, ["online.online_fraction=2"], checkpoint="x")


def test_finetune_runs_the_job_loop_and_honours_a_time_stop(bc_checkpoint, tmp_path):
    """Any stop condition ends fine-tuning, as it ends training: here the training time after one iteration."""
    job_file = tmp_path / "ft.yaml"
    job_file.write_text(
        "config: {updates_per_iteration: 5, evaluation: {interval: 0}}\n"
        "online: {env_steps_per_iteration: 20, save_online_episodes: false}\n"
        "stop: {iterations: 50, wall_time_s: 1.0e-6}\n"
    )
    assert main(["finetune", str(job_file), "--from", str(bc_checkpoint), "-o", str(tmp_path / "run"),
                 "--no-progress"]) == 0
    run = tmp_path / "run"
    result = json.loads((run / "result.json").read_text())
    assert result["iterations"] == 1 and result["online_episodes"] is None
    lines = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [line["iteration"] for line in lines] == [0, 1, 1]  # initial evaluation, the iteration, final evaluation
    assert lines[1]["perf/iteration_s"] > 0 and lines[-1]["eval/return_mean"] == result["final_eval_return"]
    assert (run / "tensorboard").is_dir() and (run / "checkpoints" / "final").is_dir()


def test_a_job_that_evaluates_differently_still_checks_the_handover_with_the_checkpoints_settings(
        bc_checkpoint, tmp_path, capsys):
    """The checkpoint was evaluated on 4 episodes from seed 100; a job evaluating 7 from seed 5 (as the shipped
    Pendulum fine-tune evaluates 50) still reports the hand-over on the checkpoint's own episodes, exactly equal,
    and its own first evaluation beside it, the first point of the curve."""
    job_file = tmp_path / "ft.yaml"
    job_file.write_text(
        "config: {updates_per_iteration: 5, evaluation: {episodes: 7, seed: 5}}\n"
        "online: {env_steps_per_iteration: 20, save_online_episodes: false}\n"
        "stop: {iterations: 1}\n"
    )
    assert main(["finetune", str(job_file), "--from", str(bc_checkpoint), "-o", str(tmp_path / "run"),
                 "--no-progress"]) == 0
    out = capsys.readouterr().out
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result["initial_eval_return"] == result["checkpoint_eval_return"]
    lines = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert lines[0]["eval/episodes"] == 7 and lines[0]["eval/return_mean"] == result["first_eval_return"]
    assert result["curve"][0]["eval_return"] == result["first_eval_return"]
    assert lines[0]["eval/handover_return_mean"] == result["initial_eval_return"]
    assert "on the checkpoint's 4 episodes" in out and "on this job's 7 (seed 5)" in out, out


def test_record_writes_the_online_episodes_as_a_dataset_that_validates(bc_checkpoint, tmp_path, capsys):
    """``--record DIR``: a new dataset (validated by ``offlinerl validate``); an existing one is replaced only
    with ``--overwrite``, an input of the job never; both checked before the job starts."""
    job_file = tmp_path / "ft.yaml"
    job_file.write_text(
        "config: {updates_per_iteration: 5, evaluation: {interval: 0, episodes: 2}}\n"
        "online: {env_steps_per_iteration: 60, num_envs: 2}\n"
        "stop: {iterations: 2}\n"
    )

    def finetune(run: str, *extra: str) -> int:
        return main(["finetune", str(job_file), "--from", str(bc_checkpoint), "-o", str(tmp_path / run),
                     "--no-progress", *extra])

    recorded = tmp_path / "recorded"
    assert finetune("run", "--record", str(recorded)) == 0
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result["online_episodes"] == str(recorded) and not (tmp_path / "run" / "online-episodes").exists()
    capsys.readouterr()
    assert main(["validate", str(recorded)]) == 0
    info = read_info(recorded)
    assert info.num_steps == result["env_steps"] and info.provenance["collector"] == "offlinerl finetune"
    assert info.provenance["iterations"] == 2 and "weights_seq_no" in info.extra_columns

    before = (recorded / "dataset.json").read_text()
    assert finetune("again", "--record", str(recorded)) == 2
    assert "already exists" in capsys.readouterr().err
    assert not (tmp_path / "again").exists() and (recorded / "dataset.json").read_text() == before
    assert finetune("input", "--record", str(bc_checkpoint), "--overwrite") == 2
    assert "input" in capsys.readouterr().err and (bc_checkpoint / "algorithm.json").is_file()
    assert finetune("replaced", "--record", str(recorded), "--overwrite") == 0
    assert (recorded / "dataset.json").read_text() != before and validate_dataset(recorded).ok


def test_a_finetune_run_directory_of_the_older_layout_still_resumes(bc_checkpoint, tmp_path):
    """Before 2026-12-03 a fine-tune's config.yaml held the file's overrides under ``config`` and the algorithm's
    name and resolved config beside them (``algorithm``, ``resolved_config``); --resume reads that layout too."""
    run = tmp_path / "run"
    shutil.copytree(bc_checkpoint, run / "checkpoints" / "iter-000001")
    (run / "config.yaml").write_text(yaml.safe_dump({
        "checkpoint": str(bc_checkpoint), "dataset": None, "config": {"updates_per_iteration": 10},
        "online": {"env_steps_per_iteration": 150}, "stop": {"iterations": 2}, "output": "runs", "name": "ft",
        "checkpoint_interval": 1, "checkpoint_keep": 0, "record": None,
        "algorithm": "bc", "resolved_config": BCConfig().to_dict()}))
    spec, checkpoint = load_finetune_run(run, ["stop.iterations=4"])
    assert checkpoint == run / "checkpoints" / "iter-000001"
    assert spec.config == {"updates_per_iteration": 10} and spec.online.env_steps_per_iteration == 150
    assert spec.checkpoint == str(bc_checkpoint) and spec.stop.iterations == 4


def test_finetune_resume_refuses_what_would_change_the_job(tmp_path, capsys):
    """``--resume`` follows ``train --resume``'s rules (``run_dir.read_run``); nothing runs when they are broken."""
    assert main(["finetune", "--resume", str(tmp_path), "--no-progress"]) == 1
    assert "not a run directory" in capsys.readouterr().err
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("checkpoint: ckpt\nstop: {iterations: 2}\n")
    assert main(["finetune", "--resume", str(run), "--set", "online.online_fraction=0.1"]) == 2
    assert "only stop.*" in capsys.readouterr().err
    assert main(["finetune", "--resume", str(run), "--set", "stop.iterations=4"]) == 1
    assert "no checkpoint to resume from" in capsys.readouterr().err
    for extra in (["--from", "x"], ["--record", "x"], ["-o", "x"]):
        assert main(["finetune", "--resume", str(run), *extra]) == 2
        assert "--resume continues in RUN_DIR itself" in capsys.readouterr().err
