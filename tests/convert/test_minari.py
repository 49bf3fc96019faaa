"""Minari in and out, for each of minari's three storages: datasets made with
minari's own API convert exactly, and ours survive a round trip through Minari
(every value of every episode, episode k > 0 included)."""

from __future__ import annotations


import gymnasium as gym
import numpy as np
import pytest

from offlinerl.convert.minari import export_minari, import_minari
from offlinerl.episodes import SingleAgentEpisode, load_episodes, read_info, write_dataset
from tests.convert.helpers import run_cli

pytestmark = pytest.mark.usefixtures("ray_session")

FORMATS = ("hdf5", "arrow", "parquet")
LENGTHS = (1, 4, 9, 2, 13, 6)


@pytest.fixture
def minari_root(tmp_path, monkeypatch):
    root = tmp_path / "minari"
    root.mkdir()
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(root))
    return root


def _dict_obs(rng, n, pos_shape, pos_dtype):
    return {"pos": rng.uniform(-1, 1, size=(n, *pos_shape)).astype(pos_dtype), "flag": rng.integers(0, 4, n)}


def _assert_obs_equal(ours, theirs):
    assert set(ours) == set(theirs)
    for key in ours:
        np.testing.assert_array_equal(ours[key], np.asarray(theirs[key]))
        assert np.asarray(ours[key]).shape == np.asarray(theirs[key]).shape


@pytest.mark.parametrize("data_format", FORMATS)
def test_minari_made_by_minari_converts_exactly(minari_root, tmp_path, data_format):
    import minari
    from minari.data_collector.episode_buffer import EpisodeBuffer

    rng = np.random.default_rng(7)
    obs_space = gym.spaces.Dict({"pos": gym.spaces.Box(-1, 1, (2, 3), np.float64), "flag": gym.spaces.Discrete(4)})
    act_space = gym.spaces.Discrete(3)
    buffers = []
    for k, T in enumerate(LENGTHS):
        term, trunc = [False] * T, [False] * T
        if k % 3 == 0:
            term[-1] = True
        elif k % 3 == 1:
            trunc[-1] = True  # k % 3 == 2: neither flag (cut by the end of the recording)
        buffers.append(EpisodeBuffer(
            observations=_dict_obs(rng, T + 1, (2, 3), np.float64), actions=rng.integers(0, 3, T),
            rewards=rng.normal(size=T).tolist(), terminations=term, truncations=trunc,
            # lists, not 1-d arrays: minari 0.5.4's arrow reader fails on 1-d array infos (empty shape metadata)
            infos={"step": (np.arange(T + 1) + 100 * k).tolist(), "ok": rng.integers(0, 2, T + 1).astype(bool).tolist()},
        ))
    dataset_id = f"tests/dictobs-{data_format}-v0"
    mds = minari.create_dataset_from_buffers(dataset_id, buffers, observation_space=obs_space,
                                             action_space=act_space, data_format=data_format)
    out = tmp_path / "ours"
    if data_format == "hdf5":
        assert run_cli(["convert", "minari", dataset_id, "-o", str(out)]) == 0  # by id, via MINARI_DATASETS_PATH
    else:
        import_minari(minari_root / dataset_id, out)  # by path
    info = read_info(out)
    assert info.observation_space == obs_space and info.action_space == act_space
    assert (info.num_episodes, info.num_steps) == (len(LENGTHS), sum(LENGTHS))
    assert info.provenance["minari_data_format"] == data_format
    episodes = sorted(load_episodes(out), key=lambda e: int(e.id))
    theirs = list(mds.iterate_episodes())
    assert [len(e) for e in episodes] == list(LENGTHS)
    for k, (ep, buf, their) in enumerate(zip(episodes, buffers, theirs)):
        assert ep.id == str(k) == str(their.id)
        for source in (buf, their):  # the data given to minari, and what minari itself reads back
            _assert_obs_equal(ep.obs, source.observations)
            np.testing.assert_array_equal(ep.actions, np.asarray(source.actions))
            np.testing.assert_array_equal(ep.rewards, np.asarray(source.rewards, dtype=np.float32))
        assert ep.terminated == (k % 3 == 0)
        assert ep.truncated == (k % 3 != 0)
        infos = ep.extras["infos"]  # JSON column, parsed on load
        assert infos == [{"step": int(buf.infos["step"][t + 1]), "ok": bool(buf.infos["ok"][t + 1])} for t in range(len(ep))]


def _our_episodes(rng):
    episodes = []
    for k, T in enumerate(LENGTHS):
        episodes.append(SingleAgentEpisode(
            id=f"ep-{k}", obs=_dict_obs(rng, T + 1, (3,), np.float32),
            actions=rng.uniform(-2, 2, size=(T, 2)).astype(np.float32), rewards=rng.normal(size=T),
            terminated=k % 2 == 0, truncated=k % 2 == 1,
        ))
    return episodes


