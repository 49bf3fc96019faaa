"""``--device`` on train, finetune, evaluate and ope: ``cpu`` trains and evaluates (and is recorded in the run's
config and result), a GPU this machine lacks is one line before Ray starts (exit 2), and a name that is no device
is argparse's one error line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from offlinerl.cli import main
from tests.cli.test_preflight import RUN_ALL

REPO = Path(__file__).resolve().parents[2]
TINY = ["--set", "stop.updates=20", "--set", "config.updates_per_iteration=10", "--set", "config.evaluation.episodes=1",
        "--set", "config.model.hidden=[16]", "--no-progress"]


@pytest.fixture(scope="module")
def cpu_run(ray_session, tmp_path_factory):
    run = tmp_path_factory.mktemp("device") / "run"
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(REPO)
        assert main(["train", "jobs/cartpole-bc.yaml", "--device", "cpu", "-o", str(run), *TINY]) == 0
    return run


def test_device_cpu_trains_and_the_run_records_it(cpu_run):
    assert yaml.safe_load((cpu_run / "config.yaml").read_text())["config"]["device"] == "cpu"
    result = json.loads((cpu_run / "result.json").read_text())
    assert result["device"] == "cpu" and result["updates"] == 20


def test_evaluate_and_ope_run_on_the_cpu(cpu_run, capsys):
    checkpoint = json.loads((cpu_run / "result.json").read_text())["checkpoint"]
    capsys.readouterr()
    assert main(["evaluate", checkpoint, "--device", "cpu", "--episodes", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["device"] == "cpu"
    assert main(["ope", checkpoint, "--dataset", str(REPO / "datasets" / "cartpole-mixed"), "--method", "fqe",
                 "--fqe-updates", "20", "--resamples", "10", "--device", "cpu", "--skip-validation"]) == 0
    assert " fqe " in capsys.readouterr().out


@pytest.mark.parametrize("device", ["cuda", "cuda:3"])
def test_a_gpu_that_is_not_here_is_refused_before_ray_starts(device, tmp_path):
    """In a child process that sees no CUDA device and never had Ray: each command is one line, exit 2, and
    Ray was never initialised (test_preflight's RUN_ALL)."""
    line = f"--device {device}: no CUDA device is available (torch {torch.__version__} sees 0); use --device cpu"
    commands = [
        ("train", ["train", "jobs/cartpole-bc.yaml", "-o", str(tmp_path / "run"), *TINY]),
        ("finetune", ["finetune", "jobs/cartpole-iql-finetune.yaml", "-o", str(tmp_path / "ft")]),
        ("evaluate", ["evaluate", str(tmp_path)]),
        ("ope", ["ope", str(tmp_path), "--dataset", "datasets/cartpole-mixed"]),
    ]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}  # no CUDA device, even on a GPU host
    proc = subprocess.run([sys.executable, "-c", RUN_ALL, json.dumps([[*argv, "--device", device]
                                                                       for _, argv in commands])],
                          env=env, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.splitlines()[-1]) == {"codes": [2, 2, 2, 2], "ray_initialized": False}, proc.stderr
    assert proc.stderr.splitlines() == [f"offlinerl {name}: {line}" for name, _ in commands]
    assert not (tmp_path / "run").exists() and not (tmp_path / "ft").exists()


def test_a_name_that_is_no_device_is_refused_by_argparse(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["train", "jobs/cartpole-bc.yaml", "--device", "tpu"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "offlinerl train: error: argument --device: 'tpu' is not a device: use cpu, cuda or cuda:N")


def test_a_resumed_job_keeps_its_device(tmp_path, capsys):
    assert main(["train", "--resume", str(tmp_path), "--device", "cpu"]) == 2
    assert capsys.readouterr().err.strip() == (
        "offlinerl train: a resumed job keeps its config (its device too); drop --device")


def test_cuda_reserves_one_gpu_per_learner_unless_num_gpus_per_learner_says_how_many():
    from offlinerl.algorithms.bc import BCConfig
    from offlinerl.config_io import ConfigError

    assert BCConfig(device="cuda", num_learners=2).learner_gpus == 1
    assert BCConfig(device="cuda", num_learners=2, num_gpus_per_learner=0.5).learner_gpus == 0.5
    assert BCConfig(device="cpu").learner_gpus == 0 and BCConfig().learner_device == "cpu"
    assert BCConfig(num_gpus_per_learner=1).learner_device == "cuda"
    with pytest.raises(ConfigError, match="device: 'cpu' with num_gpus_per_learner=1; drop one of them"):
        BCConfig(device="cpu", num_gpus_per_learner=1)
    with pytest.raises(ConfigError, match="device: 'cpu', 'cuda' or 'cuda:N', got 'gpu'"):
        BCConfig(device="gpu")
