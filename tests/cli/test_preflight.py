"""A job's cheap refusals happen before Ray starts (``offlinerl.jobs.preflight``): a missing dataset, a taken or
unsafe ``--output``, an algorithm the dataset's action space rules out, GPUs asked for without CUDA; a stop
condition the job will round is a printed note. The refusals run in one child process that never had Ray: each
is one line, exit code as the command's, and that process never initialised Ray (no 'starting Ray' line)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from offlinerl.jobs.preflight import simulator_note, stop_note
from offlinerl.jobs.spec import StopConfig
from tests.conftest import DATASETS, REPO

CKPT = REPO / "tests" / "fixtures" / "checkpoints" / "v1-bc-cartpole"  # a BC checkpoint on CartPole

RUN_ALL = """
import json, sys
import ray
from offlinerl.cli import main
codes = [main(argv) for argv in json.loads(sys.argv[1])]
print(json.dumps({"codes": codes, "ray_initialized": ray.is_initialized()}))
"""


def _job(tmp_path, name: str, algorithm: str, dataset) -> str:
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"algorithm: {algorithm}\ndataset: {dataset}\nconfig: {{updates_per_iteration: 100}}\n"
                    f"stop: {{updates: 200}}\noutput: {tmp_path / 'runs'}\n")
    return str(path)


def test_refusals_come_before_ray_starts(tmp_path):
    if not (REPO / "datasets" / "cartpole-mixed").is_dir():
        pytest.fail("datasets/cartpole-mixed is missing")
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "something").write_text("x")
    cartpole = DATASETS / "cartpole-mixed"
    missing = tmp_path / "no-such-dataset"
    cases = [
        ["train", _job(tmp_path, "missing", "bc", missing)],
        ["train", _job(tmp_path, "taken", "bc", cartpole), "-o", str(taken)],
        ["train", _job(tmp_path, "inside", "bc", cartpole), "-o", str(cartpole / "run")],
        ["train", _job(tmp_path, "discrete", "td3bc", cartpole)],
        ["train", _job(tmp_path, "gpu", "bc", cartpole), "--set", "config.num_gpus_per_learner=1"],
        ["finetune", str(REPO / "jobs" / "cartpole-iql-finetune.yaml"), "--from", str(CKPT), "-o", str(taken)],
        ["finetune", str(REPO / "jobs" / "cartpole-iql-finetune.yaml"), "--from", str(CKPT), "--set",
         "config.num_gpus_per_learner=1", "-o", str(tmp_path / "ft")],
    ]
    env = {**os.environ, "PYTHONPATH": str(REPO), "CUDA_VISIBLE_DEVICES": ""}  # no CUDA device, even on a GPU host
    proc = subprocess.run([sys.executable, "-c", RUN_ALL, json.dumps(cases)], env=env, cwd=REPO, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.splitlines()[-1])
    lines = proc.stderr.splitlines()
    assert "Traceback" not in proc.stderr and not any("starting Ray" in line for line in lines), proc.stderr
    assert result == {"codes": [1, 1, 1, 1, 1, 1, 2], "ray_initialized": False}, proc.stderr
    assert lines == [
        f"offlinerl train: {missing}: not a dataset directory",
        f"offlinerl train: {taken} exists and is not empty; choose another --output",
        f"offlinerl train: {cartpole / 'run'}: refusing to write here: it lies inside the input directory {cartpole} "
        "(the dataset it reads)",
        "offlinerl train: algorithm td3bc: TD3+BC needs continuous actions (a 1-D Box action space); this dataset's "
        "action space is Discrete(2). For discrete actions use cql, iql, marwil or bc",
        f"offlinerl train: config.num_gpus_per_learner: 1 GPU(s) per learner asked for, but torch "
        f"{__import__('torch').__version__} sees no CUDA device (a CPU build, or no GPU here); set it to 0 to train "
        "on the CPU",
        f"offlinerl finetune: {taken} exists and is not empty; choose another --output",
        f"offlinerl finetune: config.num_gpus_per_learner: 1 GPU(s) per learner asked for, but torch "
        f"{__import__('torch').__version__} sees no CUDA device (a CPU build, or no GPU here); set it to 0 to train "
        "on the CPU",
    ]


def test_a_stop_the_job_would_round_is_a_note_saying_what_runs():
    assert stop_note(StopConfig(updates=300), 500) == (
        "note: stop.updates=300 is not a multiple of config.updates_per_iteration=500; a job stops only between "
        "iterations, so this one runs 500 updates (1 iteration). Set stop.updates=500 (or "
        "config.updates_per_iteration to a divisor of 300) to silence this note")
    assert "runs 1500 updates (3 iterations)" in stop_note(StopConfig(updates=1200), 500)
    assert stop_note(StopConfig(updates=1000), 500) is None
    assert stop_note(StopConfig(updates=1200, iterations=2), 500) is None  # 2 iterations come first: exact
    assert stop_note(StopConfig(iterations=3), 500) is None
    from offlinerl.jobs.preflight import planned_updates  # what the progress bar counts to

    assert [planned_updates(StopConfig(updates=300), 500), planned_updates(StopConfig(updates=1200, iterations=2), 500),
            planned_updates(StopConfig(iterations=3), 500), planned_updates(StopConfig(wall_time_s=9.0), 500)] == [
        500, 1000, 1500, None]


def test_preflight_logs_the_note_before_ray(tmp_path):
    """The note goes through the job's ``log`` from preflight itself, i.e. before ``init_ray`` is reached."""
    from offlinerl.algorithms.registry import get_algorithm
    from offlinerl.jobs.preflight import preflight

    config = get_algorithm("bc").config_cls.from_dict({"updates_per_iteration": 500})
    seen: list[str] = []
    preflight(DATASETS / "cartpole-mixed", config, StopConfig(updates=300), run_dir=None, resuming=False,
              log=seen.append)
    assert seen == [stop_note(StopConfig(updates=300), 500)]


