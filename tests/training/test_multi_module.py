"""A multi-agent dataset (rows tagged with agent_id/module_id) trains one module per policy."""

import dataclasses

import numpy as np
import torch

from offlinerl.algorithms.bc import BCConfig
from offlinerl.core import columns as C
from offlinerl.episodes import load_episodes, read_info, write_dataset
from offlinerl.training.algorithm import Algorithm
from tests.datagen import make_dataset


def test_two_modules_learn_from_their_own_rows(ray_session, tmp_path):
    single = make_dataset(tmp_path / "single", episodes=6)
    info = read_info(single)
    eps = load_episodes(single)
    tagged = [dataclasses.replace(e, agent_id=f"agent_{i % 2}", module_id=("left" if i % 2 else "right"))
              for i, e in enumerate(eps)]
    write_dataset(tagged, tmp_path / "multi", observation_space=info.observation_space,
                  action_space=info.action_space, env_id=info.env_id)
    cfg = BCConfig.from_dict({"updates_per_iteration": 10, "train_batch_size": 16, "model": {"hidden": [16]},
                              "evaluation": {"interval": 0}})
    algo = Algorithm("bc", cfg, tmp_path / "multi")
    assert algo.offline_data.module_ids == ["left", "right"]
    arrays = algo.offline_data.load_arrays()
    right_steps = sum(len(e) for i, e in enumerate(eps) if i % 2 == 0)
    assert (arrays["_module_id"] == "right").sum() == right_steps
    before = {k: v.clone() for k, v in algo.learner_group.get_weights().items()}
    m = algo.train()
    assert "left/losses/actor" in m and "right/losses/actor" in m
    after = algo.learner_group.get_weights()
    for mid in ("left", "right"):
        key = f"rl_modules.{mid}.pi_head.weight"
        assert not torch.equal(before[key], after[key])
    assert not algo.can_evaluate
    assert np.isfinite(m["left/losses/actor"])
