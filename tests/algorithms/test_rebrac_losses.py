"""ReBRAC: the next-action connector and the loss terms against hand-computed values (a tiny module with
fixed weights), gradient isolation, the real module's networks and the config's checks (no Ray)."""

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from offlinerl.algorithms.rebrac import ReBRACConfig, ReBRACLearner, ReBRACRLModule
from offlinerl.algorithms.rebrac import losses as L
from offlinerl.config_io import ConfigError
from offlinerl.connectors import AddNextActions, AddTransitions, ConnectorPipeline, EpisodeColumns
from offlinerl.core import columns as C
from offlinerl.core.rl_module import MultiRLModuleSpec, RLModuleSpec
from offlinerl.episodes import SingleAgentEpisode, episodes_to_table

CFG = ReBRACConfig(gamma=0.9, actor_bc_coef=0.5, critic_bc_coef=0.5, policy_noise=0.2, noise_clip=0.5)


# -- the data's next action -----------------------------------------------------------------------
def test_next_actions_come_from_the_same_row_and_a_rows_last_step_is_masked():
    box = gym.spaces.Box(-5, 5, (1,), np.float32)
    episodes = [SingleAgentEpisode("a", obs=np.zeros((4, 1), np.float32), actions=np.array([[1.0], [2.0], [3.0]]),
                                   rewards=[0.0] * 3, truncated=True),
                SingleAgentEpisode("b", obs=np.zeros((1, 1), np.float32), actions=np.zeros((0, 1)), rewards=[]),
                SingleAgentEpisode("c", obs=np.zeros((3, 1), np.float32), actions=np.array([[4.0], [5.0]]),
                                   rewards=[0.0] * 2, terminated=True)]
    ep = EpisodeColumns.from_arrow(episodes_to_table(episodes, box, box), box, box)
    b = ConnectorPipeline([AddTransitions(), AddNextActions()])({}, ep)
    # rows a (3 steps), b (empty), c (2 steps): the last step of a row repeats its own action, masked
    np.testing.assert_array_equal(b[C.NEXT_ACTIONS], [[2.0], [3.0], [3.0], [5.0], [5.0]])
    np.testing.assert_array_equal(b[C.HAS_NEXT_ACTIONS], [1, 1, 0, 1, 0])
    assert b[C.NEXT_ACTIONS].dtype == np.float32 and b[C.HAS_NEXT_ACTIONS].dtype == np.float32


# -- the losses, by hand ---------------------------------------------------------------------------
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
    # row 1 terminated (no bootstrap); row 2 ends its row truncated: no data next action (masked)
    return {C.OBS: torch.tensor([[1.0], [2.0], [0.0]]), C.ACTIONS: torch.tensor([[0.5], [-1.0], [1.0]]),
            C.NEXT_OBS: torch.tensor([[2.0], [-1.0], [1.0]]), C.REWARDS: torch.tensor([1.0, 2.0, 0.0]),
            C.TERMINATEDS: torch.tensor([0.0, 1.0, 0.0]), C.NEXT_ACTIONS: torch.tensor([[1.0], [0.0], [-2.0]]),
            C.HAS_NEXT_ACTIONS: torch.tensor([1.0, 1.0, 0.0])}


NOISE = torch.tensor([[1.0], [-3.0], [0.0]])


def test_bc_penalty_sums_squared_half_ranges_over_action_dimensions():
    out = L.bc_penalty(torch.tensor([[1.0, 0.5], [0.0, 0.0]]), torch.tensor([[0.0, 0.0], [-2.0, 0.5]]),
                       torch.tensor([2.0, 0.5]))
    torch.testing.assert_close(out, torch.tensor([(1 / 2) ** 2 + (0.5 / 0.5) ** 2, (2 / 2) ** 2 + (0.5 / 0.5) ** 2]))


