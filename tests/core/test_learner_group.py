"""LearnerGroup with real Ray actors and torch.distributed (gloo)."""

import gymnasium as gym
import numpy as np
import torch

from offlinerl.algorithms.bc import BCConfig, BCLearner
from offlinerl.algorithms.marwil import MARWILConfig, MARWILLearner
from offlinerl.core import columns as C
from offlinerl.core.default_module import DefaultRLModule
from offlinerl.core.learner_group import LearnerGroup
from offlinerl.core.rl_module import MultiRLModuleSpec, RLModuleSpec

OBS = gym.spaces.Box(-1, 1, (4,), np.float32)
ACT = gym.spaces.Box(-2, 2, (2,), np.float32)


def _batch(n=64):
    rng = np.random.default_rng(0)
    return {C.OBS: rng.normal(size=(n, 4)).astype(np.float32),
            C.ACTIONS: rng.uniform(-1.9, 1.9, size=(n, 2)).astype(np.float32),
            C.RETURNS_TO_GO: rng.normal(size=n).astype(np.float32)}


def _spec(cfg):
    return MultiRLModuleSpec.single(RLModuleSpec(DefaultRLModule, OBS, ACT, cfg.module_config()))


def test_two_ddp_learners_stay_identical_and_match_one_learner(ray_session):
    for cfg_cls, learner_cls in ((BCConfig, BCLearner), (MARWILConfig, MARWILLearner)):
        cfg = cfg_cls(lr=1e-2, grad_clip=1.0, model={"hidden": (32, 32)}, num_cpus_per_learner=0.5)
        cfg = cfg_cls.from_dict({**cfg.to_dict()})
        single = LearnerGroup(cfg.replace(num_learners=0), learner_cls, _spec(cfg))
        group = LearnerGroup(cfg.replace(num_learners=2), learner_cls, _spec(cfg))
        try:
            batch = _batch()
            for _ in range(5):
                m1 = single.update_from_batch(batch)
                m2 = group.update_from_batch(batch)
            w_a, w_b = group.get_all_weights()
            for k in w_a:
                assert torch.equal(w_a[k], w_b[k]), k  # replicas identical, bit for bit
            w_single = single.get_weights()
            for k in w_a:
                torch.testing.assert_close(w_a[k], w_single[k], rtol=1e-5, atol=1e-6)
            assert abs(m1["losses/actor"] - m2["losses/actor"]) < 1e-4
        finally:
            group.shutdown()
