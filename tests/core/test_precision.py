"""``config.precision: bf16``: the forwards and losses under ``torch.autocast`` to bfloat16, the hidden layers in
bfloat16, every output layer (``networks.Head``, ``EnsembleMLP``'s last) in float32, weights and optimizer state in
float32; the losses track the float32 learner's to bfloat16's rounding."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from offlinerl.algorithms.registry import get_algorithm
from offlinerl.core import columns as C
from offlinerl.core.networks import EnsembleMLP, Head
from offlinerl.core.rl_module import MultiRLModuleSpec, RLModuleSpec

OBS = gym.spaces.Box(-np.inf, np.inf, (5,), np.float32)
BOX = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
DISCRETE = gym.spaces.Discrete(3)


def _learner(name, act_space, precision, seed=0):
    spec = get_algorithm(name)
    cfg = spec.config_cls.from_dict({"train_batch_size": 64, "model": {"hidden": [32, 32]}, "seed": seed,
                                     "precision": precision})
    module_spec = MultiRLModuleSpec.single(RLModuleSpec(spec.module_cls, OBS, act_space, cfg.module_config()))
    return spec.learner_cls(config=cfg, module_spec=module_spec).build()


def _batch(act_space, n=64, seed=0):
    r = np.random.default_rng(seed)
    actions = (r.integers(0, act_space.n, n) if isinstance(act_space, gym.spaces.Discrete)
               else r.uniform(-1, 1, (n, 2)).astype(np.float32))
    return {C.DEFAULT_MODULE_ID: {
        C.OBS: torch.as_tensor(r.normal(size=(n, 5)).astype(np.float32)),
        C.NEXT_OBS: torch.as_tensor(r.normal(size=(n, 5)).astype(np.float32)),
        C.ACTIONS: torch.as_tensor(actions),
        C.REWARDS: torch.as_tensor(r.normal(size=n).astype(np.float32) * 100),  # returns far from 1: Q of ~100s
        C.TERMINATEDS: torch.zeros(n), C.TRUNCATEDS: torch.zeros(n),
        "next_actions": torch.as_tensor(r.uniform(-1, 1, (n, 2)).astype(np.float32)),
        "has_next_actions": torch.ones(n), C.RETURNS_TO_GO: torch.as_tensor(r.normal(size=n).astype(np.float32) * 100)}}


CASES = [("bc", BOX), ("bc", DISCRETE), ("marwil", DISCRETE), ("iql", BOX), ("cql", BOX), ("td3bc", BOX),
         ("rebrac", BOX)]


@pytest.mark.parametrize("name,act_space", CASES, ids=[f"{n}-{type(s).__name__}" for n, s in CASES])
def test_bf16_runs_hidden_layers_in_bfloat16_and_output_layers_in_float32(name, act_space):
    learner = _learner(name, act_space, "bf16")
    dtypes: dict[str, set] = {"hidden": set(), "head": set()}

    def hook(kind):
        return lambda module, inputs, output: dtypes[kind].add(output.dtype)

    for module in learner.module.modules():
        if isinstance(module, (Head, EnsembleMLP)):
            module.register_forward_hook(hook("head"))
        elif isinstance(module, torch.nn.Linear):
            module.register_forward_hook(hook("hidden"))
    metrics = learner.update(_batch(act_space))
    assert dtypes["head"] == {torch.float32}
    assert dtypes["hidden"] in ({torch.bfloat16}, set())  # set(): every hidden layer sits in an EnsembleMLP
    assert all(torch.isfinite(v).all() for v in metrics.values())
    assert all(p.dtype == torch.float32 for p in learner.module.parameters())
    state = learner.get_state()["optimizers"]
    assert all(v.dtype == torch.float32 for opt in state.values() for s in opt["state"].values()
               for v in s.values() if torch.is_tensor(v) and v.numel() > 1)


@pytest.mark.parametrize("name,act_space", CASES, ids=[f"{n}-{type(s).__name__}" for n, s in CASES])
def test_bf16_losses_track_the_float32_learner(name, act_space):
    fp32, bf16 = _learner(name, act_space, "fp32"), _learner(name, act_space, "bf16")
    torch.manual_seed(1)
    a = fp32.update(_batch(act_space))
    torch.manual_seed(1)
    b = bf16.update(_batch(act_space))
    assert a.keys() == b.keys()
    for k in a:
        if k.startswith("losses/"):
            # bfloat16 keeps 8 significant bits (relative rounding 2^-9); a loss sums many rounded terms
            assert b[k].item() == pytest.approx(a[k].item(), rel=0.05, abs=0.05), k


def test_precision_other_than_fp32_or_bf16_is_refused_and_bf16_takes_vectorised_seeds():
    config_cls = get_algorithm("bc").config_cls
    with pytest.raises(Exception, match="precision.*'fp32' or 'bf16'"):
        config_cls.from_dict({"precision": "fp16"})
    assert config_cls.from_dict({"precision": "bf16", "num_seeds": 4}).num_seeds == 4  # tests/core/test_seed_stack.py
