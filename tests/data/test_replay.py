"""Replay buffer (FIFO, exact contents, restored into the same ring slots) and the offline/online mixing batch
source (in-memory arrays or any offline batch source)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from offlinerl.data.replay import MixedBatchSource, ReplayBuffer
from offlinerl.data.sources import FixedBatchSource


def _cols(start: int, n: int) -> dict[str, np.ndarray]:
    x = np.arange(start, start + n)
    return {"obs": np.stack([x, -x], 1).astype(np.float32), "rewards": x.astype(np.float32)}


def test_replay_keeps_the_newest_transitions_in_order():
    buf = ReplayBuffer(capacity=5)
    buf.add(_cols(0, 3))
    buf.add(_cols(3, 4))  # wraps: 0, 1 overwritten
    assert len(buf) == 5 and buf.num_added == 7
    np.testing.assert_array_equal(buf.contents()["rewards"].numpy(), [2, 3, 4, 5, 6])
    np.testing.assert_array_equal(buf.contents()["obs"].numpy()[:, 1], [-2, -3, -4, -5, -6])
    buf.add(_cols(10, 12))  # more than the capacity: only the newest 5
    np.testing.assert_array_equal(buf.contents()["rewards"].numpy(), [17, 18, 19, 20, 21])
    with pytest.raises(KeyError, match="replay columns"):
        buf.add({"obs": np.zeros((1, 2), np.float32)})


def test_a_restored_replay_holds_every_transition_in_its_ring_slot_and_samples_the_same():
    """The state is counters and ring position only; the contents come back (oldest first, more than needed is
    fine) and land where they were, so the same draws give the same transitions."""
    buf = ReplayBuffer(capacity=5)
    for start, n in ((0, 3), (3, 4), (7, 2)):
        buf.add(_cols(start, n))
    state = buf.get_state()
    assert state == {"capacity": 5, "next": 4, "size": 5, "num_added": 9}  # no tensors in the state
    other = ReplayBuffer(capacity=5)
    other.set_state(state, _cols(0, 9))  # every transition ever added, oldest first: the newest 5 are kept
    for k in ("obs", "rewards"):
        assert torch.equal(other.columns[k], buf.columns[k]), k
    a, b = buf.sample(16, torch.Generator().manual_seed(1)), other.sample(16, torch.Generator().manual_seed(1))
    assert torch.equal(a["rewards"], b["rewards"])
    other.add(_cols(9, 1))
    buf.add(_cols(9, 1))
    assert torch.equal(other.columns["rewards"], buf.columns["rewards"]) and other.num_added == 10
    with pytest.raises(ValueError, match="5 transitions, 2 were given back"):
        ReplayBuffer(capacity=5).set_state(state, _cols(0, 2))
    old_style = {"capacity": 5, "columns": buf.contents(), "num_added": 10}  # a state that held its contents
    legacy = ReplayBuffer(capacity=5)
    legacy.set_state(old_style)
    np.testing.assert_array_equal(legacy.contents()["rewards"].numpy(), [5, 6, 7, 8, 9])


def test_mixed_batches_have_the_requested_share_of_online_transitions():
    offline = {"obs": np.zeros((100, 2), np.float32), "rewards": np.zeros(100, np.float32)}
    online = ReplayBuffer(capacity=50)
    source = MixedBatchSource(offline, online, batch_size=64, online_fraction=0.25, module_id="p", seed=0)
    assert source.next_batch()["p"]["rewards"].sum() == 0  # no online data yet: all offline
    assert source.add_online({"obs": np.ones((10, 2), np.float32), "rewards": np.ones(10, np.float32)}) == 10
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


def test_any_offline_source_gives_the_offline_rows_of_a_mixed_batch():
    """A streaming shard (here a fixed batch) gives its first rows; the online rows follow."""
    offline = FixedBatchSource({"obs": np.full((8, 2), 5, np.float32), "rewards": np.arange(8, dtype=np.float32)},
                               module_id="p")
    source = MixedBatchSource(offline, ReplayBuffer(capacity=10), batch_size=8, online_fraction=0.5, module_id="p")
    np.testing.assert_array_equal(source.next_batch()["p"]["rewards"].numpy(), np.arange(8))
    source.add_online({"obs": np.ones((3, 2), np.float32), "rewards": np.full(3, -1, np.float32)})
    batch = source.next_batch()["p"]
    np.testing.assert_array_equal(batch["rewards"].numpy(), [0, 1, 2, 3, -1, -1, -1, -1])


def test_a_mixed_source_waits_for_its_replay_contents_after_a_restore():
    offline = {"obs": np.zeros((20, 2), np.float32), "rewards": np.zeros(20, np.float32)}
    source = MixedBatchSource(offline, ReplayBuffer(capacity=4), batch_size=4, online_fraction=0.5, seed=0)
    source.add_online(_cols(0, 6))
    source.next_batch()
    state = source.get_state()
    expected = source.next_batch()["rewards"].clone()
    again = MixedBatchSource(offline, ReplayBuffer(capacity=4), batch_size=4, online_fraction=0.5, seed=9)
    again.set_state(state)
    with pytest.raises(RuntimeError, match="restore_online"):
        again.next_batch()
    assert again.restore_online(_cols(0, 6)) == 4
    assert torch.equal(again.next_batch()["rewards"], expected)


def test_each_module_of_a_multi_agent_job_mixes_its_own_replay_with_its_own_offline_rows():
    from offlinerl.data.replay import MixedSpec
    from offlinerl.data.sources import MultiModuleInMemorySpec

    offline = {"a": _cols(0, 10), "b": _cols(100, 10)}  # module b's rows are >= 100, its online ones >= 1000
    source = MixedSpec(MultiModuleInMemorySpec(offline, batch_size=8, seed=0), capacity=6, batch_size=8,
                       online_fraction=0.5, seed=1).build(torch.device("cpu"))
    assert set(source.next_batch()) == {"a", "b"} and source.add_online({"b": _cols(1000, 4)}) == 4
    batch = source.next_batch()
    assert (batch["a"]["rewards"] < 10).all()  # a has no online transitions yet: all offline
    b = batch["b"]["rewards"].numpy()
    assert ((b >= 100) & (b < 110)).sum() == 4 and (b >= 1000).sum() == 4
    assert source.add_online({"a": _cols(50, 9), "b": _cols(1004, 1)}) == 6 + 5  # a keeps its newest 6
    np.testing.assert_array_equal(source.sources["a"].online.contents()["rewards"].numpy(), [53, 54, 55, 56, 57, 58])
    state = source.get_state()
    restored = MixedSpec(MultiModuleInMemorySpec(offline, batch_size=8, seed=0), capacity=6, batch_size=8,
                         online_fraction=0.5, seed=1).build(torch.device("cpu"))
    restored.set_state(state)
    restored.restore_online({"a": _cols(50, 9), "b": _cols(1000, 5)})
    for _ in range(3):
        x, y = source.next_batch(), restored.next_batch()
        for mid in ("a", "b"):
            torch.testing.assert_close(x[mid]["rewards"], y[mid]["rewards"])
    with pytest.raises(ValueError, match=r"online transitions of modules \['c'\]"):
        source.add_online({"c": _cols(0, 1)})
