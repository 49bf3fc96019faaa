"""TD3+BC: loss terms against hand-computed values (a tiny module with fixed weights), gradient
isolation and the delayed actor/target schedule on the real Learner and module (no Ray)."""

import copy

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from offlinerl.algorithms.td3bc import TD3BCConfig, TD3BCLearner, TD3BCRLModule
from offlinerl.algorithms.td3bc import losses as L
from offlinerl.core import columns as C
from offlinerl.core.rl_module import MultiRLModuleSpec, RLModuleSpec

CFG = TD3BCConfig(gamma=0.9, alpha=2.5, policy_noise=0.2, noise_clip=0.5)


class Tiny(nn.Module):
    """obs and actions 1-d, bounds [-2, 2] (half-range h = 2). π(s) = p·s, π̄(s) = p̄·s;
    Q_e(s, a) = c_e·s + d_e·a, Q̄_e likewise with c̄, d̄ (no tanh: the values stay inside the bounds)."""

    def __init__(self, p=0.5, target_p=0.25, c=(1.0, 0.0), d=(1.0, 2.0), target_c=(1.0, 2.0), target_d=(1.0, -1.0)):
        super().__init__()
        self.p = nn.Parameter(torch.tensor(p))
        self.c, self.d = nn.Parameter(torch.tensor(c)), nn.Parameter(torch.tensor(d))
        self.target_p = nn.Parameter(torch.tensor(target_p), requires_grad=False)
        self.target_c = nn.Parameter(torch.tensor(target_c), requires_grad=False)
        self.target_d = nn.Parameter(torch.tensor(target_d), requires_grad=False)
        for name, value in (("action_low", -2.0), ("action_high", 2.0), ("action_center", 0.0),
                            ("action_scale", 2.0)):
            self.register_buffer(name, torch.tensor([value]))

    def actions(self, obs):
        return self.p * obs

    def target_actions(self, obs):
        return self.target_p * obs

    def q_values(self, obs, actions):
        return self.c.view(-1, 1) * obs[:, 0] + self.d.view(-1, 1) * actions[:, 0]  # [E,B]

    def target_q_values(self, obs, actions):
        return self.target_c.view(-1, 1) * obs[:, 0] + self.target_d.view(-1, 1) * actions[:, 0]


def _batch():
    # step 1 terminated: no bootstrap
    return {"obs": torch.tensor([[1.0], [2.0]]), "actions": torch.tensor([[0.5], [-1.0]]),
            "next_obs": torch.tensor([[2.0], [-1.0]]), "rewards": torch.tensor([1.0, 2.0]),
            "terminateds": torch.tensor([0.0, 1.0])}


def test_target_smoothing_noise_is_scaled_clipped_and_the_action_kept_in_bounds():
    out = L.smoothed_target_actions(torch.tensor([[0.5], [1.9], [-1.0]]), torch.tensor([[1.0], [5.0], [-5.0]]),
                                    0.2, 0.5, torch.tensor([-2.0]), torch.tensor([2.0]), torch.tensor([2.0]))
    # ε = clip(0.2·n, ±0.5)·2 = [0.4, 1.0, -1.0]; π̄ + ε = [0.9, 2.9, -2.0] -> clipped to [-2, 2]
    torch.testing.assert_close(out, torch.tensor([[0.9], [2.0], [-2.0]]))


def test_critic_loss_by_hand_twin_min_smoothing_and_terminal_masking():
    out = L.critic_loss(_batch(), Tiny(), CFG, noise=torch.tensor([[1.0], [-3.0]]))
    # π̄(s') = [0.5, -0.25]; ε = [0.2, -0.5]·2 = [0.4, -1.0]; a' = [0.9, -1.25]
    # Q̄_0(s', a') = s' + a' = [2.9, -2.25]; Q̄_1 = 2s' − a' = [3.1, -0.75]; min = [2.9, -2.25]
    # y = [1 + 0.9·2.9, 2 (terminated)] = [3.61, 2]; Q_0(s, a) = s + a = [1.5, 1]; Q_1 = 2a = [1, -2]
    expected = ((1.5 - 3.61) ** 2 + (1 - 2) ** 2) / 2 + ((1 - 3.61) ** 2 + (-2 - 2) ** 2) / 2
    assert out.losses["critic"].item() == pytest.approx(expected)
    assert out.metrics["td3bc/target_mean"].item() == pytest.approx((3.61 + 2) / 2)
    assert out.metrics["td3bc/q_data_mean"].item() == pytest.approx((1.5 + 1 + 1 - 2) / 4)
    scaled = L.critic_loss(_batch(), Tiny(), CFG.replace(reward_scale=2.0), noise=torch.tensor([[1.0], [-3.0]]))
    y = (2 + 0.9 * 2.9, 4.0)  # y = [2·1 + 0.9·2.9, 2·2]
    assert scaled.losses["critic"].item() == pytest.approx(((1.5 - y[0]) ** 2 + (1 - y[1]) ** 2) / 2
                                                          + ((1 - y[0]) ** 2 + (-2 - y[1]) ** 2) / 2)