@pytest.mark.parametrize("data_format", FORMATS)
def test_ours_round_trip_through_minari(minari_root, tmp_path, data_format):
    import minari

    rng = np.random.default_rng(11)
    obs_space = gym.spaces.Dict({"pos": gym.spaces.Box(-1, 1, (3,), np.float32), "flag": gym.spaces.Discrete(4)})
    act_space = gym.spaces.Box(-2, 2, (2,), np.float32)
    ours = _our_episodes(rng)
    src = tmp_path / "src"
    write_dataset(ours, src, observation_space=obs_space, action_space=act_space, max_steps_per_row=5)
    dataset_id = f"roundtrip/{data_format}-v0"
    if data_format == "arrow":
        assert run_cli(["export", "minari", str(src), "--dataset-id", dataset_id, "--data-format", "arrow"]) == 0
        assert run_cli(["export", "minari", str(src), "--dataset-id", dataset_id, "--data-format", "arrow"]) == 2
    else:
        export_minari(src, dataset_id, data_format=data_format, root=minari_root)

    mds = minari.load_dataset(dataset_id)
    assert mds.storage.metadata["data_format"] == data_format
    assert mds.total_episodes == len(LENGTHS) and mds.total_steps == sum(LENGTHS)
    assert mds.observation_space == obs_space and mds.action_space == act_space
    for ep, their in zip(ours, mds.iterate_episodes()):
        _assert_obs_equal(ep.obs, their.observations)
        np.testing.assert_array_equal(ep.actions, their.actions)
        np.testing.assert_array_equal(ep.rewards, np.asarray(their.rewards, dtype=np.float32))
        expected_term, expected_trunc = np.zeros(len(ep), bool), np.zeros(len(ep), bool)
        expected_term[-1], expected_trunc[-1] = ep.terminated, ep.truncated
        np.testing.assert_array_equal(their.terminations, expected_term)
        np.testing.assert_array_equal(their.truncations, expected_trunc)

    back = tmp_path / "back"
    import_minari(dataset_id, back)
    again = sorted(load_episodes(back), key=lambda e: int(e.id))
    assert len(again) == len(ours)
    for ep, other in zip(ours, again):
        _assert_obs_equal(ep.obs, other.obs)
        np.testing.assert_array_equal(ep.actions, other.actions)
        np.testing.assert_array_equal(ep.rewards, other.rewards)
        assert (ep.terminated, ep.truncated) == (other.terminated, other.truncated)


@pytest.mark.parametrize("data_format", ("arrow", "parquet"))
def test_long_episodes_stay_aligned(minari_root, tmp_path, data_format):
    """minari 0.5.4's arrow/parquet reader cuts an episode stored in several record batches and shifts every
    later episode; our import reads each episode whole."""
    import minari
    from minari.data_collector.episode_buffer import EpisodeBuffer

    lengths = (40_000, 3, 5)
    buffers = [EpisodeBuffer(observations=(np.arange(T + 1, dtype=np.float32) + 1e5 * k)[:, None],
                             actions=np.arange(T) % 2, rewards=np.full(T, k + 1.0).tolist(),
                             terminations=[False] * (T - 1) + [True], truncations=[False] * T)
               for k, T in enumerate(lengths)]
    dataset_id = f"tests/long-{data_format}-v0"
    mds = minari.create_dataset_from_buffers(dataset_id, buffers, data_format=data_format,
                                             observation_space=gym.spaces.Box(-np.inf, np.inf, (1,), np.float32),
                                             action_space=gym.spaces.Discrete(2))
    import_minari(dataset_id, tmp_path / "ours")
    episodes = sorted(load_episodes(tmp_path / "ours"), key=lambda e: int(e.id))
    assert [len(e) for e in episodes] == list(lengths)
    for k, (ep, buf) in enumerate(zip(episodes, buffers)):
        np.testing.assert_array_equal(ep.obs, buf.observations)
        np.testing.assert_array_equal(ep.actions, buf.actions)
        assert ep.episode_return == (k + 1.0) * lengths[k] and ep.terminated
    assert [len(e) for e in mds.iterate_episodes()] != list(lengths)  # the upstream bug this guards against


def test_rllib_recording_to_minari_keeps_env_spec(shared_fixtures, minari_root, tmp_path):
    """Real data end to end: RLlib episodes -> ours (with --env) -> Minari hdf5 -> minari.load_dataset."""
    import minari

    from offlinerl.convert.rllib.convert import convert_rllib_parquet

    ours = tmp_path / "ours"
    convert_rllib_parquet(shared_fixtures / "rllib_newstack" / "cartpole_episodes", ours, env_id="CartPole-v1")
    assert run_cli(["export", "minari", str(ours), "--dataset-id", "cartpole/rllib-ppo-v0"]) == 0
    mds = minari.load_dataset("cartpole/rllib-ppo-v0")
    assert mds.spec.env_spec.id == "CartPole-v1" and mds.recover_environment().spec.id == "CartPole-v1"
    episodes = load_episodes(ours)
    assert mds.total_episodes == len(episodes) == 90 and mds.total_steps == 2004
    for ep, their in zip(episodes, mds.iterate_episodes()):
        np.testing.assert_array_equal(ep.obs, their.observations)
        np.testing.assert_array_equal(ep.actions, their.actions)
        np.testing.assert_array_equal(ep.rewards, their.rewards)
        assert bool(their.terminations[-1]) == ep.terminated and not their.truncations.any()


def test_a_multi_agent_dataset_is_refused_not_flattened(minari_root, capsys):
    """The shipped spread dataset (3 agents per team episode) came out as 3x the episodes, anonymous and unpaired;
    a Minari dataset holds one agent's episodes, so the export refuses it before anything is written."""
    assert run_cli(["export", "minari", "datasets/spread-mixed", "--dataset-id", "team/spread-v0"]) == 2
    err = capsys.readouterr().err
    assert "datasets/spread-mixed: a multi-agent dataset (rows of 3 agents: agent_0, agent_1, agent_2)" in err
    assert not (minari_root / "team").exists()
