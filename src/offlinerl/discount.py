"""Discounted sums over episodes, in numpy: the return maths that connectors run on data.

No torch here: Ray Data's workers import this module (through the learner connectors) for every
transform, and a worker that imported torch would start ~2 s later and hold more memory. The torch
maths are in ``offlinerl.ops``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["discounted_cumsum", "segment_discounted_cumsum", "gae"]


def discounted_cumsum(x: np.ndarray, gamma: float) -> np.ndarray:
    """``y[t] = sum_k gamma^k x[t+k]`` over one episode (1-D), in float64 then cast back."""
    x = np.asarray(x)
    return segment_discounted_cumsum(x, np.array([len(x)]), gamma)


def segment_discounted_cumsum(x: np.ndarray, lengths: np.ndarray, gamma: float) -> np.ndarray:
    """Discounted cumulative sums of consecutive segments of ``x`` (segment i has ``lengths[i]`` steps).

    Vectorised over segments: the episodes are laid side by side in a padded
    ``[num_segments, max_len]`` array and swept once backwards in time.
    """
    x = np.asarray(x)
    lengths = np.asarray(lengths, dtype=np.int64)
    if lengths.sum() != len(x):
        raise ValueError(f"segment lengths sum to {lengths.sum()}, but x has {len(x)} entries")
    if len(x) == 0:
        return x.copy()
    n, width = len(lengths), int(lengths.max())
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    col = np.arange(len(x)) - np.repeat(starts, lengths)
    row = np.repeat(np.arange(n), lengths)
    padded = np.zeros((n, width), dtype=np.float64)
    padded[row, col] = x
    out = np.empty_like(padded)
    acc = np.zeros(n, dtype=np.float64)
    for t in range(width - 1, -1, -1):
        acc = padded[:, t] + gamma * acc
        out[:, t] = acc
    return out[row, col].astype(x.dtype if x.dtype.kind == "f" else np.float64)


def gae(
    rewards: np.ndarray,
    values: np.ndarray,
    next_values: np.ndarray,
    terminateds: np.ndarray,
    lengths: np.ndarray,
    gamma: float,
    lam: float,
) -> np.ndarray:
    """Generalised advantage estimation per segment (Schulman et al. 2016).

    ``delta_t = r_t + gamma (1 - terminated_t) V(s_{t+1}) - V(s_t)``;
    ``A_t = sum_k (gamma lam)^k delta_{t+k}`` within each segment.
    """
    deltas = rewards + gamma * (1.0 - terminateds) * next_values - values
    return segment_discounted_cumsum(np.asarray(deltas, dtype=np.float64), lengths, gamma * lam).astype(np.float32)