def test_actor_loss_by_hand_lambda_normalisation_and_bc_term():
    batch = {"obs": torch.tensor([[1.0], [-2.0]]), "actions": torch.tensor([[0.5], [0.0]])}
    module = Tiny()
    out = L.actor_loss(batch, module, CFG)
    # π(s) = [0.5, -1]; Q_1(s, π(s)) = s + π = [1.5, -3]: mean|Q_1| = 2.25, λ = 2.5 / 2.25, mean Q_1 = -0.75
    # BC in half-ranges: mean(((π − a) / 2)²) = (0 + 0.25) / 2 = 0.125
    lam = 2.5 / 2.25
    assert out.metrics["td3bc/lambda"].item() == pytest.approx(lam)
    assert out.metrics["td3bc/q_mean"].item() == pytest.approx(-0.75)
    assert out.metrics["td3bc/bc_mse"].item() == pytest.approx(0.125)
    assert out.losses["actor"].item() == pytest.approx(lam * 0.75 + 0.125)
    assert out.metrics["td3bc/actor_at_bounds"].item() == 0.0 and out.metrics["td3bc/data_at_bounds"].item() == 0.0
    # λ is a constant: d/dp = −λ·mean(d_0·s) + mean(2(p·s − a)·s / 4) = λ·0.5 + 0.5
    (grad,) = torch.autograd.grad(out.losses["actor"], [module.p])
    assert grad.item() == pytest.approx(lam * 0.5 + 0.5)
    no_q = L.actor_loss(batch, Tiny(), CFG.replace(alpha=0.0))  # α = 0: pure behaviour cloning
    assert no_q.losses["actor"].item() == pytest.approx(0.125)


def test_each_loss_reaches_only_what_it_should():
    module = Tiny()
    params = {"p": module.p, "c": module.c, "d": module.d}
    critic = L.critic_loss(_batch(), module, CFG, noise=torch.zeros(2, 1)).losses["critic"]
    grads = dict(zip(params, torch.autograd.grad(critic, list(params.values()), allow_unused=True)))
    assert grads["p"] is None  # the target action comes from the target actor, without gradient
    assert float(grads["c"].abs().sum()) > 0 and float(grads["d"].abs().sum()) > 0
    actor = L.actor_loss(_batch(), module, CFG).losses["actor"]
    grads = dict(zip(params, torch.autograd.grad(actor, list(params.values()), allow_unused=True)))
    assert float(grads["p"].abs()) > 0
    # the actor loss does reach Q_1's weights: the Learner differentiates it w.r.t. the actor's alone (below)
    assert float(grads["d"].abs().sum()) > 0


# -- the real module and Learner ----------------------------------------------------------------
OBS = gym.spaces.Box(-1, 1, (3,), np.float32)
ACT = gym.spaces.Box(np.array([-2.0, 0.0], np.float32), np.array([2.0, 1.0], np.float32))


def _learner(**kw):
    cfg = TD3BCConfig.from_dict({"model": {"hidden": [16, 16]}, "seed": 3, "tau": 0.1, **kw})
    spec = MultiRLModuleSpec.single(RLModuleSpec(TD3BCRLModule, OBS, ACT, cfg.module_config()))
    return TD3BCLearner(config=cfg, module_spec=spec).build(), spec


def _batch_np(n=32, seed=0):
    rng = np.random.default_rng(seed)
    return {C.OBS: torch.as_tensor(rng.normal(size=(n, 3)), dtype=torch.float32),
            C.NEXT_OBS: torch.as_tensor(rng.normal(size=(n, 3)), dtype=torch.float32),
            C.ACTIONS: torch.as_tensor(rng.uniform(ACT.low, ACT.high, size=(n, 2)), dtype=torch.float32),
            C.REWARDS: torch.as_tensor(rng.normal(size=n), dtype=torch.float32),
            C.TERMINATEDS: torch.as_tensor(rng.random(n) < 0.2, dtype=torch.float32)}


def _params(module, names):
    return {k: v.detach().clone() for k, v in module.state_dict().items() if k.split(".")[0] in names}


