"""The examples run (briefly), and the Ray-free reference BC computes what the Ray path computes."""

import numpy as np
import pytest
import torch

from offlinerl.algorithms.algorithm import Algorithm
from offlinerl.algorithms.bc import BCConfig
from offlinerl.core import columns as C
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
