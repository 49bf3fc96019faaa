"""EDAC: the diversity term against hand-computed values, the critic loss as SAC's plus η·diversity on a tiny
module with fixed weights, the members' action gradients of the real module, the paper's initialisation, and one
update of the real module and Learner (no Ray). Training, checkpoints and streaming: the contract suite."""

import math

import gymnasium as gym
import numpy as np
import pytest
import torch

from offlinerl.algorithms.edac import EDACConfig, EDACLearner, EDACRLModule, diversity_loss, edac_loss
from offlinerl.algorithms.sac import losses as sac_losses
from offlinerl.config_io import ConfigError
from offlinerl.core import columns as C
from offlinerl.core.rl_module import MultiRLModuleSpec, RLModuleSpec
from tests.algorithms.test_sac_losses import _batch, _tiny


def test_diversity_is_the_mean_pairwise_cosine_of_the_members_action_gradients():
    # two members, one state: orthogonal gradients 0; parallel 2·1 / (E − 1) = 2; at 45°: 2·cos 45° = √2
    for g2, expected in [((0.0, 2.0), 0.0), ((2.0, 0.0), 2.0), ((1.0, 1.0), math.sqrt(2)), ((-5.0, 0.0), -2.0)]:
        grads = torch.tensor([[[3.0, 0.0]], [list(g2)]])  # [E=2, B=1, A=2]
        assert diversity_loss(grads).item() == pytest.approx(expected, abs=1e-6)
    # E = 3, B = 2: the brute-force Σ_{e≠f} <ĝ_e, ĝ_f> / (E − 1), averaged over the states
    g = torch.randn(3, 2, 4, generator=torch.Generator().manual_seed(0))
    u = g / g.norm(dim=-1, keepdim=True)
    brute = sum(float((u[e] * u[f]).sum(-1).mean()) for e in range(3) for f in range(3) if e != f) / 2
    assert diversity_loss(g).item() == pytest.approx(brute, rel=1e-5)


class _TinyEDAC(type(_tiny())):
    """The SAC tests' tiny module (Q_e = c_e·s + d_e·a) with its action gradients: ∇_a Q_e = d_e."""

    def q_and_action_gradients(self, obs, actions):
        a = actions.detach().unsqueeze(0).expand(len(self.c), -1, -1).clone().requires_grad_(True)
        q = self.c.view(-1, 1) * obs[:, 0] + self.d.view(-1, 1) * a[..., 0]
        (grads,) = torch.autograd.grad(q.sum(), a, create_graph=True)
        return q, grads


def test_edac_loss_is_sacs_with_eta_times_the_diversity_in_the_critic_term():
    tiny = _tiny()
    module = _TinyEDAC(c=(1.0, 2.0), d=(1.0, -1.0), target_c=(1.5, 0.5), target_d=(0.5, 1.0), p=0.5,
                       log_alpha=math.log(0.5))
    cfg = EDACConfig(gamma=0.9, num_critics=2, eta=3.0)
    sac = sac_losses.sac_loss(_batch(), tiny, cfg)
    out = edac_loss(_batch(), module, cfg)
    # ∇_a Q = d = (1, −1): unit gradients +1 and −1, Σ_{e≠f} = 2·(−1), over E − 1 = 1: diversity −2 at every state
    assert out.metrics["edac/diversity"].item() == pytest.approx(-2.0)
    assert out.losses["critic"].item() == pytest.approx(sac.losses["critic"].item() + 3.0 * -2.0)
    for term in ("actor", "alpha"):
        assert out.losses[term].item() == pytest.approx(sac.losses[term].item())
    sac_n = edac_loss(_batch(), module, cfg.replace(eta=0.0))  # SAC-N: SAC's critic loss
    assert sac_n.losses["critic"].item() == pytest.approx(sac.losses["critic"].item())


def _real(eta=1.0, **kw):
    obs, act = gym.spaces.Box(-1, 1, (3,), np.float32), gym.spaces.Box(-2, 2, (2,), np.float32)
    cfg = EDACConfig.from_dict({"seed": 0, "num_critics": 3, "eta": eta, "model": {"hidden": [16, 16]}, **kw})
    return cfg, MultiRLModuleSpec.single(RLModuleSpec(EDACRLModule, obs, act, cfg.module_config()))


def _real_batch(n=32):
    g = torch.Generator().manual_seed(1)
    return {C.OBS: torch.randn(n, 3, generator=g), C.ACTIONS: torch.rand(n, 2, generator=g) * 4 - 2,
            C.REWARDS: torch.randn(n, generator=g), C.NEXT_OBS: torch.randn(n, 3, generator=g),
            C.TERMINATEDS: torch.zeros(n)}


def test_the_modules_action_gradients_are_each_members_own():
    cfg, spec = _real()
    module = spec.build()[C.DEFAULT_MODULE_ID]
    b = _real_batch(5)
    q, grads = module.q_and_action_gradients(b[C.OBS], b[C.ACTIONS])
    assert q.shape == (3, 5) and grads.shape == (3, 5, 2)
    torch.testing.assert_close(q, module.q_values(b[C.OBS], b[C.ACTIONS]))
    for e in range(3):  # member e alone, by autograd on a fresh leaf
        a = b[C.ACTIONS].clone().requires_grad_(True)
        (g,) = torch.autograd.grad(module.q_values(b[C.OBS], a)[e].sum(), a)
        torch.testing.assert_close(grads[e], g)


def test_paper_initialisation_and_its_switch():
    cfg, spec = _real()
    m = spec.build()[C.DEFAULT_MODULE_ID]
    assert all(torch.all(b == 0.1) for b in list(m.q.biases)[:-1])
    assert m.q.weights[-1].abs().max() <= 3e-3 and m.q.biases[-1].abs().max() <= 3e-3
    assert m.pi_head.weight.abs().max() <= 1e-3 and m.pi_head.bias.abs().max() <= 1e-3
    torch.testing.assert_close(dict(m.target_q.state_dict()), dict(m.q.state_dict()))
    _, plain = _real(paper_init=False)
    assert plain.build()[C.DEFAULT_MODULE_ID].pi_head.weight.abs().max() > 1e-3


def test_one_update_lowers_the_members_agreement_and_steps_every_optimizer():
    cfg, spec = _real(eta=10.0, critic_lr=1e-2)
    learner = EDACLearner(config=cfg, module_spec=spec).build()
    m = learner.module[C.DEFAULT_MODULE_ID]
    b = _real_batch()
    before = diversity_loss(m.q_and_action_gradients(b[C.OBS], b[C.ACTIONS])[1]).item()
    for _ in range(20):
        metrics = learner.update(b)
    after = diversity_loss(m.q_and_action_gradients(b[C.OBS], b[C.ACTIONS])[1]).item()
    assert after < before  # the members' action gradients turned apart
    assert {"losses/actor", "losses/critic", "losses/alpha", "edac/diversity"} <= set(metrics)


def test_config_refuses_a_single_critic_and_a_negative_eta():
    with pytest.raises(ConfigError, match="num_critics"):
        EDACConfig(num_critics=1)
    with pytest.raises(ConfigError, match="eta"):
        EDACConfig(eta=-1.0)