def test_gpus_of_remote_learners_on_a_cluster_are_not_checked_here(monkeypatch):
    """A cluster's GPU nodes are not this machine: with an address and remote learners, no CUDA here is fine;
    with in-process learners (num_learners=0) the check still applies."""
    from offlinerl.algorithms.registry import get_algorithm
    from offlinerl.config_io import ConfigError
    from offlinerl.jobs.preflight import preflight

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    bc = get_algorithm("bc").config_cls
    args = dict(run_dir=None, resuming=False, log=print, address="10.0.0.1:6379")
    cartpole, stop = DATASETS / "cartpole-mixed", StopConfig(updates=1000)
    if not __import__("torch").cuda.is_available():
        preflight(cartpole, bc.from_dict({"num_gpus_per_learner": 1, "num_learners": 2}), stop, **args)
        with pytest.raises(ConfigError, match="config.num_gpus_per_learner: 1 GPU"):
            preflight(cartpole, bc.from_dict({"num_gpus_per_learner": 1, "num_learners": 0}), stop, **args)


def test_a_dataset_made_with_another_simulator_gets_a_note(tmp_path):
    """The card records the MuJoCo / gymnasium it was made with; another version here is said before the job."""
    import mujoco

    from offlinerl.episodes.software import made_with

    card = {"random_return": 0.0, "best_return": 1.0, "made_with": made_with()}
    (tmp_path / "card.json").write_text(json.dumps(card))
    assert simulator_note(tmp_path) is None  # made here
    card["made_with"]["packages"]["mujoco"] = "4.0.1"
    (tmp_path / "card.json").write_text(json.dumps(card))
    note = simulator_note(tmp_path)
    assert note.startswith(f"note: {tmp_path} was made with mujoco 4.0.1 (this machine: {mujoco.__version__}): ")
    del card["made_with"]  # a card written before cards said: nothing to compare
    (tmp_path / "card.json").write_text(json.dumps(card))
    assert simulator_note(tmp_path) is None
    (tmp_path / "card.json").write_text("{")  # a broken card is the scorer's to report, not this note's
    assert simulator_note(tmp_path) is None
