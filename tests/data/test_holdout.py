"""``data.holdout``: a seeded split by episode id that training (both modes) and OPE agree on."""

import numpy as np
import pytest

from offlinerl.algorithms.marwil import MARWILConfig
from offlinerl.config_io import ConfigError
from offlinerl.core import columns as C
from offlinerl.data import OfflineData
from offlinerl.data.config import DataConfig, HoldoutConfig
from offlinerl.data.holdout import dataset_episode_ids, holdout_episode_ids
from offlinerl.episodes import load_episodes
from offlinerl.evaluation.ope.data import load_ope_episodes
from tests.datagen import make_dataset


@pytest.fixture(scope="module")
def cartpole(tmp_path_factory):
    return make_dataset(tmp_path_factory.mktemp("d") / "cartpole", episodes=10)


def test_the_split_is_seeded_disjoint_and_covers_every_episode(cartpole):
    ids = dataset_episode_ids(cartpole)
    assert len(ids) == 10
    held = holdout_episode_ids(ids, 0.3, seed=1)
    assert len(held) == 3 and set(held) <= set(ids)
    assert list(held) == list(holdout_episode_ids(ids[::-1], 0.3, seed=1))  # same ids and seed, same split
    assert any(list(holdout_episode_ids(ids, 0.3, seed=s)) != list(held) for s in range(2, 6))
    assert len(holdout_episode_ids(ids, 0.01, 0)) == 1 and len(holdout_episode_ids(ids, 0.99, 0)) == 9
    with pytest.raises(ValueError, match="at least 2"):
        holdout_episode_ids(ids[:1], 0.5, 0)
    with pytest.raises(ConfigError, match="data.holdout.fraction"):
        HoldoutConfig(fraction=1.0)


@pytest.mark.parametrize("mode", ["in_memory", "streaming"])
def test_training_never_sees_held_out_episodes_and_ope_reads_only_them(ray_session, cartpole, mode):
    holdout = HoldoutConfig(fraction=0.3, seed=1)
    data = OfflineData(cartpole, MARWILConfig(data=DataConfig(mode=mode, holdout=holdout)))
    held = set(holdout_episode_ids(dataset_episode_ids(cartpole), 0.3, 1))
    assert set(data.holdout_ids) == held
    eps = {e.id: e for e in load_episodes(cartpole)}
    train_steps = sum(len(e) for i, e in eps.items() if i not in held)
    if mode == "in_memory":
        rewards = data.load_arrays()[C.REWARDS]
    else:
        rewards = np.concatenate([b[C.REWARDS] for b in data.transitions().iter_batches(batch_format="numpy")])
    assert len(rewards) == train_steps
    ope = load_ope_episodes(cartpole, validate=False, holdout=holdout)
    assert ope.num_episodes == len(held)
    assert sorted(ope.episode_lengths.tolist()) == sorted(len(eps[i]) for i in held)
