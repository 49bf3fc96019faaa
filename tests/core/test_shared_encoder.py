"""A policy encoder shared by two modules: one object, one optimizer, one step per update on the summed loss."""

import copy

import gymnasium as gym
import numpy as np
import pytest
import torch

from offlinerl.algorithms.bc import BCConfig, BCLearner, bc_loss
from offlinerl.algorithms.cql import CQLConfig
from offlinerl.algorithms.cql.module import CQLRLModule
from offlinerl.algorithms.iql import IQLConfig, IQLLearner, IQLRLModule, iql_loss
from offlinerl.algorithms.td3bc.config import TD3BCConfig
from offlinerl.config_io import ConfigError
from offlinerl.core import columns as C
from offlinerl.core.default_module import DefaultRLModule
from offlinerl.core.param_owners import assign_parameters
from offlinerl.core.rl_module import MultiRLModuleSpec, RLModuleSpec

OBS = gym.spaces.Box(-1, 1, (3,), np.float32)
DISCRETE = gym.spaces.Discrete(3)
BOX = gym.spaces.Box(-1, 1, (2,), np.float32)
AGENTS = ("a0", "a1")
SHARED = ("pi_encoder",)


def _spec(module_class=DefaultRLModule, action_space=DISCRETE, model=None, shared=SHARED):
    model = {"hidden": [8, 8], **(model or {})}
    return MultiRLModuleSpec({a: RLModuleSpec(module_class, OBS, action_space, model) for a in AGENTS}, shared=shared)


def _batch(seed, action_space=DISCRETE, n=16):
    g = torch.Generator().manual_seed(seed)
    if isinstance(action_space, gym.spaces.Discrete):
        actions = torch.randint(0, action_space.n, (n,), generator=g)
    else:
        actions = torch.rand(n, 2, generator=g) * 1.8 - 0.9
    return {C.OBS: torch.rand(n, 3, generator=g) * 2 - 1, C.ACTIONS: actions,
            C.REWARDS: torch.randn(n, generator=g), C.NEXT_OBS: torch.rand(n, 3, generator=g) * 2 - 1,
            C.TERMINATEDS: torch.zeros(n)}


def _params(module):
    return {k: v.detach().clone() for k, v in module.named_parameters()}


# -- the module side --------------------------------------------------------------------------------

def test_modules_hold_one_encoder_object_and_their_own_heads():
    for inference_only in (False, True):
        multi = _spec().build(inference_only=inference_only)
        assert multi["a0"].pi_encoder is multi["a1"].pi_encoder
        assert multi["a0"].pi_head is not multi["a1"].pi_head
        state = multi.state_dict()
        for key in multi["a0"].pi_encoder.state_dict():
            assert torch.equal(state[f"rl_modules.a0.pi_encoder.{key}"], state[f"rl_modules.a1.pi_encoder.{key}"])
    independent = _spec(shared=()).build()
    # the shared encoder's 2 layers (weights and biases) are counted once: 4 tensors fewer than independent modules
    assert len(list(independent.parameters())) - len(list(multi.parameters())) == 4


def test_a_state_dict_with_two_different_encoders_is_refused():
    independent = _spec(shared=()).build().state_dict()  # each module its own encoder, initialised differently
    shared = _spec().build()
    with pytest.raises(RuntimeError, match=r"different values for 'pi_encoder.0.weight' under modules 'a0' and 'a1'"):
        shared.load_state_dict(independent)
    # a1's encoder entries replaced by a0's: consistent, so it loads
    consistent = {k: (independent[k.replace(".a1.", ".a0.")] if ".a1.pi_encoder" in k else v) for k, v in independent.items()}
    shared.load_state_dict(consistent)
    assert torch.equal(shared["a1"].pi_encoder[0].weight, independent["rl_modules.a0.pi_encoder.0.weight"])


def test_a_module_without_the_encoder_cannot_share_it():
    with pytest.raises(ValueError, match=r"cannot share 'pi_encoder': module 'a0' \(CQLRLModule\) has no submodule"):
        _spec(CQLRLModule).build()  # discrete CQL acts greedily on Q: no policy, no policy encoder


def test_config_refuses_sharing_for_one_module_or_an_algorithm_that_cannot():
    with pytest.raises(ConfigError, match="share_encoder: needs a multi-agent dataset"):
        BCConfig(share_encoder=True).module_spec(DefaultRLModule, OBS, DISCRETE, [C.DEFAULT_MODULE_ID])
    with pytest.raises(ConfigError, match="share_encoder: TD3BCConfig declares no encoder"):
        TD3BCConfig(share_encoder=True)
    spec = BCConfig(share_encoder=True).module_spec(DefaultRLModule, OBS, DISCRETE, AGENTS)
    assert spec.shared == SHARED and BCConfig().module_spec(DefaultRLModule, OBS, DISCRETE, AGENTS).shared == ()
    assert CQLConfig(share_encoder=True).SHARED_ENCODERS == SHARED == IQLConfig.SHARED_ENCODERS
    assert BCConfig.from_dict({"share_encoder": True}).to_dict()["share_encoder"] is True


