"""OPE estimators on a hand-built two-episode MDP; every expected number is computed by hand below."""

import math

import numpy as np
import pytest

from offlinerl.evaluation.ope.estimators import (bootstrap_ci, discounted_returns, doubly_robust, effective_sample_size,
                                                 importance_sampling, pad_episodes, per_decision_is, weighted_is)

GAMMA = 0.5
# episode 1 (2 steps): r = 1, 2;     π(a|s) = .5, .4;     μ(a|s) = .25, .8    → ρ = 2, .5
# episode 2 (3 steps): r = 0, 1, 4;  π(a|s) = .2, 1, .5;  μ(a|s) = .4, .5, .25 → ρ = .5, 2, 2
LENGTHS = np.array([2, 3])
REWARDS = [1.0, 2.0, 0.0, 1.0, 4.0]
PI = [0.5, 0.4, 0.2, 1.0, 0.5]
MU = [0.25, 0.8, 0.4, 0.5, 0.25]
Q_TAKEN = [1.0, 1.0, 2.0, 0.0, 2.0]  # Q̂(s_t, a_t)
V = [0.5, 1.5, 1.0, 1.0, 2.0]  # V̂(s_t) = E_π Q̂(s_t, ·)


def _episodes():
    r, mask = pad_episodes(np.array(REWARDS), LENGTHS)
    logr, _ = pad_episodes(np.log(PI) - np.log(MU), LENGTHS)
    q, _ = pad_episodes(np.array(Q_TAKEN), LENGTHS)
    v, _ = pad_episodes(np.array(V), LENGTHS)
    return r, logr, q, v, mask


def test_pad_episodes_layout():
    r, mask = pad_episodes(np.array(REWARDS), LENGTHS)
    assert r.tolist() == [[1, 2, 0], [0, 1, 4]]
    assert mask.tolist() == [[True, True, False], [True, True, True]]


def test_discounted_returns():
    r, _, _, _, mask = _episodes()
    # G1 = 1 + .5·2 = 2;  G2 = 0 + .5·1 + .25·4 = 1.5
    assert discounted_returns(r, mask, GAMMA).tolist() == pytest.approx([2.0, 1.5])


def test_importance_sampling():
    r, logr, _, _, mask = _episodes()
    # W1 = 2·.5 = 1, W2 = .5·2·2 = 2;  IS = (1·2 + 2·1.5) / 2 = 2.5
    assert importance_sampling(r, logr, mask, GAMMA) == pytest.approx(2.5)


def test_weighted_is():
    r, logr, _, _, mask = _episodes()
    # WIS = (1·2 + 2·1.5) / (1 + 2) = 5/3
    assert weighted_is(r, logr, mask, GAMMA) == pytest.approx(5 / 3)


def test_per_decision_is():
    r, logr, _, _, mask = _episodes()
    # ep1: ρ0:0 = 2, ρ0:1 = 1:          2·1 + .5·1·2 = 3
    # ep2: ρ0:0 = .5, ρ0:1 = 1, ρ0:2 = 2: .5·0 + .5·1·1 + .25·2·4 = 2.5;  PDIS = (3 + 2.5)/2 = 2.75
    assert per_decision_is(r, logr, mask, GAMMA) == pytest.approx(2.75)


def test_doubly_robust():
    r, logr, q, v, mask = _episodes()
    # term_t = γ^t [ρ0:t (r_t − Q̂_t) + ρ0:t−1 V̂_t],  ρ0:−1 = 1
    # ep1: t0: 2·(1−1) + 1·.5 = .5;   t1: .5·[1·(2−1) + 2·1.5] = 2                       → 2.5
    # ep2: t0: .5·(0−2) + 1·1 = 0;    t1: .5·[1·(1−0) + .5·1] = .75;  t2: .25·[2·(4−2) + 1·2] = 1.5 → 2.25
    # DR = (2.5 + 2.25)/2 = 2.375
    assert doubly_robust(r, logr, q, v, mask, GAMMA) == pytest.approx(2.375)


def test_doubly_robust_with_zero_model_is_pdis():
    r, logr, q, v, mask = _episodes()
    zeros = np.zeros_like(q)
    assert doubly_robust(r, logr, zeros, zeros, mask, GAMMA) == pytest.approx(per_decision_is(r, logr, mask, GAMMA))


def test_doubly_robust_with_exact_model_on_policy_is_model_value():
    # π = μ and Q̂ = V̂ = the exact returns-to-go of a deterministic episode: DR = V̂(s0) exactly
    r, mask = pad_episodes(np.array([1.0, 1.0, 1.0]), np.array([3]))
    rtg = np.array([[1 + .5 + .25, 1 + .5, 1.0]])
    assert doubly_robust(r, np.zeros_like(r), rtg, rtg, mask, GAMMA) == pytest.approx(1.75)


def test_on_policy_ratios_give_the_mean_return():
    r, _, _, _, mask = _episodes()
    zeros = np.zeros_like(r)
    mean_return = (2.0 + 1.5) / 2
    for estimator in (importance_sampling, weighted_is, per_decision_is):
        assert estimator(r, zeros, mask, GAMMA) == pytest.approx(mean_return)


def test_log_space_survives_huge_ratios():
    r, mask = pad_episodes(np.array([1.0, 3.0]), np.array([1, 1]))
    logr = np.array([[800.0], [800.0 + math.log(3)]])  # exp(800) overflows float64; W2 = 3 W1
    # WIS = (1·1 + 3·3) / (1 + 3) = 2.5;  ESS = (1 + 3)² / (1 + 9) = 1.6
    assert weighted_is(r, logr, mask, 0.9) == pytest.approx(2.5)
    assert effective_sample_size(logr[:, 0]) == pytest.approx(1.6)


def test_effective_sample_size():
    # W = 1, 2: (1 + 2)² / (1 + 4) = 1.8;  equal weights: N
    assert effective_sample_size(np.log([1.0, 2.0])) == pytest.approx(1.8)
    assert effective_sample_size(np.zeros(7)) == pytest.approx(7.0)


def test_bootstrap_ci_is_seeded_and_covers_the_mean():
    x = np.random.default_rng(0).normal(3.0, 1.0, size=400)
    low, high = bootstrap_ci(np.mean, [x], num_resamples=500, seed=1)
    assert (low, high) == bootstrap_ci(np.mean, [x], num_resamples=500, seed=1)
    assert low < x.mean() < high
    # the percentile interval of a mean is close to ±1.96 standard errors
    assert high - low == pytest.approx(2 * 1.96 * x.std() / math.sqrt(len(x)), rel=0.2)


def test_bootstrap_ci_resamples_rows_of_every_array_together():
    r, logr, _, _, mask = _episodes()
    low, high = bootstrap_ci(lambda a, b, m: weighted_is(a, b, m, GAMMA), [r, logr, mask], num_resamples=200)
    # any resample's WIS is a weighted mean of G = 2 and 1.5
    assert 1.5 <= low <= high <= 2.0
    assert bootstrap_ci(np.mean, [np.full(5, 2.0)]) == (2.0, 2.0)
    with pytest.raises(ValueError):
        bootstrap_ci(lambda a, b: 0.0, [np.zeros(2), np.zeros(3)])
