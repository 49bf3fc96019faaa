import copy
import time

import gymnasium as gym
import numpy as np
import pytest
import torch

from offlinerl.core import columns as C
from offlinerl.core.default_module import DefaultRLModule
from offlinerl.core.learner import Learner
from offlinerl.core.loss import LossOut
from offlinerl.core.rl_module import MultiRLModuleSpec, RLModuleSpec

OBS = gym.spaces.Box(-1, 1, (3,), np.float32)


class Cfg:
    lr = 0.1
    seed = 0
    grad_clip = None


class CoupledLearner(Learner):
    """The actor loss is written naively: it reads V(s) without detaching it."""

    def configure_optimizers_for_module(self, module_id, module):
        return {"actor": torch.optim.SGD(list(module.policy_parameters()), lr=0.1),
                "value": torch.optim.SGD(list(module.value_parameters()), lr=0.1)}

    def compute_loss_for_module(self, module_id, module, batch, fwd_out):
        logp = fwd_out[C.ACTION_DIST].log_prob(batch[C.ACTIONS])
        actor = -(fwd_out[C.VALUES] * logp).mean()
        value = 0.0 * fwd_out[C.VALUES].mean()
        return LossOut(losses={"actor": actor, "value": value}, metrics={"v": fwd_out[C.VALUES].mean()})


def _spec(value_head=True):
    return MultiRLModuleSpec.single(RLModuleSpec(DefaultRLModule, OBS, gym.spaces.Discrete(2), {"hidden": [8], "value_head": value_head}))


