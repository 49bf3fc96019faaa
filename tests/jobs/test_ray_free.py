"""A job that needs nothing of Ray runs without it (issue 28, "a start in seconds"), with the same results.

In-memory data, its one learner in this process, no env runners, no cluster: the dataset is validated, read and
turned into transitions in this process with pyarrow, through the same transforms. Tested here: when a job needs
Ray (``ray_reason``), that both paths give the same validation report, the same arrays and the same updates bit
for bit, and that ``offlinerl train`` on such a job never imports Ray (a child process: this session's Ray runs).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch

from offlinerl.algorithms.bc import BCConfig
from offlinerl.algorithms.iql import IQLConfig
from offlinerl.data import OfflineData
from offlinerl.data.config import DataConfig
from offlinerl.episodes.validate import validate_dataset
from offlinerl.training.algorithm import Algorithm
from offlinerl.training.online_config import OnlineConfig
from offlinerl.training.setup import ray_reason
from tests.datagen import make_dataset

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def pendulum(tmp_path_factory):
    # 3 files (two rows each), so the order the files are read in matters
    return make_dataset(tmp_path_factory.mktemp("d") / "pendulum", env_id="Pendulum-v1", episodes=6, max_steps=60,
                        rows_per_file=2)


def test_ray_reason_names_what_needs_ray(pendulum, monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert ray_reason(BCConfig(), None, pendulum) is None
    assert ray_reason(BCConfig(), None, pendulum, address="127.0.0.1:6379") == "a Ray cluster to join"
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:6379")
    assert ray_reason(BCConfig(), None, pendulum) == "a Ray cluster to join"
    monkeypatch.delenv("RAY_ADDRESS")
    assert ray_reason(BCConfig(num_learners=2), None, pendulum) == "2 remote learners"
    assert ray_reason(BCConfig(), OnlineConfig(), pendulum) == "online experience (env runners)"
    assert ray_reason(BCConfig(data=DataConfig(mode="streaming")), None, pendulum) == "streaming data"
    # auto: streaming when the transitions would not fit in data.in_memory_max_bytes
    assert ray_reason(BCConfig(data=DataConfig(in_memory_max_bytes=1)), None, pendulum) == "streaming data"
    with pytest.raises(ValueError, match="use_ray=False: this job needs Ray for streaming data"):
        Algorithm("bc", BCConfig(data=DataConfig(mode="streaming")), pendulum, use_ray=False)


def test_local_validation_reports_what_ray_reports(ray_session, tmp_path):
    bad = make_dataset(tmp_path / "bad", episodes=4, rows_per_file=2)
    first = sorted(bad.glob("*.parquet"))[0]
    table = pq.read_table(first)
    rewards = table.column("rewards").to_pylist()
    rewards[1] = rewards[1][:-1]  # one reward short of its episode's steps
    pq.write_table(table.set_column(table.schema.get_field_index("rewards"), "rewards", [rewards]), first)
    ray_report, local_report = validate_dataset(bad), validate_dataset(bad, local=True)
    assert not ray_report.ok and ray_report.ray_nodes and local_report.ray_nodes == []
    ray_json, local_json = ray_report.to_json(), local_report.to_json()
    del ray_json["ray_nodes"], local_json["ray_nodes"]
    assert local_json == ray_json


def test_without_ray_the_same_arrays_and_updates_bit_for_bit(ray_session, pendulum):
    cfg = IQLConfig.from_dict({"seed": 3, "train_batch_size": 32, "updates_per_iteration": 7,
                               "normalize_observations": True, "model": {"hidden": [16, 16]},
                               "evaluation": {"episodes": 2, "interval": 1}})
    ray_data, local_data = OfflineData(pendulum, cfg), OfflineData(pendulum, cfg, use_ray=False)
    ray_arrays, local_arrays = ray_data.load_arrays(), local_data.load_arrays()
    assert ray_arrays.keys() == local_arrays.keys()
    for k in ray_arrays:
        np.testing.assert_array_equal(ray_arrays[k], local_arrays[k], err_msg=k)
    assert ray_data.connector_state() == local_data.connector_state()

    runs = {}
    for use_ray in (True, False):
        algo = Algorithm("iql", cfg, pendulum, use_ray=use_ray)
        try:
            history = [algo.train() for _ in range(3)]
            runs[use_ray] = (history, algo.learner_group.get_weights(), algo.ray_nodes())
        finally:
            algo.stop()
    (ray_history, ray_weights, ray_nodes), (local_history, local_weights, local_nodes) = runs[True], runs[False]
    timing = ("perf/", "time/")
    for a, b in zip(ray_history, local_history):
        assert {k: v for k, v in a.items() if not k.startswith(timing)} == \
            {k: v for k, v in b.items() if not k.startswith(timing)}
    assert ray_weights.keys() == local_weights.keys()
    for k in ray_weights:
        assert torch.equal(ray_weights[k], local_weights[k]), k
    assert ray_nodes["learners"] and local_nodes == {"cluster": [], "driver": None, "learners": [], "validation": []}


def test_train_on_an_in_memory_job_never_imports_ray(tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text(json.dumps({"algorithm": "bc", "dataset": str(REPO / "datasets" / "cartpole-mixed"),
                               "config": {"updates_per_iteration": 50, "evaluation": {"episodes": 2, "interval": 1}},
                               "stop": {"updates": 100}}))
    script = ("import sys\nfrom offlinerl.cli import main\n"
              f"code = main(['train', {str(job)!r}, '-o', {str(tmp_path / 'run')!r}, '--no-progress'])\n"
              "print('RAY_IMPORTED', 'ray' in sys.modules, code)\n")
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env,
                          cwd=tmp_path)
    assert "RAY_IMPORTED False 0" in proc.stdout, proc.stdout + proc.stderr
    assert "starting Ray" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result["updates"] == 100 and result["final_eval_return"] is not None and result["first_update_s"] > 0
    assert result["ray_nodes"] == {"cluster": [], "driver": None, "learners": [], "validation": []}


def test_a_sweep_trial_joins_the_cluster_only_when_its_job_needs_ray(pendulum, tmp_path):
    from offlinerl.jobs.sweep.trials import _needs_ray

    (tmp_path / "job.yaml").write_text(json.dumps({"algorithm": "bc", "dataset": str(pendulum), "stop": {"updates": 10}}))
    spec = {"workdir": str(tmp_path), "job": "job.yaml", "overrides": ["config.seed=1"]}
    run = tmp_path / "trials" / "000_seed-1"
    assert not _needs_ray(spec, run)  # in memory, one learner in the process: the trial's train runs without Ray
    assert _needs_ray({**spec, "overrides": ["config.num_learners=1"]}, run)
    assert _needs_ray({**spec, "overrides": ["config.data.mode=streaming"]}, run)
    assert _needs_ray({**spec, "job": "missing.yaml"}, run)  # what cannot be read here joins, as before


def test_an_interrupted_vectorised_trial_starts_again_without_joining(tmp_path):
    """A vectorised sweep point killed mid-run left its run directory (config.yaml, the seeds' checkpoints): the
    retry read it as a resumable single run, failed, joined the cluster, and `train` then refused num_seeds with an
    address, so the point never trained again. It starts afresh from the job file, in its own process."""
    from offlinerl.cli import main
    from offlinerl.jobs.sweep.trials import _needs_ray, _trial_command

    job = tmp_path / "job.yaml"
    job.write_text(json.dumps({"algorithm": "bc", "dataset": str(REPO / "datasets" / "cartpole-mixed"),
                               "config": {"updates_per_iteration": 10, "evaluation": {"interval": 0}},
                               "stop": {"updates": 20}, "checkpoint_interval": 1}))
    run = tmp_path / "trials" / "000"
    overrides = ["config.num_seeds=2", "config.seed=0"]
    assert main(["train", str(job), "-o", str(run), "--no-progress", *[a for o in overrides for a in ("--set", o)]]) == 0
    (run / "result.json").unlink()  # as if killed before the end
    spec = {"workdir": str(tmp_path), "job": "job.yaml", "overrides": overrides}
    assert not _needs_ray(spec, run)
    command = _trial_command(spec, run)
    assert "--resume" not in command and command[-4:] == ["--set", overrides[0], "--set", overrides[1]]
    assert not run.exists()  # ours, inside trials/: removed for the fresh start
