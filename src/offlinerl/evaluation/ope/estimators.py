"""Off-policy evaluation estimators as pure numpy functions over padded episodes.

Every estimator takes arrays with one row per episode, padded to the longest
episode ``T`` (``mask[i, t]`` is True for real steps), and returns a number:

- ``rewards``     ``[N, T]`` r_t
- ``log_ratios``  ``[N, T]`` log ρ_t = log π(a_t|s_t) − log μ(a_t|s_t) (π: evaluated policy, μ: behaviour)
- ``q_taken``     ``[N, T]`` Q̂(s_t, a_t), the data action
- ``v``           ``[N, T]`` V̂(s_t) = E_{a~π} Q̂(s_t, a)

With G_i = Σ_t γ^t r_t and ρ_{0:t} = Π_{k≤t} ρ_k (ρ_{0:−1} = 1), W_i = ρ_{0:T_i−1}:

    IS   = 1/N Σ_i W_i G_i
    WIS  = Σ_i W_i G_i / Σ_i W_i
    PDIS = 1/N Σ_i Σ_t γ^t ρ_{0:t} r_t
    DR   = 1/N Σ_i Σ_t γ^t [ρ_{0:t} (r_t − Q̂(s_t,a_t)) + ρ_{0:t−1} V̂(s_t)]

Precup, Sutton & Singh (2000) for IS/PDIS, Jiang & Li (2016) "Doubly robust
off-policy value evaluation" for the step-wise DR. Products of ratios are
summed in log space; WIS and the effective sample size subtract the largest
log-weight first, so they are exact when single weights overflow float64.
``bootstrap_ci`` resamples episodes (rows) for any of them.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

__all__ = [
    "bootstrap_ci",
    "discounted_returns",
    "doubly_robust",
    "effective_sample_size",
    "importance_sampling",
    "pad_episodes",
    "per_decision_is",
    "weighted_is",
]


def pad_episodes(values: np.ndarray, lengths: np.ndarray, fill: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Flat per-step ``values`` ``[sum T_i]`` of consecutive episodes → ``[N, max T_i]`` float64 and its mask."""
    lengths = np.asarray(lengths, dtype=np.int64)
    horizon = int(lengths.max()) if len(lengths) else 0
    mask = np.arange(horizon)[None, :] < lengths[:, None]  # [N, T]
    out = np.full(mask.shape, fill, dtype=np.float64)
    out[mask] = np.asarray(values, dtype=np.float64)
    return out, mask


def _discounts(horizon: int, gamma: float) -> np.ndarray:
    return gamma ** np.arange(horizon, dtype=np.float64)  # [T]


def _cum_log_ratios(log_ratios: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """log ρ_{0:t} ``[N, T]`` (padding contributes log 1 = 0)."""
    return np.cumsum(np.where(mask, log_ratios, 0.0), axis=1)


def discounted_returns(rewards: np.ndarray, mask: np.ndarray, gamma: float) -> np.ndarray:
    """G_i = Σ_t γ^t r_t: ``[N]``."""
    return (np.where(mask, rewards, 0.0) * _discounts(rewards.shape[1], gamma)).sum(axis=1)


def _log_weights(log_ratios: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """log W_i = Σ_t log ρ_t: ``[N]``."""
    return np.where(mask, log_ratios, 0.0).sum(axis=1)


def importance_sampling(rewards: np.ndarray, log_ratios: np.ndarray, mask: np.ndarray, gamma: float) -> float:
    """Trajectory-wise IS: 1/N Σ_i W_i G_i (unbiased, high variance)."""
    w = np.exp(_log_weights(log_ratios, mask))
    return float(np.mean(w * discounted_returns(rewards, mask, gamma)))


def weighted_is(rewards: np.ndarray, log_ratios: np.ndarray, mask: np.ndarray, gamma: float) -> float:
    """Weighted (self-normalised) IS: Σ_i W_i G_i / Σ_i W_i (biased, consistent, bounded by the returns)."""
    logw = _log_weights(log_ratios, mask)
    w = np.exp(logw - logw.max())  # same ratios, no overflow
    return float((w * discounted_returns(rewards, mask, gamma)).sum() / w.sum())


def per_decision_is(rewards: np.ndarray, log_ratios: np.ndarray, mask: np.ndarray, gamma: float) -> float:
    """Per-decision IS: 1/N Σ_i Σ_t γ^t ρ_{0:t} r_t (r_t weighted only by the ratios before and at t)."""
    rho = np.exp(_cum_log_ratios(log_ratios, mask))  # [N, T]
    terms = np.where(mask, rho * rewards, 0.0) * _discounts(rewards.shape[1], gamma)
    return float(terms.sum(axis=1).mean())


def doubly_robust(rewards: np.ndarray, log_ratios: np.ndarray, q_taken: np.ndarray, v: np.ndarray,
                  mask: np.ndarray, gamma: float) -> float:
    """Step-wise DR: 1/N Σ_i Σ_t γ^t [ρ_{0:t} (r_t − Q̂(s_t,a_t)) + ρ_{0:t−1} V̂(s_t)].

    Unbiased for any Q̂ as long as V̂(s) = E_{a~π} Q̂(s, a); Q̂ = 0 gives PDIS.
    """
    cum = _cum_log_ratios(log_ratios, mask)  # [N, T] log ρ_{0:t}
    prev = np.concatenate([np.zeros_like(cum[:, :1]), cum[:, :-1]], axis=1)  # log ρ_{0:t-1}
    terms = np.exp(cum) * (rewards - q_taken) + np.exp(prev) * v
    terms = np.where(mask, terms, 0.0) * _discounts(rewards.shape[1], gamma)
    return float(terms.sum(axis=1).mean())


def effective_sample_size(log_weights: np.ndarray) -> float:
    """Kish's ESS of the episode weights, (Σ W_i)² / Σ W_i²: N when all are equal, 1 when one dominates."""
    logw = np.asarray(log_weights, dtype=np.float64)
    w = np.exp(logw - logw.max())
    return float(w.sum() ** 2 / (w ** 2).sum())


def bootstrap_ci(statistic: Callable[..., float], arrays: Sequence[np.ndarray], *, num_resamples: int = 1000,
                 confidence: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of ``statistic(*arrays)``, resampling rows (episodes) with replacement.

    All ``arrays`` share their first axis and are resampled with the same rows;
    resamples whose statistic is not finite are dropped. The interval reflects
    the sampling noise of the episodes only, not of any fitted model.
    """
    n = len(arrays[0])
    if any(len(a) != n for a in arrays):
        raise ValueError("bootstrap_ci: every array needs the same number of rows")
    if n == 0:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    stats = np.empty(num_resamples, dtype=np.float64)
    for b in range(num_resamples):
        rows = rng.integers(0, n, size=n)
        stats[b] = statistic(*(a[rows] for a in arrays))
    stats = stats[np.isfinite(stats)]
    if not len(stats):
        return float("nan"), float("nan")
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(stats, [tail, 100 - tail])
    return float(low), float(high)