def test_critic_loss_by_hand_penalised_twin_min_target_masking_and_terminals():
    out = L.critic_loss(_batch(), Tiny(), CFG, noise=NOISE)
    # π̄(s') = [0.5, -0.25, 0.25]; ε = clip(0.2·n, ±0.5)·2 = [0.4, -1, 0]; a' = [0.9, -1.25, 0.25]
    # Q̄_0(s', a') = s' + a' = [2.9, -2.25, 1.25]; Q̄_1 = 2s' − a' = [3.1, -0.75, 1.75]; min = [2.9, -2.25, 1.25]
    # penalty ((a' − a'_data)/2)² · mask = [0.0025, 0.390625, 0 (masked)]; β2 = 0.5
    # y = [1 + 0.9·(2.9 − 0.5·0.0025), 2 (terminated), 0 + 0.9·1.25]
    y = (1 + 0.9 * (2.9 - 0.5 * 0.0025), 2.0, 0.9 * 1.25)
    q0, q1 = (1.5, 1.0, 1.0), (1.0, -2.0, 2.0)  # Q_0(s, a) = s + a, Q_1 = 2a
    expected = sum((q - t) ** 2 for q, t in zip(q0, y)) / 3 + sum((q - t) ** 2 for q, t in zip(q1, y)) / 3
    assert out.losses["critic"].item() == pytest.approx(expected)
    assert out.metrics["rebrac/target_mean"].item() == pytest.approx(sum(y) / 3)
    assert out.metrics["rebrac/critic_penalty"].item() == pytest.approx((0.0025 + 0.390625) / 3)
    assert out.metrics["rebrac/q_data_mean"].item() == pytest.approx((sum(q0) + sum(q1)) / 6)
    unpenalised = L.critic_loss(_batch(), Tiny(), CFG.replace(critic_bc_coef=0.0), noise=NOISE)
    y0 = (1 + 0.9 * 2.9, 2.0, 0.9 * 1.25)  # β2 = 0: TD3+BC's target
    assert unpenalised.losses["critic"].item() == pytest.approx(
        sum((q - t) ** 2 for q, t in zip(q0, y0)) / 3 + sum((q - t) ** 2 for q, t in zip(q1, y0)) / 3)


def test_actor_loss_by_hand_min_over_critics_lambda_and_bc_weight():
    batch = {C.OBS: torch.tensor([[1.0], [-2.0]]), C.ACTIONS: torch.tensor([[0.5], [0.0]])}
    module = Tiny()
    out = L.actor_loss(batch, module, CFG)
    # π(s) = [0.5, -1]; Q_0(s, π) = s + π = [1.5, -3], Q_1 = 2π = [1, -2]: min = [1, -3], λ = 1 / 2
    # BC ((π − a)/2)² = [0, 0.25]; actor = mean(0.5·[0, 0.25] − 0.5·[1, -3]) = mean([-0.5, 1.625])
    assert out.metrics["rebrac/lambda"].item() == pytest.approx(0.5)
    assert out.metrics["rebrac/q_mean"].item() == pytest.approx(-1.0)
    assert out.metrics["rebrac/bc_penalty"].item() == pytest.approx(0.125)
    assert out.losses["actor"].item() == pytest.approx(0.5625)
    assert out.metrics["rebrac/actor_at_bounds"].item() == 0.0 and out.metrics["rebrac/data_at_bounds"].item() == 0.0
    at_bound = L.actor_loss({C.OBS: torch.tensor([[4.0], [1.0]]), C.ACTIONS: torch.tensor([[-2.0], [0.0]])}, Tiny(), CFG)
    assert at_bound.metrics["rebrac/actor_at_bounds"].item() == 0.5  # π = [2, 0.5]: the first at the upper bound
    assert at_bound.metrics["rebrac/data_at_bounds"].item() == 0.5
    # λ is a constant: d/dp = mean(0.5·(p·s − a)·s/2 − 0.5·dQ_min/dp) = mean(0.5·[0, 1] − 0.5·[2, -2]) = 0.25
    (grad,) = torch.autograd.grad(out.losses["actor"], [module.p])
    assert grad.item() == pytest.approx(0.25)
    raw = L.actor_loss(batch, Tiny(), CFG.replace(normalize_q=False))  # λ = 1
    assert raw.losses["actor"].item() == pytest.approx((0.5 * 0.0 - 1.0 + 0.5 * 0.25 + 3.0) / 2)
    assert L.actor_loss(batch, Tiny(), CFG.replace(actor_bc_coef=0.0)).losses["actor"].item() == pytest.approx(0.5)


