"""``step_all``: several optimizers stepped as their own ``step()`` steps them, bit for bit, with one fused kernel per
set of hyper-parameters; anything else falls back to ``step()``."""

import copy

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile

from offlinerl.algorithms.iql import IQLConfig, IQLLearner, IQLRLModule
from offlinerl.core.fused_step import step_all
from offlinerl.core.rl_module import MultiRLModuleSpec, RLModuleSpec
from offlinerl.data.sources import InMemorySource


def _nets(seed=0):
    torch.manual_seed(seed)
    return [nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Linear(16, 3)) for _ in range(4)]


def _optimizers(nets):
    """Four optimizers: two Adams at one learning rate, one at another, an AdamW with weight decay (all fused)."""
    return [torch.optim.Adam(nets[0].parameters(), lr=1e-2, fused=True),
            torch.optim.Adam(nets[1].parameters(), lr=1e-2, fused=True),
            torch.optim.Adam(nets[2].parameters(), lr=3e-3, betas=(0.5, 0.9), fused=True),
            torch.optim.AdamW(nets[3].parameters(), lr=1e-2, weight_decay=0.1, fused=True)]


def _set_grads(nets, step):
    g = torch.Generator().manual_seed(step)
    for net in nets:
        for p in net.parameters():
            p.grad = torch.randn(p.shape, generator=g)


def _kernel_calls(fn) -> int:
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    return sum(e.count for e in prof.key_averages() if e.key in ("aten::_fused_adam_", "aten::_fused_adamw_"))


def test_step_all_equals_each_optimizers_own_step_bit_for_bit_with_one_kernel_per_hyper_parameters():
    a_nets, b_nets = _nets(), _nets()
    a_opts, b_opts = _optimizers(a_nets), _optimizers(b_nets)
    for step in range(6):
        _set_grads(a_nets, step)
        _set_grads(b_nets, step)
        for opt in a_opts:
            opt.step()
        calls = _kernel_calls(lambda: step_all(b_opts))
        # the first step makes the state (torch's own step: four kernels); then one per hyper-parameter set
        assert calls == (4 if step == 0 else 3)
    for x, y in zip(a_nets, b_nets):
        for p, q in zip(x.parameters(), y.parameters()):
            assert torch.equal(p, q)
    for oa, ob in zip(a_opts, b_opts):
        for pa, pb in zip(oa.param_groups[0]["params"], ob.param_groups[0]["params"]):
            for k in ("step", "exp_avg", "exp_avg_sq"):
                assert torch.equal(oa.state[pa][k], ob.state[pb][k]), k
    # a checkpoint of a batched optimizer loads into a fresh one, which steps on as the batched one does
    restored = _optimizers(copy.deepcopy(b_nets))
    for opt, saved in zip(restored, b_opts):
        opt.load_state_dict(copy.deepcopy(saved.state_dict()))
    assert all(torch.equal(r.state[r.param_groups[0]["params"][0]]["step"], torch.tensor(6.0)) for r in restored)


def test_an_optimizer_whose_step_is_not_plain_is_stepped_by_its_own_step():
    nets = _nets()
    hooked, unfused, sgd = (torch.optim.Adam(nets[0].parameters(), lr=1e-2, fused=True),
                            torch.optim.Adam(nets[1].parameters(), lr=1e-2),
                            torch.optim.SGD(nets[2].parameters(), lr=1e-2))
    calls = []
    hooked.register_step_post_hook(lambda opt, args, kwargs: calls.append(opt))
    ref = _nets()
    ref_opts = [torch.optim.Adam(ref[0].parameters(), lr=1e-2, fused=True), torch.optim.Adam(ref[1].parameters(), lr=1e-2),
                torch.optim.SGD(ref[2].parameters(), lr=1e-2)]
    for step in range(3):
        _set_grads(nets[:3], step)
        _set_grads(ref[:3], step)
        step_all([hooked, unfused, sgd])
        for opt in ref_opts:
            opt.step()
    assert calls == [hooked] * 3  # its hook ran: its own step
    for x, y in zip(nets[:3], ref[:3]):
        for p, q in zip(x.parameters(), y.parameters()):
            assert torch.equal(p, q)


def test_a_parameter_without_a_gradient_is_not_stepped():
    nets = _nets()
    opt = torch.optim.Adam(list(nets[0].parameters()), lr=1e-2, fused=True)
    _set_grads(nets[:1], 0)
    step_all([opt])
    frozen = nets[0][0].weight
    before = frozen.detach().clone()
    frozen.grad = None
    step_all([opt])
    assert torch.equal(frozen, before) and opt.state[frozen]["step"].item() == 1.0


@pytest.mark.parametrize("grad_clip", [None, 1.0])
def test_iql_learner_steps_its_three_optimizers_in_one_kernel_as_their_own_steps_would(grad_clip):
    """IQL's actor, critic and value optimizers share Adam's settings: one kernel per update, and the learner ends
    where a learner stepping each optimizer itself (a step hook forces torch's own step) ends, bit for bit."""
    obs, act = gym.spaces.Box(-np.inf, np.inf, (3,), np.float32), gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    rng = np.random.default_rng(0)
    n = 512
    arrays = {"obs": rng.normal(size=(n, 3)).astype(np.float32), "next_obs": rng.normal(size=(n, 3)).astype(np.float32),
              "actions": rng.uniform(-1, 1, size=(n, 2)).astype(np.float32), "rewards": rng.normal(size=n).astype(np.float32),
              "terminateds": np.zeros(n, np.float32)}
    cfg = IQLConfig.from_dict({"train_batch_size": 32, "model": {"hidden": [16, 16]}, "grad_clip": grad_clip})
    spec = MultiRLModuleSpec.single(RLModuleSpec(IQLRLModule, obs, act, cfg.module_config()))
    batched, own = (IQLLearner(config=cfg, module_spec=spec).build() for _ in range(2))
    for opt in own._optimizers.values():
        opt.register_step_pre_hook(lambda *args: None)
    sources = [InMemorySource(arrays, 32, 0) for _ in range(2)]
    for learner, source in zip((batched, own), sources):
        learner.run_updates(source, 2)  # the first update makes the optimizers' state
    assert _kernel_calls(lambda: batched.run_updates(sources[0], 3)) == 3
    assert _kernel_calls(lambda: own.run_updates(sources[1], 3)) == 9
    batched.run_updates(sources[0], 5)
    own.run_updates(sources[1], 5)
    for (k, x), (_, y) in zip(batched.module.state_dict().items(), own.module.state_dict().items()):
        assert torch.equal(x, y), k
