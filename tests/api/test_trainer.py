"""The Python API (src/offlinerl/api/trainer.py, src/offlinerl/__init__.py): ``BCConfig(...).build(dataset)``, ``fit`` (the
run directory ``offlinerl train`` writes, through the same driver), ``evaluate``, ``predict``; ``import offlinerl``
stays light; wrong calls are one clear error."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import offlinerl
from offlinerl.algorithms.algorithm_config import EvaluationConfig
from offlinerl.algorithms.bc import BCConfig
from offlinerl.jobs.spec import load_job_run
from offlinerl.jobs.train import RUN_FILES

DATASETS = Path(__file__).resolve().parents[2] / "datasets"


def test_import_offlinerl_imports_nothing_heavy():
    script = ("import sys, offlinerl\n"
              "print(sorted(m for m in ('torch', 'ray', 'numpy', 'gymnasium') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "[]", done.stderr
    from offlinerl.algorithms.cql import CQLConfig

    assert offlinerl.CQLConfig is CQLConfig
    assert {"BCConfig", "CQLConfig", "IQLConfig", "TD3BCConfig", "MARWILConfig", "ReBRACConfig",
            "load_policy"} <= set(dir(offlinerl))
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        offlinerl.Nope  # noqa: B018


def _updates(run: Path) -> list[float]:
    return [json.loads(line)["learner/updates"] for line in (run / "metrics.jsonl").read_text().splitlines()]


def test_build_fit_evaluate_predict(tmp_path, ray_session):
    config = BCConfig(updates_per_iteration=20, train_batch_size=64, evaluation=EvaluationConfig(episodes=2))
    with config.build(DATASETS / "cartpole-mixed") as algo:
        assert (algo.name, algo.num_updates) == ("bc", 0)
        with pytest.raises(ValueError, match="^fit: give updates, iterations, wall_time_s or eval_return$"):
            algo.fit()
        first = algo.fit(updates=40, output=tmp_path, progress=False, log=lambda _: None)
        run = Path(first["run_dir"])
        assert run.parent == tmp_path and run.name.startswith("bc-cartpole-mixed-")
        assert all((run / f).is_file() for f in RUN_FILES) and (run / "tensorboard").is_dir()
        assert (first["updates"], first["iterations"], first["eval_episodes"]) == (40, 2, 2)
        assert _updates(run) == [20.0, 40.0]  # every iteration evaluated: no separate final record
        spec, resumed, checkpoint = load_job_run(run)  # config.yaml is a job file: train --resume continues it
        assert (spec.algorithm, spec.stop.updates, resumed) == ("bc", 40, config)
        assert checkpoint == run / "checkpoints" / "final"

        second = algo.fit(updates=20, run_dir=tmp_path / "more", logger="none", progress=False, log=lambda _: None)
        assert second["updates"] == 60 and _updates(tmp_path / "more") == [60.0]
        assert not (tmp_path / "more" / "tensorboard").exists()

        assert algo.evaluate(episodes=3)["eval/episodes"] == 3
        obs = np.array([[0.0, 0.1, 0.02, -0.1], [0.1, 0.0, -0.03, 0.2], [0.0, 0.0, 0.0, 0.0]], dtype=np.float32)
        actions = algo.predict(obs)
        assert actions.dtype == np.int64 and actions.shape == (3,)
        np.testing.assert_array_equal(offlinerl.load_policy(second["checkpoint"]).predict(obs), actions)
        snapshot = algo.policy()
        np.testing.assert_array_equal(snapshot.predict(obs), actions)
        assert algo.predict(obs[2]) == actions[2]


def test_wrong_calls_are_one_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"nowhere: not an episode dataset \(no dataset.json\)$"):
        BCConfig().build(tmp_path / "nowhere")

    class MyConfig(BCConfig):
        pass

    with pytest.raises(ValueError, match="no registered algorithm uses MyConfig; register it with register_algorithm"):
        MyConfig().build(DATASETS / "cartpole-mixed")
    from offlinerl.api.trainer import logging_config

    with pytest.raises(ValueError, match="^logger: a LoggingConfig, a mapping"):
        logging_config(42)
    assert logging_config({"tensorboard": False}).tensorboard is False