def test_each_loss_reaches_only_what_it_should():
    module = Tiny()
    params = {"p": module.p, "c": module.c, "d": module.d}
    critic = L.critic_loss(_batch(), module, CFG, noise=torch.zeros(3, 1)).losses["critic"]
    grads = dict(zip(params, torch.autograd.grad(critic, list(params.values()), allow_unused=True)))
    assert grads["p"] is None  # the target action and its penalty come from the target actor, without gradient
    assert float(grads["c"].abs().sum()) > 0 and float(grads["d"].abs().sum()) > 0
    actor = L.actor_loss(_batch(), module, CFG).losses["actor"]
    grads = dict(zip(params, torch.autograd.grad(actor, list(params.values()), allow_unused=True)))
    assert float(grads["p"].abs()) > 0  # (it reaches the critics too: the Learner steps the actor's alone)


# -- the real module, Learner and config --------------------------------------------------------------
OBS = gym.spaces.Box(-1, 1, (3,), np.float32)
ACT = gym.spaces.Box(np.array([-2.0, 0.0], np.float32), np.array([2.0, 1.0], np.float32))


def _spec(**kw):
    cfg = ReBRACConfig.from_dict({"model": {"hidden": [16, 16, 16]}, "seed": 3, "tau": 0.1, **kw})
    return cfg, MultiRLModuleSpec.single(RLModuleSpec(ReBRACRLModule, OBS, ACT, cfg.module_config()))


def _batch_np(n=32, seed=0):
    rng = np.random.default_rng(seed)
    f = lambda x: torch.as_tensor(x, dtype=torch.float32)  # noqa: E731
    return {C.OBS: f(rng.normal(size=(n, 3))), C.NEXT_OBS: f(rng.normal(size=(n, 3))),
            C.ACTIONS: f(rng.uniform(ACT.low, ACT.high, size=(n, 2))),
            C.NEXT_ACTIONS: f(rng.uniform(ACT.low, ACT.high, size=(n, 2))), C.REWARDS: f(rng.normal(size=n)),
            C.TERMINATEDS: f(rng.random(n) < 0.2), C.HAS_NEXT_ACTIONS: f(rng.random(n) > 0.1)}


def test_layer_norm_where_configured_and_the_inference_view_has_only_the_actor():
    _, spec = _spec()
    full, lean = spec.build()["default_policy"], spec.build(inference_only=True)["default_policy"]
    kinds = lambda net: [type(m).__name__ for m in net.modules() if not isinstance(m, nn.Sequential)]  # noqa: E731
    assert kinds(full.pi_encoder) == ["Linear", "ReLU"] * 3  # actor without LayerNorm (the paper's default)
    assert kinds(full.q.members[0]) == ["Linear", "ReLU", "LayerNorm"] * 3 + ["Head"]  # Head: the output layer
    assert len(full.q.members) == 2 and full.q_values(torch.zeros(5, 3), torch.zeros(5, 2)).shape == (2, 5)
    _, ln_spec = _spec(actor_layer_norm=True, critic_layer_norm=False)
    both = ln_spec.build()["default_policy"]
    assert "LayerNorm" in kinds(both.pi_encoder) and "LayerNorm" not in kinds(both.q)
    assert {k.split(".")[0] for k in lean.state_dict()} == {"pi_encoder", "pi_head"}
    lean.load_state_dict(full.state_dict())
    obs = torch.randn(64, 3) * 10
    a = lean.forward_inference({C.OBS: obs})[C.ACTIONS]
    assert torch.equal(a, full.forward_inference({C.OBS: obs})[C.ACTIONS])
    assert ((a >= torch.as_tensor(ACT.low)) & (a <= torch.as_tensor(ACT.high))).all()


