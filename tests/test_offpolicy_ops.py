"""Shared maths used by CQL and IQL, against hand-computed values."""

import math

import pytest
import torch
from torch import nn

from offlinerl import ops


def test_td_target_terminated_does_not_bootstrap_truncated_does():
    rewards = torch.tensor([1.0, 1.0])
    terminateds = torch.tensor([1.0, 0.0])  # the second step is truncated: it still bootstraps
    out = ops.td_target(rewards, terminateds, torch.tensor([10.0, 10.0]), 0.9)
    assert out.tolist() == pytest.approx([1.0, 10.0])


def test_expectile_loss_weights_positive_errors_by_tau():
    diff = torch.tensor([2.0, -1.0])
    assert ops.expectile_loss(diff, 0.7).mean().item() == pytest.approx((0.7 * 4 + 0.3 * 1) / 2)
    assert ops.expectile_loss(diff, 0.5).mean().item() == pytest.approx(0.5 * (4 + 1) / 2)


def test_awr_weights_are_clipped():
    w = ops.awr_weights(torch.tensor([0.0, 1.0, 10.0]), 2.0, 100.0)
    assert w.tolist() == pytest.approx([1.0, math.exp(2.0), 100.0])


def test_ensemble_mse_sums_members():
    q = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert ops.ensemble_mse(q, torch.tensor([1.0, 1.0])).item() == pytest.approx(0.5 + 6.5)


def test_uniform_box_log_density_is_minus_sum_log_widths():
    assert ops.uniform_box_log_density(torch.tensor([-2.0, 0.0]), torch.tensor([2.0, 1.0])).item() == pytest.approx(-math.log(4.0))
    assert ops.uniform_box_log_density([-1.0] * 3, [1.0] * 3).item() == pytest.approx(-3 * math.log(2.0))


def test_soft_update_matches_closed_form_after_k_steps():
    torch.manual_seed(0)
    source, target = nn.Linear(3, 2), nn.Linear(3, 2)
    theta0 = [p.detach().clone() for p in target.parameters()]
    tau, k = 0.005, 7
    for _ in range(k):
        ops.soft_update(target, source, tau)
    decay = (1 - tau) ** k
    for t0, t, s in zip(theta0, target.parameters(), source.parameters()):
        torch.testing.assert_close(t, decay * t0 + (1 - decay) * s.detach(), rtol=1e-6, atol=1e-7)
