import dataclasses

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from offlinerl.algorithms.marwil import MARWILConfig
from offlinerl.core import columns as C
from offlinerl.data import InMemorySource, OfflineData
from offlinerl.data.config import DataConfig
from offlinerl.data.offline_data import sample_episodes
from offlinerl.episodes import load_episodes
from tests.datagen import make_dataset


@pytest.fixture(scope="module")
def cartpole(tmp_path_factory):
    return make_dataset(tmp_path_factory.mktemp("d") / "cartpole", episodes=6)


def test_in_memory_arrays_match_episodes(ray_session, cartpole):
    data = OfflineData(cartpole, MARWILConfig(gamma=0.9, normalize_observations=True))
    assert data.mode == "in_memory"
    arrays = data.load_arrays()
    eps = load_episodes(cartpole)
    raw_obs = np.concatenate([e.obs[:-1] for e in eps])
    assert len(arrays[C.OBS]) == sum(len(e) for e in eps)
    mean, std = raw_obs.mean(0), raw_obs.std(0)
    np.testing.assert_allclose(arrays[C.OBS], np.clip((raw_obs - mean) / np.sqrt(std**2 + 1e-8), -10, 10), rtol=1e-4, atol=1e-4)
    r0 = eps[0].rewards
    np.testing.assert_allclose(arrays[C.RETURNS_TO_GO][0], sum(0.9**k * r for k, r in enumerate(r0)), rtol=1e-5)
    np.testing.assert_array_equal(arrays[C.ACTIONS], np.concatenate([e.actions for e in eps]))


def test_streaming_mode_yields_normalised_batches_with_same_stats(ray_session, cartpole):
    cfg = MARWILConfig(normalize_observations=True, data=DataConfig(mode="streaming", shuffle_buffer_size=64))
    data = OfflineData(cartpole, cfg)
    (spec,) = data.source_specs(1, batch_size=32, seed=0)
    mem = OfflineData(cartpole, MARWILConfig(normalize_observations=True))
    mem.load_arrays()
    np.testing.assert_allclose(data.normalizer.stats.mean, mem.normalizer.stats.mean, rtol=1e-10)
    np.testing.assert_allclose(data.normalizer.stats.var, mem.normalizer.stats.var, rtol=1e-8)
    src = spec.build(torch.device("cpu"))
    n = 0
    for _ in range(20):  # more than one epoch: it wraps around
        b = src.next_batch()[C.DEFAULT_MODULE_ID]
        assert b[C.OBS].shape == (32, 4) and b[C.OBS].dtype == torch.float32
        n += 1
    assert src.epoch >= 1


def test_in_memory_source_is_uniform_and_reproducible():
    arrays = {C.OBS: np.arange(10, dtype=np.float32)[:, None], C.ACTIONS: np.arange(10)}
    a = InMemorySource(arrays, 4, seed=1)
    b = InMemorySource(arrays, 4, seed=1)
    for _ in range(3):
        x, y = a.next_batch()[C.DEFAULT_MODULE_ID], b.next_batch()[C.DEFAULT_MODULE_ID]
        torch.testing.assert_close(x[C.OBS][:, 0].long(), x[C.ACTIONS])
        torch.testing.assert_close(x[C.ACTIONS], y[C.ACTIONS])