def _batch(n=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    return {C.OBS: torch.randn(n, 3, generator=g), C.ACTIONS: torch.randint(0, 2, (n,), generator=g)}


def test_gradient_isolation_actor_loss_moves_no_value_parameter():
    learner = CoupledLearner(config=Cfg(), module_spec=_spec()).build()
    m = learner.module[C.DEFAULT_MODULE_ID]
    v_before = [p.detach().clone() for p in m.value_parameters()]
    pi_before = [p.detach().clone() for p in m.policy_parameters()]
    learner.update(_batch())
    assert all(torch.equal(a, b) for a, b in zip(v_before, m.value_parameters()))
    assert any(not torch.equal(a, b) for a, b in zip(pi_before, m.policy_parameters()))


def test_shared_parameters_in_two_optimizers_are_refused():
    class Bad(CoupledLearner):
        def configure_optimizers_for_module(self, module_id, module):
            return {"actor": torch.optim.SGD(module.parameters(), lr=0.1), "value": torch.optim.SGD(module.value_parameters(), lr=0.1)}

    with pytest.raises(ValueError, match="exactly one optimizer"):
        Bad(config=Cfg(), module_spec=_spec()).build()


def test_loss_without_optimizer_is_a_clear_error():
    class Missing(CoupledLearner):
        def configure_optimizers_for_module(self, module_id, module):
            return {"actor": torch.optim.SGD(module.parameters(), lr=0.1)}

    learner = Missing(config=Cfg(), module_spec=_spec()).build()
    with pytest.raises(KeyError, match="'value'.*no optimizer"):
        learner.update(_batch())


class _Fixed:
    def __init__(self, batches):
        self.batches, self.i = batches, 0

    def next_batch(self):
        self.i += 1
        return self.batches[(self.i - 1) % len(self.batches)]


def test_run_updates_averages_metrics_and_counts():
    learner = CoupledLearner(config=Cfg(), module_spec=_spec()).build()
    ref = CoupledLearner(config=Cfg(), module_spec=_spec()).build()
    batches = [_batch(seed=s) for s in range(3)]
    out = learner.run_updates(_Fixed(batches), 3)
    vals = [ref.update(b)["losses/actor"].item() for b in batches]
    assert out["losses/actor"] == pytest.approx(np.mean(vals), rel=1e-5)
    assert out["learner/updates"] == 3.0


def test_a_metric_some_updates_report_is_averaged_over_those_updates():
    # e.g. TD3+BC's delayed actor: its loss exists only on the updates that step it
    class EveryOther(CoupledLearner):
        def compute_loss_for_module(self, module_id, module, batch, fwd_out):
            out = super().compute_loss_for_module(module_id, module, batch, fwd_out)
            if self.timestep % 2 == 0:
                return out
            return type(out)(losses=out.losses, metrics={**out.metrics, "extra/odd": torch.tensor(float(self.timestep))})

    learner = EveryOther(config=Cfg(), module_spec=_spec()).build()
    ref = CoupledLearner(config=Cfg(), module_spec=_spec()).build()
    batches = [_batch(seed=s) for s in range(5)]
    first = learner.run_updates(_Fixed(batches), 5)
    assert first["extra/odd"] == pytest.approx((1 + 3) / 2)  # updates 1 and 3 of 0..4
    vals = [ref.update(b)["losses/actor"].item() for b in batches]
    assert first["losses/actor"] == pytest.approx(np.mean(vals), rel=1e-5) and first["learner/updates"] == 5.0
    assert "perf/first_update_at" in first


def test_only_the_first_call_reports_when_the_first_update_finished():
    learner = CoupledLearner(config=Cfg(), module_spec=_spec()).build()
    batches = [_batch(seed=s) for s in range(3)]
    before = time.time()
    first = learner.run_updates(_Fixed(batches), 3)
    after = time.time()
    assert before < first["perf/first_update_at"] < after
    assert "perf/first_update_at" not in learner.run_updates(_Fixed(batches), 3)


def test_held_optimizers_are_not_stepped_and_the_rest_are():
    learner = CoupledLearner(config=Cfg(), module_spec=_spec()).build()
    ref = CoupledLearner(config=Cfg(), module_spec=_spec()).build()
    m = learner.module[C.DEFAULT_MODULE_ID]
    pi_before = [p.detach().clone() for p in m.policy_parameters()]
    batches = [_batch(seed=s) for s in range(3)]
    out = learner.run_updates(_Fixed(batches), 3, hold=("actor",))
    assert all(torch.equal(a, b) for a, b in zip(pi_before, m.policy_parameters()))
    assert out["learner/updates"] == 3.0 and "losses/actor" in out  # held terms are still reported
    learner.update(batches[0])  # released: the actor moves exactly as a fresh learner's first step
    ref.update(batches[0])
    ref_m = ref.module[C.DEFAULT_MODULE_ID]
    assert all(torch.equal(a, b) for a, b in zip(ref_m.policy_parameters(), m.policy_parameters()))


def test_grad_clip_reports_norm_and_state_round_trip_is_exact():
    class Clip(Cfg):
        grad_clip = 0.01

    a = CoupledLearner(config=Clip(), module_spec=_spec()).build()
    m = a.update(_batch())
    assert "learner/grad_norm/actor" in m
    state = a.get_state()
    b = CoupledLearner(config=Clip(), module_spec=_spec()).build()
    b.set_state(state)
    a.update(_batch(seed=5))
    b.update(_batch(seed=5))
    for (k, x), (_, y) in zip(a.module.state_dict().items(), b.module.state_dict().items()):
        assert torch.equal(x, y), k


def test_restored_optimizers_keep_this_configs_learning_rate_and_the_saved_moments():
    """A checkpoint's optimizer state brings Adam's moments and step counts, not its old learning rate: a job
    restored with another lr (``finetune --set config.actor_lr=...``) steps with the new one."""

    class AdamLearner(CoupledLearner):
        def configure_optimizers_for_module(self, module_id, module):
            return {"actor": torch.optim.Adam(list(module.policy_parameters()), lr=self.config.lr),
                    "value": torch.optim.Adam(list(module.value_parameters()), lr=self.config.lr)}

    class Slow(Cfg):
        lr = 0.001

    a = AdamLearner(config=Cfg(), module_spec=_spec()).build()
    a.update(_batch())
    state = copy.deepcopy(a.get_state())  # as read from disk: no tensor shared with ``a``
    b = AdamLearner(config=Slow(), module_spec=_spec()).build()
    b.set_state(state)
    for key, opt in b._optimizers.items():
        assert [g["lr"] for g in opt.param_groups] == [0.001], key
        saved = state["optimizers"][f"{key[0]}/{key[1]}"]["state"]
        for i, p in enumerate(opt.param_groups[0]["params"]):
            assert torch.equal(opt.state[p]["exp_avg"], saved[i]["exp_avg"])
    same = AdamLearner(config=Cfg(), module_spec=_spec()).build()
    same.set_state(state)  # the same config: the restored job continues exactly (as before)
    a.update(_batch(seed=5))
    same.update(_batch(seed=5))
    for (k, x), (_, y) in zip(a.module.state_dict().items(), same.module.state_dict().items()):
        assert torch.equal(x, y), k


def test_adam_steps_fused_and_an_unfused_state_restores_into_it():
    """Adam/AdamW take the fused step (one kernel per tensor); a setting the learner gave is kept; SGD takes the
    multi-tensor step. A state saved by an unfused Adam (older checkpoints) loads and the next steps match a learner
    that never stopped."""

    class Mixed(CoupledLearner):
        def configure_optimizers_for_module(self, module_id, module):
            return {"actor": torch.optim.Adam(list(module.policy_parameters()), lr=self.config.lr),
                    "value": torch.optim.AdamW(list(module.value_parameters()), lr=self.config.lr, foreach=False)}

    a = Mixed(config=Cfg(), module_spec=_spec()).build()
    actor, value = a.optimizer(C.DEFAULT_MODULE_ID, "actor"), a.optimizer(C.DEFAULT_MODULE_ID, "value")
    assert actor.param_groups[0]["fused"] is True and value.param_groups[0]["fused"] in (None, False)
    assert CoupledLearner(config=Cfg(), module_spec=_spec()).build() \
        .optimizer(C.DEFAULT_MODULE_ID, "actor").param_groups[0]["foreach"] is True  # SGD
    a.update(_batch())
    state = copy.deepcopy(a.get_state())
    for group in state["optimizers"][f"{C.DEFAULT_MODULE_ID}/actor"]["param_groups"]:
        group["fused"], group["foreach"] = None, True  # as an unfused optimizer saved it
    b = Mixed(config=Cfg(), module_spec=_spec()).build()
    b.set_state(state)
    assert b.optimizer(C.DEFAULT_MODULE_ID, "actor").param_groups[0]["fused"] is True  # this learner's setting
    for learner in (a, b):
        learner.update(_batch(seed=5))
    for (k, x), (_, y) in zip(a.module.state_dict().items(), b.module.state_dict().items()):
        assert torch.equal(x, y), k


class SeparableLearner(CoupledLearner):
    """Each term meets the other's network detached: one backward serves both."""

    separable_losses = True

    def compute_loss_for_module(self, module_id, module, batch, fwd_out):
        logp = fwd_out[C.ACTION_DIST].log_prob(batch[C.ACTIONS])
        actor = -(fwd_out[C.VALUES].detach() * logp).mean()
        value = fwd_out[C.VALUES].pow(2).mean()
        return LossOut(losses={"actor": actor, "value": value}, metrics={})


def _backwards(learner, batch):
    """The learner's update, counting the autograd backward calls it makes."""
    calls = []
    real = torch.autograd.grad

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    torch.autograd.grad = counting
    try:
        learner.update(batch)
    finally:
        torch.autograd.grad = real
    return len(calls)


def test_separable_terms_take_one_backward_and_the_same_gradients_as_one_per_term():
    class PerTerm(SeparableLearner):
        separable_losses = False

    joint = SeparableLearner(config=Cfg(), module_spec=_spec()).build()
    per_term = PerTerm(config=Cfg(), module_spec=_spec()).build()
    per_term.module.load_state_dict(joint.module.state_dict())
    # the first update also checks the declaration (one backward per term), later ones take one backward
    assert _backwards(joint, _batch(seed=0)) == 3 and _backwards(per_term, _batch(seed=0)) == 2
    for s in range(1, 4):
        assert _backwards(joint, _batch(seed=s)) == 1 and _backwards(per_term, _batch(seed=s)) == 2
    for (name, a), b in zip(joint.module.state_dict().items(), per_term.module.state_dict().values()):
        assert torch.equal(a, b), name


def test_a_declared_separable_loss_that_is_not_falls_back_to_a_backward_per_term():
    class Naive(CoupledLearner):  # the actor loss reads V(s) undetached: it reaches the value network
        separable_losses = True

    learner = Naive(config=Cfg(), module_spec=_spec()).build()
    m = learner.module[C.DEFAULT_MODULE_ID]
    v_before = [p.detach().clone() for p in m.value_parameters()]
    for s in range(3):
        learner.update(_batch(seed=s))
    assert all(torch.equal(a, b) for a, b in zip(v_before, m.value_parameters()))  # its value loss is 0·V
    assert _backwards(learner, _batch(seed=4)) == 2


@pytest.mark.parametrize("name", ["iql", "marwil"])
def test_iql_and_marwil_declare_separable_losses_and_train_as_with_a_backward_per_term(name):
    from offlinerl.algorithms.registry import get_algorithm
    from offlinerl.core.rl_module import MultiRLModuleSpec

    algo = get_algorithm(name)
    cfg = algo.config_cls.from_dict({"seed": 0, "model": {"hidden": [8]}})
    act = gym.spaces.Box(-1, 1, (2,), np.float32)
    spec = MultiRLModuleSpec.single(RLModuleSpec(algo.module_cls, OBS, act, cfg.module_config()))
    assert algo.learner_cls.separable_losses

    class PerTerm(algo.learner_cls):
        separable_losses = False

    g = torch.Generator().manual_seed(0)
    batches = [{C.OBS: torch.randn(16, 3, generator=g), C.ACTIONS: torch.rand(16, 2, generator=g) * 2 - 1,
                C.REWARDS: torch.randn(16, generator=g), C.NEXT_OBS: torch.randn(16, 3, generator=g),
                C.TERMINATEDS: torch.zeros(16), C.RETURNS_TO_GO: torch.randn(16, generator=g)} for _ in range(4)]
    learners = [cls(config=cfg, module_spec=spec).build() for cls in (algo.learner_cls, PerTerm)]
    learners[1].module.load_state_dict(learners[0].module.state_dict())
    for learner in learners:
        learner.run_updates(_Fixed(batches), 8)
    for (k, a), b in zip(learners[0].module.state_dict().items(), learners[1].module.state_dict().values()):
        assert torch.equal(a, b), k


def test_run_updates_flushes_subnormals_only_while_it_runs():
    if not torch.set_flush_denormal(False):
        pytest.skip("this CPU cannot flush subnormals")
    seen = []

    class Probe(CoupledLearner):
        def before_gradient_based_update(self, timestep):
            seen.append((torch.tensor([1e-39]) * 1.0).item())

    learner = Probe(config=Cfg(), module_spec=_spec()).build()
    learner.run_updates(_Fixed([_batch()]), 2)
    assert seen == [0.0, 0.0]  # flushed inside the update loop
    assert (torch.tensor([1e-39]) * 1.0).item() != 0.0  # and the default again after it
