import math

import numpy as np
import pytest
import torch

from offlinerl import discount, ops


def test_discounted_cumsum_hand_computed():
    out = discount.discounted_cumsum(np.array([1.0, 2.0, 3.0], dtype=np.float32), 0.5)
    # [1 + .5*2 + .25*3, 2 + .5*3, 3]
    np.testing.assert_allclose(out, [2.75, 3.5, 3.0])
    assert out.dtype == np.float32


def test_segment_discounted_cumsum_keeps_segments_apart():
    x = np.array([1.0, 1.0, 1.0, 2.0, 4.0])
    out = discount.segment_discounted_cumsum(x, np.array([3, 2]), 0.9)
    np.testing.assert_allclose(out, [1 + 0.9 + 0.81, 1.9, 1.0, 2 + 0.9 * 4, 4.0])
    with pytest.raises(ValueError, match="sum to 4"):
        discount.segment_discounted_cumsum(x, np.array([3, 1]), 0.9)


def test_gae_with_terminal_and_lambda():
    r = np.array([1.0, 1.0])
    v = np.array([0.5, 0.5])
    nv = np.array([0.5, 2.0])
    term = np.array([0.0, 1.0])
    adv = discount.gae(r, v, nv, term, np.array([2]), gamma=0.9, lam=0.5)
    d0 = 1 + 0.9 * 0.5 - 0.5
    d1 = 1 + 0.0 - 0.5
    np.testing.assert_allclose(adv, [d0 + 0.45 * d1, d1], rtol=1e-6)


def test_awr_weights_clip_without_overflow():
    w = ops.awr_weights(torch.tensor([0.0, 1.0, 1e6]), beta=2.0, max_weight=20.0)
    torch.testing.assert_close(w, torch.tensor([1.0, math.exp(2.0), 20.0]))


def test_soft_update_matches_formula_after_k_steps():
    target = torch.nn.Linear(2, 1)
    source = torch.nn.Linear(2, 1)
    t0 = target.weight.detach().clone()
    s = source.weight.detach().clone()
    for _ in range(3):
        ops.soft_update(target, source, 0.1)
    torch.testing.assert_close(target.weight.detach(), s + (t0 - s) * 0.9**3)


def test_hard_update_copies():
    a, b = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
    ops.hard_update(a, b)
    torch.testing.assert_close(a.weight, b.weight)


def test_expectile_loss_and_twin_min():
    diff = torch.tensor([-2.0, 1.0])
    torch.testing.assert_close(ops.expectile_loss(diff, 0.7), torch.tensor([0.3 * 4.0, 0.7 * 1.0]))
    q = torch.tensor([[1.0, 5.0], [2.0, 3.0]])
    torch.testing.assert_close(ops.twin_min(q), torch.tensor([1.0, 3.0]))


def test_uniform_box_log_density():
    val = ops.uniform_box_log_density(np.array([-2.0, 0.0]), np.array([2.0, 0.5]))
    assert val.item() == pytest.approx(-(math.log(4.0) + math.log(0.5)))


def test_update_running_mean():
    out = ops.update_running_mean(torch.tensor(10.0), torch.tensor(20.0), 0.1)
    assert out.item() == pytest.approx(11.0)


def test_at_bounds_counts_components_within_the_margin_of_either_bound():
    # bounds [-2, 2] x [0, 1]: center [0, 0.5], half-ranges [2, 0.5]; 1% margin: |a − c| ≥ [1.98, 0.495]
    actions = torch.tensor([[1.99, 0.5], [-2.0, 0.996], [1.97, 0.004], [0.0, 0.006]], requires_grad=True)
    out = ops.at_bounds(actions, torch.tensor([0.0, 0.5]), torch.tensor([2.0, 0.5]))
    assert out.item() == pytest.approx(4 / 8) and not out.requires_grad  # 1.99, -2.0, 0.996, 0.004
    assert ops.at_bounds(actions, torch.tensor([0.0, 0.5]), torch.tensor([2.0, 0.5]), margin=0.02).item() == \
        pytest.approx(6 / 8)  # also 1.97 (≥ 1.96) and 0.006 (≤ 0.01)