# -- the learner side: one optimizer, one step, the summed gradient ---------------------------------------------

def _expected_after_one_update(learner, batches, loss_fn, lr, roles, tau=None):
    """The module after one update computed by hand: the sum of every module's losses, one backward, and one fresh
    Adam per role over the (unique) parameters of that role, stepped once (then ``tau``: each module's Polyak
    target update)."""
    ref = copy.deepcopy(learner.module)  # keeps the shared encoder one object
    assert ref["a0"].pi_encoder is ref["a1"].pi_encoder
    total = {role: 0.0 for role in roles}
    for mid, batch in batches.items():
        out = loss_fn(ref[mid], batch)
        for role in roles:
            total[role] = total[role] + out.losses[role]
    for role in roles:
        params = list(dict.fromkeys(p for mid in AGENTS for p in roles[role](ref[mid])))  # unique, by identity
        opt = torch.optim.Adam(params, lr=lr[role])
        grads = torch.autograd.grad(total[role], params, retain_graph=True, allow_unused=True)
        for p, g in zip(params, grads):
            p.grad = torch.zeros_like(p) if g is None else g
        opt.step()
    if tau is not None:
        for mid in AGENTS:
            ref[mid].sync_target_networks(tau)
    return ref


def test_bc_one_update_is_one_adam_step_of_the_encoder_on_the_summed_gradient():
    cfg = BCConfig(lr=0.01)
    learner = BCLearner(config=cfg, module_spec=_spec()).build()
    m = learner.module
    batches = {"a0": _batch(0), "a1": _batch(1)}
    before = {k: v.clone() for k, v in _params(m).items()}
    expected = _expected_after_one_update(
        learner, batches, lambda mod, b: bc_loss(b, mod.forward_train(b), cfg), {"actor": cfg.lr},
        {"actor": lambda mod: list(mod.policy_parameters())})
    learner.update(batches)
    for name, p in m.named_parameters():
        torch.testing.assert_close(p, dict(expected.named_parameters())[name], rtol=0, atol=1e-7)
    # one Adam step moves each weight by lr * |g| / (|g| + eps) <= lr; two optimizers stepping it would move it 2 lr
    moved = (m["a0"].pi_encoder[0].weight - before["rl_modules.a0.pi_encoder.0.weight"]).abs()
    assert moved.max() <= cfg.lr * (1 + 1e-5) and moved.max() > 0.9 * cfg.lr
    # exactly one optimizer holds the encoder: a0's "actor"; a1's holds only a1's head
    enc = list(m["a0"].pi_encoder.parameters())
    assert [id(p) for p in learner.optimizer("a0", "actor").param_groups[0]["params"]][:4] == [id(p) for p in enc]
    a1_params = {id(p) for g in learner.optimizer("a1", "actor").param_groups for p in g["params"]}
    assert a1_params == {id(p) for p in m["a1"].pi_head.parameters()}


def test_iql_one_update_steps_the_shared_encoder_once_and_each_critic_on_its_own_loss():
    cfg = IQLConfig.from_dict({"actor_lr": 0.01, "critic_lr": 0.02, "value_lr": 0.03, "model": {"hidden": [8, 8]},
                               "share_encoder": True})
    learner = IQLLearner(config=cfg, module_spec=cfg.module_spec(IQLRLModule, OBS, BOX, AGENTS)).build()
    m = learner.module
    assert m["a0"].pi_encoder is m["a1"].pi_encoder and m["a0"].q is not m["a1"].q and m["a0"].v is not m["a1"].v
    batches = {"a0": _batch(0, BOX), "a1": _batch(1, BOX)}
    roles = {"actor": lambda mod: list(mod.policy_parameters()), "critic": lambda mod: list(mod.critic_parameters()),
             "value": lambda mod: list(mod.value_parameters())}
    expected = _expected_after_one_update(
        learner, batches, lambda mod, b: iql_loss(b, mod, cfg),
        {"actor": cfg.actor_lr, "critic": cfg.critic_lr, "value": cfg.value_lr}, roles, tau=cfg.tau)
    learner.update(batches)
    want = dict(expected.named_parameters())
    for name, p in m.named_parameters():
        torch.testing.assert_close(p, want[name], rtol=0, atol=1e-7)


