"""BC and MARWIL losses against hand-computed values on a fixed tiny batch."""

import math

import pytest
import torch

from offlinerl.algorithms.bc import BCConfig, bc_loss
from offlinerl.algorithms.marwil import MARWILConfig, marwil_loss, update_sq_adv_norm
from offlinerl.core import columns as C
from offlinerl.core.networks import Categorical, TanhGaussian

LOGITS = torch.tensor([[0.0, math.log(3.0)], [math.log(2.0), 0.0]])  # probs [.25,.75], [2/3,1/3]
BATCH = {C.ACTIONS: torch.tensor([1, 0]), C.RETURNS_TO_GO: torch.tensor([3.0, 0.0])}
VALUES = torch.tensor([1.0, 1.0])


def test_bc_loss_discrete():
    out = bc_loss(BATCH, {C.ACTION_DIST: Categorical(LOGITS)}, BCConfig())
    expected = -(math.log(0.75) + math.log(2 / 3)) / 2
    assert out.losses["actor"].item() == pytest.approx(expected, rel=1e-6)


def test_bc_loss_continuous_is_negative_tanh_gaussian_log_likelihood():
    dist = TanhGaussian(torch.tensor([[0.0, 0.0]]), torch.tensor([-1.0]), torch.tensor([1.0]))
    out = bc_loss({C.ACTIONS: torch.tensor([[0.0]])}, {C.ACTION_DIST: dist}, BCConfig())
    # u = 0: log N(0; 0, 1) - log(1 * (1 - 0)) = -0.5 log(2 pi)
    assert out.losses["actor"].item() == pytest.approx(0.5 * math.log(2 * math.pi), rel=1e-6)


def test_marwil_loss_hand_computed():
    cfg = MARWILConfig(beta=1.0, vf_coeff=0.5, max_weight=20.0, sq_adv_norm_rate=0.5, sq_adv_norm_start=4.0)
    # advantages: [2, -1]; batch E[A^2] = 2.5; c^2 = 4 + .5 (2.5 - 4) = 3.25
    c2 = update_sq_adv_norm(torch.tensor(4.0), torch.tensor(2.5), cfg.sq_adv_norm_rate)
    assert c2.item() == pytest.approx(3.25)
    fwd = {C.ACTION_DIST: Categorical(LOGITS), C.VALUES: VALUES.clone().requires_grad_()}
    out = marwil_loss(BATCH, fwd, cfg, c2)
    c = math.sqrt(3.25)
    w = [math.exp(2 / c), math.exp(-1 / c)]
    expected_actor = -(w[0] * math.log(0.75) + w[1] * math.log(2 / 3)) / 2
    assert out.losses["actor"].item() == pytest.approx(expected_actor, rel=1e-5)
    assert out.losses["value"].item() == pytest.approx(0.5 * 0.5 * (4 + 1) / 2, rel=1e-6)


def test_marwil_weights_are_clipped():
    cfg = MARWILConfig(beta=10.0, max_weight=2.0)
    fwd = {C.ACTION_DIST: Categorical(LOGITS), C.VALUES: VALUES}
    out = marwil_loss(BATCH, fwd, cfg, torch.tensor(1.0))
    assert out.metrics["marwil/weights_max"].item() == pytest.approx(2.0)


def test_marwil_with_beta_zero_is_bc():
    fwd = {C.ACTION_DIST: Categorical(LOGITS), C.VALUES: VALUES}
    m = marwil_loss(BATCH, fwd, MARWILConfig(beta=0.0), torch.tensor(100.0))
    b = bc_loss(BATCH, fwd, BCConfig())
    assert m.losses["actor"].item() == pytest.approx(b.losses["actor"].item(), rel=1e-7)


def test_actor_loss_gives_no_value_gradient():
    v = VALUES.clone().requires_grad_()
    logits = LOGITS.clone().requires_grad_()
    out = marwil_loss(BATCH, {C.ACTION_DIST: Categorical(logits), C.VALUES: v}, MARWILConfig(), torch.tensor(1.0))
    g_v, g_logits = torch.autograd.grad(out.losses["actor"], [v, logits], allow_unused=True)
    assert g_v is None and g_logits is not None


def test_config_validation_names_the_field():
    from offlinerl.config_io import ConfigError

    with pytest.raises(ConfigError, match="beta"):
        MARWILConfig(beta=-1.0)
    with pytest.raises(ConfigError, match="lr"):
        BCConfig(lr=0.0)
