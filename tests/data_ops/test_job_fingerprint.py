"""A job records the fingerprint of the data it trained on: result.json and every checkpoint's algorithm.json."""

from __future__ import annotations

import json

import yaml

from offlinerl.cli import main
from offlinerl.data_ops import FilterConfig, filter_dataset
from offlinerl.training.checkpoint_meta import CheckpointMeta
from tests.datagen import make_dataset


def test_result_and_checkpoint_name_the_training_data(ray_session, tmp_path):
    source = make_dataset(tmp_path / "pendulum", env_id="Pendulum-v1", episodes=4, max_steps=30)
    data = filter_dataset(source, tmp_path / "best", FilterConfig(top="50%"))
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump({
        "algorithm": "bc", "dataset": str(data.path), "stop": {"iterations": 1},
        "config": {"updates_per_iteration": 5, "train_batch_size": 8, "model": {"hidden": [8]},
                   "evaluation": {"episodes": 1, "interval": 1}}}))
    run = tmp_path / "run"
    assert main(["train", str(job), "--output", str(run), "--no-progress"]) == 0
    result = json.loads((run / "result.json").read_text())
    assert result["dataset_fingerprint"] == data.info.fingerprint is not None
    meta = CheckpointMeta.read(result["checkpoint"])
    assert meta.dataset_fingerprint == data.info.fingerprint
    assert meta.to_json()["dataset_fingerprint"] == data.info.fingerprint