def test_gradient_clipping_sees_the_summed_encoder_gradient_once():
    cfg = BCConfig(lr=0.01, grad_clip=1e-3)
    learner = BCLearner(config=cfg, module_spec=_spec()).build()
    batches = {"a0": _batch(0), "a1": _batch(1)}
    ref = copy.deepcopy(learner.module)
    losses = [bc_loss(b, ref[mid].forward_train(b), cfg).losses["actor"] for mid, b in batches.items()]
    enc, head0, head1 = (list(ref["a0"].pi_encoder.parameters()), list(ref["a0"].pi_head.parameters()),
                         list(ref["a1"].pi_head.parameters()))
    g_enc = torch.autograd.grad(losses[0] + losses[1], enc, retain_graph=True)
    g0, g1 = torch.autograd.grad(losses[0], head0, retain_graph=True), torch.autograd.grad(losses[1], head1)
    norm = lambda gs: torch.sqrt(sum((g ** 2).sum() for g in gs))  # noqa: E731
    metrics = learner.update(batches)
    torch.testing.assert_close(metrics["a0/learner/grad_norm/actor"], norm([*g_enc, *g0]), rtol=1e-6, atol=0)
    torch.testing.assert_close(metrics["a1/learner/grad_norm/actor"], norm(g1), rtol=1e-6, atol=0)
    assert float(norm(g1)) > cfg.grad_clip  # clipped: both optimizers moved their weights by one clipped step


# -- the guard: a parameter in two optimizers --------------------------------------------------------------

def test_the_shared_encoder_in_a_second_optimizer_is_refused_by_name():
    class EncoderTwice(BCLearner):
        def configure_optimizers_for_module(self, module_id, module):
            return {"actor": torch.optim.Adam(module.policy_parameters()),
                    "encoder": torch.optim.Adam(module.pi_encoder.parameters())}

    with pytest.raises(ValueError, match=r"parameter rl_modules\.a0\.pi_encoder\.0\.weight is in optimizers "
                                         r"\('a0', 'actor'\) and \('a0', 'encoder'\).*exactly one optimizer"):
        EncoderTwice(config=BCConfig(), module_spec=_spec()).build()


def test_the_shared_encoder_in_differently_named_optimizers_is_refused():
    class Renamed(BCLearner):
        def configure_optimizers_for_module(self, module_id, module):
            return {"actor" if module_id == "a0" else "policy": torch.optim.Adam(module.policy_parameters())}

    with pytest.raises(ValueError, match=r"pi_encoder\.0\.weight is in optimizers \('a0', 'actor'\) and "
                                         r"\('a1', 'policy'\)"):
        Renamed(config=BCConfig(), module_spec=_spec()).build()


def test_one_optimizer_object_for_two_modules_is_refused():
    class OneForAll(BCLearner):
        def configure_optimizers_for_module(self, module_id, module):
            if not hasattr(self, "_one"):
                self._one = torch.optim.Adam(self.module.parameters())
            return {"actor": self._one}

    with pytest.raises(ValueError, match=r"optimizers \('a0', 'actor'\) and \('a1', 'actor'\) are one optimizer object"):
        OneForAll(config=BCConfig(), module_spec=_spec()).build()


def test_modules_that_share_nothing_may_not_share_a_parameter():
    spec = _spec(shared=())
    multi = spec.build()
    opts = {("a0", "actor"): torch.optim.Adam(multi["a0"].parameters()),
            ("a1", "actor"): torch.optim.Adam([*multi["a1"].parameters(), multi["a0"].pi_head.bias])}
    with pytest.raises(ValueError, match=r"parameter rl_modules\.a0\.pi_head\.bias is in optimizers"):
        assign_parameters(opts, multi)


# -- DDP: the summed encoder gradient is averaged over learners once -----------------------------------------

class _FixedSpec:
    """A picklable batch source: the same two-agent batch every update."""

    def __init__(self, batches):
        self.batches = batches

    def build(self, device):
        return self

    def next_batch(self):
        return self.batches

    def get_state(self):
        return {}

    def set_state(self, state):
        pass


def test_two_ddp_learners_with_a_shared_encoder_match_one_learner(ray_session):
    from offlinerl.core.learner_group import LearnerGroup

    cfg = BCConfig.from_dict({"lr": 1e-2, "grad_clip": 1.0, "model": {"hidden": [8, 8]}, "num_cpus_per_learner": 0.5,
                              "share_encoder": True})
    spec = cfg.module_spec(DefaultRLModule, OBS, DISCRETE, AGENTS)
    source = _FixedSpec({"a0": _batch(0), "a1": _batch(1)})
    single = LearnerGroup(cfg.replace(num_learners=0), BCLearner, spec)
    group = LearnerGroup(cfg.replace(num_learners=2), BCLearner, spec)
    try:
        single.set_sources([source])
        group.set_sources([source, source])
        single.update(3)
        group.update(3)
        w_a, w_b = group.get_all_weights()
        w_single = single.get_weights()
        for k in w_a:
            assert torch.equal(w_a[k], w_b[k]), k  # replicas identical, bit for bit
            torch.testing.assert_close(w_a[k], w_single[k], rtol=1e-5, atol=1e-6)
        assert torch.equal(w_a["rl_modules.a0.pi_encoder.0.weight"], w_a["rl_modules.a1.pi_encoder.0.weight"])
    finally:
        group.shutdown()