def test_delayed_updates_the_actor_and_targets_move_only_every_policy_freq_updates():
    learner, _ = _learner(policy_freq=3)
    module = learner.module["default_policy"]
    actor_names, target_names = {"pi_encoder", "pi_head"}, {"target_pi_encoder", "target_pi_head", "target_q"}
    for i in range(6):
        before = {"actor": _params(module, actor_names), "target": _params(module, target_names),
                  "critic": _params(module, {"q"})}
        metrics = learner.update(_batch_np(seed=i))
        # the actor's loss is computed (and reported) only on the updates that step it: no forward pass is spent
        assert ("losses/actor" in metrics) == (i % 3 == 2) and np.isfinite(metrics["losses/critic"].item())
        moved = {g: any(not torch.equal(v, module.state_dict()[k]) for k, v in before[g].items()) for g in before}
        assert moved == {"actor": i % 3 == 2, "target": i % 3 == 2, "critic": True}, i
        actor_opt = learner.optimizer("default_policy", "actor")
        steps = {int(s["step"]) for s in actor_opt.state.values()}
        assert steps == ({(i + 1) // 3} if i >= 2 else set()), i  # skipped, not a zero-gradient Adam step


def test_an_actor_update_equals_one_adam_step_per_loss_on_its_own_parameters_then_polyak():
    """Update 1 (policy_freq 2): critic and actor each step on the gradient of their own loss alone,
    both taken before any weight moves; then every target <- 0.9 target + 0.1 online."""
    learner, _ = _learner()
    learner.update(_batch_np(seed=0))  # update 0: critic only
    module = learner.module["default_policy"]
    twin = copy.deepcopy(module)
    by_id = dict(zip((id(p) for p in module.parameters()), twin.parameters()))
    opts = {}
    for (_, name), opt in learner._optimizers.items():
        opts[name] = torch.optim.Adam([by_id[id(p)] for p in learner._params[("default_policy", name)]])
        opts[name].load_state_dict(copy.deepcopy(opt.state_dict()))  # same rates and moments, not shared
    batch = _batch_np(seed=1)
    rng = learner.generator.get_state()  # the target smoothing noise: the learner's own generator
    metrics = learner.update(batch)
    learner.generator.set_state(rng)
    learner.timestep = 1  # the loss as update 1 saw it
    draws = learner.random_draws("default_policy", batch)
    out = learner.compute_loss_for_module("default_policy", twin, {**batch, **draws}, {})
    learner.timestep = 2
    assert set(out.losses) == {"critic", "actor"} and metrics["losses/actor"] == out.losses["actor"].detach()
    grads = {n: torch.autograd.grad(out.losses[n], opts[n].param_groups[0]["params"], retain_graph=True)
             for n in out.losses}
    targets = [p.clone() for p in twin.state_dict().values()]
    for n, gs in grads.items():
        for p, g in zip(opts[n].param_groups[0]["params"], gs):
            p.grad = g
        opts[n].step()
    twin.sync_target_networks(0.1)
    for (k, a), b in zip(module.state_dict().items(), twin.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7, msg=k)
    online = dict(zip(twin.state_dict(), targets))
    for k, v in twin.state_dict().items():
        if k.startswith("target_"):
            src = twin.state_dict()[k.replace("target_", "", 1)]
            torch.testing.assert_close(v, 0.9 * online[k] + 0.1 * src)
    assert all(not p.requires_grad for n, p in module.named_parameters() if n.startswith("target_"))


def test_module_acts_deterministically_in_bounds_and_the_inference_view_has_only_the_actor():
    _, spec = _learner()
    full, lean = spec.build()["default_policy"], spec.build(inference_only=True)["default_policy"]
    assert {k.split(".")[0] for k in lean.state_dict()} == {"pi_encoder", "pi_head"}
    lean.load_state_dict(full.state_dict())
    obs = torch.randn(64, 3) * 10
    a = lean.forward_inference({C.OBS: obs})[C.ACTIONS]
    assert torch.equal(a, full.forward_inference({C.OBS: obs})[C.ACTIONS])
    assert torch.equal(a, lean.forward_inference({C.OBS: obs})[C.ACTIONS])
    low, high = torch.as_tensor(ACT.low), torch.as_tensor(ACT.high)
    explore = lean.forward_exploration({C.OBS: obs})[C.ACTIONS]
    assert not torch.equal(explore, a)
    for x in (a, explore):
        assert ((x >= low) & (x <= high)).all()


def test_discrete_actions_and_bad_fields_are_refused_with_the_name():
    with pytest.raises(TypeError, match="continuous actions"):
        TD3BCRLModule(OBS, gym.spaces.Discrete(3), {})
    with pytest.raises(ValueError, match="continuous actions.*Discrete"):
        TD3BCConfig().learner_connectors(OBS, gym.spaces.Discrete(3))
    for field, value in (("policy_freq", 0), ("tau", 0.0), ("alpha", -1.0), ("noise_clip", -0.1), ("actor_lr", 0.0)):
        with pytest.raises(ValueError, match=field):
            TD3BCConfig(**{field: value})
