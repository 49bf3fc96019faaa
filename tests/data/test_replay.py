"""Replay buffer (FIFO, exact contents) and the offline/online mixing batch source."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from offlinerl.data.replay import MixedBatchSource, ReplayBuffer


def _cols(start: int, n: int) -> dict[str, np.ndarray]:
    x = np.arange(start, start + n)
    return {"obs": np.stack([x, -x], 1).astype(np.float32), "rewards": x.astype(np.float32)}


def test_replay_keeps_the_newest_transitions_in_order():
    buf = ReplayBuffer(capacity=5)
    buf.add(_cols(0, 3))
    buf.add(_cols(3, 4))  # wraps: 0, 1 overwritten
    assert len(buf) == 5 and buf.num_added == 7
    state = buf.get_state()
    np.testing.assert_array_equal(state["columns"]["rewards"].numpy(), [2, 3, 4, 5, 6])
    np.testing.assert_array_equal(state["columns"]["obs"].numpy()[:, 1], [-2, -3, -4, -5, -6])
    buf.add(_cols(10, 12))  # more than the capacity: only the newest 5
    np.testing.assert_array_equal(buf.get_state()["columns"]["rewards"].numpy(), [17, 18, 19, 20, 21])
    other = ReplayBuffer(capacity=5)
    other.set_state(buf.get_state())
    np.testing.assert_array_equal(other.get_state()["columns"]["rewards"].numpy(), [17, 18, 19, 20, 21])
    with pytest.raises(KeyError, match="replay columns"):
        buf.add({"obs": np.zeros((1, 2), np.float32)})


def test_mixed_batches_have_the_requested_share_of_online_transitions():
    offline = {"obs": np.zeros((100, 2), np.float32), "rewards": np.zeros(100, np.float32)}
    online = ReplayBuffer(capacity=50)
    source = MixedBatchSource(offline, online, batch_size=64, online_fraction=0.25, module_id="p", seed=0)
    assert source.next_batch()["p"]["rewards"].sum() == 0  # no online data yet: all offline
    online.add({"obs": np.ones((10, 2), np.float32), "rewards": np.ones(10, np.float32)})
    batch = source.next_batch()["p"]
    assert batch["obs"].shape == (64, 2) and batch["rewards"].dtype == torch.float32
    assert int(batch["rewards"].sum()) == 16
    a = MixedBatchSource(offline, online, batch_size=8, online_fraction=0.5, seed=3)
    b = MixedBatchSource(offline, online, batch_size=8, online_fraction=0.5, seed=3)
    assert torch.equal(a.next_batch()["obs"], b.next_batch()["obs"])
    with pytest.raises(ValueError, match="online_fraction"):
        MixedBatchSource(offline, online, batch_size=8, online_fraction=1.5)


def test_proportional_mixing_follows_the_online_share_of_all_transitions():
    """mixing="proportional": online rows in a batch = round(batch · online / (online + offline)), growing as
    experience comes in (one buffer's odds), whatever online_fraction says."""
    offline = {"rewards": np.zeros(300, np.float32)}
    online = ReplayBuffer(capacity=1000)
    source = MixedBatchSource(offline, online, batch_size=64, online_fraction=0.9, mixing="proportional", seed=0)
    assert source.next_batch()["rewards"].sum() == 0
    for added, expected in ((100, 16), (200, 32), (600, 48)):  # 100/400, 300/600, 900/1200 of 64 rows
        online.add({"rewards": np.ones(added, np.float32)})
        assert source.num_online() == expected
        assert int(source.next_batch()["rewards"].sum()) == expected
    with pytest.raises(ValueError, match="mixing must be one of"):
        MixedBatchSource(offline, online, batch_size=8, online_fraction=0.5, mixing="annealed")
