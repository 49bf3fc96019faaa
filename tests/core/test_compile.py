"""``config.compile``: the learner's loss computation through ``torch.compile`` gives the losses and updates of the
eager learner (to float rounding) on the CPU. Meant for GPUs (issue 28, item 4); on CPU it is only checked."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from offlinerl.algorithms.registry import get_algorithm
from offlinerl.core.rl_module import MultiRLModuleSpec, RLModuleSpec
from offlinerl.data.sources import InMemorySource

OBS = gym.spaces.Box(-np.inf, np.inf, (5,), np.float32)
ACT = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)


def _learner(name: str, compile: bool):
    spec = get_algorithm(name)
    cfg = spec.config_cls.from_dict({"train_batch_size": 32, "model": {"hidden": [16, 16]}, "compile": compile})
    module_spec = MultiRLModuleSpec.single(RLModuleSpec(spec.module_cls, OBS, ACT, cfg.module_config()))
    return spec.learner_cls(config=cfg, module_spec=module_spec).build()


@pytest.mark.slow
def test_a_compiled_learner_computes_what_the_eager_one_does():
    rng = np.random.default_rng(0)
    n = 500
    arrays = {"obs": rng.normal(size=(n, 5)).astype(np.float32), "next_obs": rng.normal(size=(n, 5)).astype(np.float32),
              "actions": rng.uniform(-1, 1, (n, 2)).astype(np.float32), "rewards": rng.normal(size=n).astype(np.float32),
              "terminateds": np.zeros(n, np.float32)}
    eager, compiled = _learner("iql", False), _learner("iql", True)
    assert compiled.compute_loss_for_module is not eager.compute_loss_for_module
    sources = [InMemorySource(arrays, 32, 0), InMemorySource(arrays, 32, 0)]
    for step in range(3):
        out = []
        for learner, source in zip((eager, compiled), sources):
            torch.manual_seed(step)
            out.append(learner.update(source.next_batch()))
        assert out[0].keys() == out[1].keys()
        for k in out[0]:
            assert out[1][k].item() == pytest.approx(out[0][k].item(), rel=1e-4, abs=1e-6), (step, k)
    weights = compiled.get_module_state()
    for k, v in eager.get_module_state().items():
        torch.testing.assert_close(weights[k], v, rtol=1e-4, atol=1e-5, msg=k)