def test_the_papers_initialisation_biases_and_small_output_layers():
    # ReBRAC's and CORL's code (from EDAC): hidden biases 0.1, hidden weights as nn.Linear's U(±1/sqrt(fan_in)),
    # actor output U(±1e-3), critic outputs U(±3e-3): the first actions mid-range, the first Q values near 0.
    torch.manual_seed(0)
    _, spec = _spec()
    module = spec.build()["default_policy"]
    linears = [m for m in module.pi_encoder.modules() if isinstance(m, nn.Linear)]
    for net in [module.pi_encoder, *(m[0] for m in module.q.members)]:
        for layer in (m for m in net.modules() if isinstance(m, nn.Linear)):
            assert torch.all(layer.bias == 0.1)
            assert layer.weight.abs().max() <= 1 / layer.in_features ** 0.5
    assert linears[1].weight.abs().max() > 0.05  # hidden weights keep nn.Linear's scale (bound 1/16 here)
    for layer, bound in [(module.pi_head, 1e-3), *((m[1], 3e-3) for m in module.q.members)]:
        assert layer.weight.abs().max() <= bound and layer.bias.abs().max() <= bound and layer.weight.abs().max() > 0
    assert torch.equal(module.target_q.members[0][1].weight, module.q.members[0][1].weight)  # targets copy it
    obs = torch.randn(64, 3)
    assert (module.actions(obs) - module.action_center).abs().max() < 0.05  # mid-range: [-2, 2] x [0, 1] here
    assert module.q_values(obs, torch.zeros(64, 2)).abs().max() < 0.1
    lean = spec.build(inference_only=True)["default_policy"]
    assert torch.all(lean.pi_encoder[0].bias == 0.1) and lean.pi_head.weight.abs().max() <= 1e-3
    _, plain = _spec(paper_init=False)
    assert not torch.all(plain.build()["default_policy"].pi_encoder[0].bias == 0.1)  # nn.Linear's own


def test_the_actor_and_targets_move_every_policy_freq_updates_and_report_only_then():
    cfg, spec = _spec()
    learner = ReBRACLearner(config=cfg, module_spec=spec).build()
    module = learner.module["default_policy"]
    critic_names = {"losses/critic", "rebrac/critic_penalty", "rebrac/q_data_mean", "rebrac/target_mean"}
    actor_names = {"losses/actor", "rebrac/lambda", "rebrac/q_mean", "rebrac/bc_penalty", "rebrac/actor_at_bounds",
                   "rebrac/data_at_bounds"}
    for i in range(4):
        before = {k: v.clone() for k, v in module.state_dict().items()}
        metrics = learner.update(_batch_np(seed=i))
        assert set(metrics) == critic_names | (actor_names if i % 2 else set()), i
        moved = {k.split(".")[0] for k, v in module.state_dict().items() if not torch.equal(v, before[k])}
        expected = {"q"} | ({"pi_encoder", "pi_head", "target_pi_encoder", "target_pi_head", "target_q"} if i % 2 else set())
        assert moved == expected, i


def test_defaults_are_the_papers_and_bad_settings_are_refused_with_the_field():
    cfg = ReBRACConfig()
    assert (cfg.train_batch_size, cfg.model.hidden, cfg.actor_lr, cfg.critic_lr, cfg.tau, cfg.gamma) == (
        1024, (256, 256, 256), 1e-3, 1e-3, 0.005, 0.99)
    assert (cfg.policy_noise, cfg.noise_clip, cfg.policy_freq, cfg.normalize_q) == (0.2, 0.5, 2, True)
    assert (cfg.actor_layer_norm, cfg.critic_layer_norm, cfg.actor_bc_coef, cfg.critic_bc_coef) == (False, True, 0.01, 0.01)
    assert cfg.paper_init and cfg.module_config()["paper_init"]
    assert ReBRACConfig.from_dict(cfg.to_dict()) == cfg
    names = [type(c).__name__ for c in cfg.learner_connectors(OBS, ACT)]
    assert names == ["AddTransitions", "AddNextObservations", "AddNextActions"]
    with pytest.raises(ConfigError, match="continuous actions.*Discrete"):
        cfg.learner_connectors(OBS, gym.spaces.Discrete(3))
    with pytest.raises(TypeError, match="continuous actions"):
        ReBRACRLModule(OBS, gym.spaces.Discrete(3), {})
    for field, value in (("actor_bc_coef", -1.0), ("critic_bc_coef", -0.1), ("policy_freq", 0), ("tau", 0.0),
                         ("critic_lr", 0.0), ("noise_clip", -0.1)):
        with pytest.raises(ConfigError, match=field):
            ReBRACConfig(**{field: value})
    with pytest.raises(ConfigError, match="model.encoder"):
        ReBRACConfig.from_dict({"model": {"encoder": "cnn"}})