def test_streaming_statistics_of_a_large_dataset_come_from_a_fixed_sample_of_files_and_whole_episodes(ray_session, tmp_path):
    path = make_dataset(tmp_path / "many-files", episodes=60, rows_per_file=3)  # 20 files of 3 episodes
    eps = load_episodes(path)
    total = sum(len(e) for e in eps)
    full = OfflineData(path, MARWILConfig(normalize_observations=True, data=DataConfig(mode="streaming")))
    files, fraction = full.stats_sample()
    assert (len(files), fraction) == (20, 1.0)
    full.fit_normalizer_streaming(local=False)  # one Ray task per row group
    raw = np.concatenate([e.obs[:-1] for e in eps]).astype(np.float64)
    assert full.normalizer.stats.count == total
    np.testing.assert_allclose(full.normalizer.stats.mean, raw.mean(0), rtol=1e-10)
    np.testing.assert_allclose(full.normalizer.stats.var, raw.var(0), rtol=1e-8)
    here = OfflineData(path, MARWILConfig(normalize_observations=True, data=DataConfig(mode="streaming")))
    here.fit_normalizer_streaming()  # small files: read in this process, row group by row group, in the same order
    assert here.normalizer.get_state() == full.normalizer.get_state()

    cap = total // 4
    cfg = MARWILConfig(normalize_observations=True, data=DataConfig(mode="streaming", stats_max_steps=cap))
    sampled, again = OfflineData(path, cfg), OfflineData(path, cfg)
    files, fraction = sampled.stats_sample()
    assert len(files) == 16 and fraction == pytest.approx(cap * 20 / (total * 16))  # at least 16 files, then episodes
    sampled.fit_normalizer_streaming()
    again.fit_normalizer_streaming()
    assert sampled.normalizer.get_state() == again.normalizer.get_state()  # the same sample every time
    # The sample is whole episodes of the chosen files: their observations' moments, exactly.
    by_id = {e.id: e for e in eps}
    chosen = sorted(i for f in files for i in pq.read_table(f, columns=["episode_id"]).column("episode_id").to_pylist())
    table = pa.table({"episode_id": chosen, "agent_id": pa.array([None] * len(chosen), pa.string())})
    kept = sample_episodes(table, fraction).column("episode_id").to_pylist()
    obs = np.concatenate([by_id[i].obs[:-1] for i in kept]).astype(np.float64)
    assert 0 < sampled.normalizer.stats.count == len(obs) < total
    np.testing.assert_allclose(sampled.normalizer.stats.mean, obs.mean(0), rtol=1e-10)
    np.testing.assert_allclose(sampled.normalizer.stats.var, obs.var(0), rtol=1e-8)


def test_sample_episodes_keeps_every_chunk_of_a_kept_episode_whatever_the_order():
    ids = [f"e{i}" for i in range(200)]
    table = pa.table({"episode_id": ids + ids, "agent_id": [None] * 400, "chunk_index": [0] * 200 + [1] * 200})
    kept = sample_episodes(table, 0.3)
    reversed_kept = sample_episodes(table.take(list(range(399, -1, -1))), 0.3)
    assert sorted(kept.column("episode_id").to_pylist()) == sorted(reversed_kept.column("episode_id").to_pylist())
    counts = {}
    for i in kept.column("episode_id").to_pylist():
        counts[i] = counts.get(i, 0) + 1
    assert set(counts.values()) == {2} and 30 <= len(counts) <= 90  # both chunks; about 60 of 200


def test_streaming_source_serves_every_transition_once_per_epoch_in_shuffled_pools(ray_session):
    import ray.data

    from offlinerl.data.sources import StreamingSource

    ds = ray.data.from_items([{"x": i} for i in range(1000)], override_num_blocks=7)  # blocks of ~143 rows
    src = StreamingSource(ds, batch_size=32, shuffle_buffer_size=300, prefetch_batches=1, seed=0)
    served = [src.next_batch()[C.DEFAULT_MODULE_ID]["x"] for _ in range(31)]
    values = torch.cat(served).tolist()
    assert len(values) == len(set(values)) == 992 and src.epoch == 1  # 1000 // 32 batches, no repeat
    first_pool = torch.cat(served[:9]).tolist()  # the first pool: >= 300 rows, i.e. 3 blocks, permuted
    assert first_pool != sorted(first_pool) and max(first_pool) < 3 * 143 + 3
    src.next_batch()
    assert src.epoch == 2  # the 8 rows left at the end of epoch 1 were dropped; epoch 2 started
    again = StreamingSource(ds, batch_size=32, shuffle_buffer_size=300, prefetch_batches=1, seed=0)
    assert torch.equal(again.next_batch()[C.DEFAULT_MODULE_ID]["x"], served[0])  # same seed, same order
    with pytest.raises(RuntimeError, match="fewer transitions than train_batch_size=2000"):
        StreamingSource(ds, batch_size=2000, shuffle_buffer_size=0, prefetch_batches=1, seed=0).next_batch()


class _CountingDataset:
    """A Ray Dataset that counts the epochs asked of it (every ``iter_torch_batches`` call)."""

    def __init__(self, ds):
        self.ds = ds
        self.epochs_asked = 0

    def iter_torch_batches(self, **kwargs):
        self.epochs_asked += 1
        return self.ds.iter_torch_batches(**kwargs)


