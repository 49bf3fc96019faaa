"""The examples run (briefly), and the Ray-free reference BC computes what the Ray path computes."""

import numpy as np
import pytest
import torch

from offlinerl.algorithms.bc import BCConfig
from offlinerl.core import columns as C
from offlinerl.training.algorithm import Algorithm
from tests.datagen import make_dataset


@pytest.fixture(scope="module")
def cartpole(tmp_path_factory):
    return make_dataset(tmp_path_factory.mktemp("d") / "cartpole", episodes=6)


def test_custom_module_example(ray_session, cartpole):
    from examples.custom_module import main

    r = main(updates=40, dataset=cartpole, episodes=2)
    assert r["learner/updates"] == 40 and np.isfinite(r["losses/actor"]) and r["eval/return_mean"] > 0


def test_custom_loss_example(ray_session, cartpole):
    from examples.custom_loss import main

    r = main(updates=40, dataset=cartpole, episodes=2)
    assert 0.3 <= r["filtered_bc/kept"] <= 1.0 and r["eval/return_mean"] > 0


def test_reference_bc_matches_the_ray_path_exactly(ray_session, cartpole):
    from examples.reference_bc import load_transitions, train

    config = BCConfig.from_dict({"updates_per_iteration": 25, "train_batch_size": 32, "model": {"hidden": [32, 32]}})
    algo = Algorithm("bc", config, cartpole)
    arrays = algo.offline_data.load_arrays()
    ref_data = load_transitions(cartpole, config)
    for k in arrays:
        np.testing.assert_array_equal(arrays[k], ref_data[k].numpy())  # same data path
    metrics = algo.train()
    module, losses = train(cartpole, config, 25)
    assert metrics["losses/actor"] == pytest.approx(np.mean(losses), rel=1e-6)
    ray_weights = algo.learner_group.get_weights()
    for k, v in module.state_dict().items():
        torch.testing.assert_close(ray_weights[f"rl_modules.{C.DEFAULT_MODULE_ID}.{k}"], v, rtol=0, atol=0)


def test_logs_to_onnx_example_runs_the_whole_path(ray_session, tmp_path, monkeypatch):
    """CSV logs -> convert table -> validate -> CQL and IQL selected by FQE -> ONNX -> actions (issue 14)."""
    import json

    import ray

    from examples.logs_to_onnx import main

    monkeypatch.setenv("RAY_ADDRESS", ray.get_runtime_context().gcs_address)  # the commands join this Ray
    summary = main(["--workdir", str(tmp_path / "demo"), "--quick"])
    assert set(summary["selected"]) == {"cql", "iql"}
    best = summary["selected"][summary["best"]]
    assert best["estimate"] == max(s["estimate"] for s in summary["selected"].values())
    assert summary["actions"] and set(summary["actions"]) <= {0, 1} and summary["cartpole_return_mean"] >= 8
    meta = json.loads((tmp_path / "demo" / "policy.onnx.json").read_text())
    assert meta["checkpoint"] == best["checkpoint"] and meta["runtime"] == "onnx"
    assert json.loads((tmp_path / "demo" / "dataset" / "dataset.json").read_text()).get("env_id") is None
