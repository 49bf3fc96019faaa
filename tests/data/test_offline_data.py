import numpy as np
import pytest
import torch

from offlinerl.algorithms.algorithm_config import DataConfig
from offlinerl.algorithms.marwil import MARWILConfig
from offlinerl.core import columns as C
from offlinerl.data import InMemorySource, OfflineData
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