def test_streaming_source_reads_ahead_into_the_next_epoch(ray_session):
    """The first epoch is asked for when the source is built, and the next as soon as one ends, while the learner
    still serves its pool: a stream's first block comes a second or more after the request."""
    import time

    import ray.data

    from offlinerl.data.sources import StreamingSource

    ds = _CountingDataset(ray.data.from_items([{"x": i} for i in range(1000)], override_num_blocks=7))
    src = StreamingSource(ds, batch_size=32, shuffle_buffer_size=300, prefetch_batches=1, seed=0)
    deadline = time.monotonic() + 30
    while ds.epochs_asked < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert ds.epochs_asked == 1 and src.epoch == 0  # built: reading, nothing served yet
    served = [src.next_batch()[C.DEFAULT_MODULE_ID]["x"] for _ in range(31)]  # all of epoch 1
    while ds.epochs_asked < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert ds.epochs_asked == 2 and src.epoch == 1  # epoch 2 read ahead before the learner asked for it
    second = [src.next_batch()[C.DEFAULT_MODULE_ID]["x"] for _ in range(31)]
    assert src.epoch == 2 and len(set(torch.cat(second).tolist())) == 992  # epoch 2 whole, once each
    src.close()


def test_streaming_blocks_hold_about_block_bytes_whatever_the_files(ray_session, tmp_path):
    """Blocks of a bounded size keep what each map task and the read-ahead hold flat as datasets get more or
    bigger files (Ray Data's default makes whole files the blocks once there are 200 files or more)."""
    path = make_dataset(tmp_path / "many-files", episodes=60, rows_per_file=3)  # 20 files of 3 episodes
    total = sum(len(e) for e in load_episodes(path))

    def blocks(block_bytes):
        data = OfflineData(path, MARWILConfig(data=DataConfig(mode="streaming", block_bytes=block_bytes)))
        ds = data.transitions(shuffle_files=True, block_bytes=block_bytes).materialize()
        return ds.num_blocks(), ds.count()

    size = OfflineData(path, MARWILConfig()).estimated_bytes()
    assert blocks(-(-size // 40)) == (40, total)  # two blocks per file
    assert blocks(10 * size) == (20, total)  # never fewer blocks than files
    assert blocks(1) == (60, total)  # nor more than rows (episode chunks)
    old = OfflineData(path, MARWILConfig(data=DataConfig(mode="streaming")))
    old.info = dataclasses.replace(old.info, num_rows=0)  # a dataset.json from before rows were counted
    assert old.transitions(block_bytes=-(-size // 40)).materialize().num_blocks() == 40  # not one block
    old.info = dataclasses.replace(old.info, num_steps=20)  # then its steps bound the blocks
    assert old.transitions(block_bytes=1).materialize().num_blocks() == 20


def test_the_ray_map_function_hands_ray_data_the_same_transitions_as_arrow_it_keeps(ray_session, cartpole, tmp_path):
    """``transitions_block`` (what ``map_batches`` runs) is ``episodes_to_transitions`` as an Arrow table: Ray Data
    turns it back into exactly those arrays (dtypes and shapes too), for a multi-agent block's string column too."""
    import ray.data

    from offlinerl.data.offline_data import MODULE_COLUMN, episodes_to_transitions, transitions_block
    from offlinerl.episodes import parquet_files

    import gymnasium as gym

    from offlinerl.episodes import SingleAgentEpisode, write_dataset

    rng = np.random.default_rng(0)
    team = [SingleAgentEpisode(f"ep{i}", obs=rng.normal(size=(6, 2)).astype(np.float32), actions=rng.integers(0, 2, 5),
                               rewards=np.ones(5), terminated=True, agent_id=agent) for i in range(3) for agent in "ab"]
    write_dataset(team, tmp_path / "team", observation_space=gym.spaces.Box(-np.inf, np.inf, (2,), np.float32),
                  action_space=gym.spaces.Discrete(2))
    for path in (cartpole, tmp_path / "team"):
        data = OfflineData(path, MARWILConfig(normalize_observations=True))
        kwargs = data._transition_kwargs(normalize=False)  # as in-memory mode reads (a team's: with the module column)
        table = pq.read_table(parquet_files(path)[0], columns=data._read_columns())
        expected = episodes_to_transitions(table, **kwargs)
        block = transitions_block(table, **kwargs)
        assert isinstance(block, pa.Table) and block.column_names == list(expected)
        got = ray.data.from_arrow(block).take_batch(block.num_rows, batch_format="numpy")
        assert set(got) == set(expected) and (MODULE_COLUMN in got) == data.multi_module
        for k, v in expected.items():
            if v.dtype.kind == "U":  # Ray Data hands any string column back as Python strings
                np.testing.assert_array_equal(got[k].astype(str), v)
                continue
            assert got[k].dtype == v.dtype and got[k].shape == v.shape, k
            np.testing.assert_array_equal(got[k], v)
