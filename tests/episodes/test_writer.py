"""The writer is atomic (nothing left behind on failure), refuses to overwrite, and chunks long episodes."""

from __future__ import annotations

import numpy as np
import pytest

from offlinerl.episodes import OutputExistsError, SingleAgentEpisode, batch_equal, load_episodes, read_info, write_dataset
from offlinerl.episodes.validate import validate_dataset
from tests.episodes.builders import SPACES, make_episode

OBS, ACT = SPACES["dict_nested"], SPACES["box_f32"]


def _stream(n: int, broken_at: int | None = None):
    for i in range(n):
        ep = make_episode(i, OBS, ACT, steps=4)
        if i == broken_at:
            ep.rewards = ep.rewards[:-1]  # T from rewards, but actions and obs still have one more
        yield ep


def test_failure_midway_leaves_nothing(tmp_path):
    out = tmp_path / "ds"
    with pytest.raises(ValueError, match="ep-7"):
        # rows_per_file=2: three files are already written when episode 7 turns out inconsistent
        write_dataset(_stream(10, broken_at=7), out, observation_space=OBS, action_space=ACT, rows_per_file=2)
    assert not out.exists()
    assert list(tmp_path.iterdir()) == []  # no temporary directory either


def test_refuses_to_overwrite_unless_asked(tmp_path):
    out = tmp_path / "ds"
    write_dataset(_stream(3), out, observation_space=OBS, action_space=ACT)
    before = sorted(p.name for p in out.iterdir())
    with pytest.raises(OutputExistsError, match="overwrite"):
        write_dataset(_stream(5), out, observation_space=OBS, action_space=ACT)
    assert sorted(p.name for p in out.iterdir()) == before and read_info(out).num_episodes == 3

    write_dataset(_stream(5), out, observation_space=OBS, action_space=ACT, overwrite=True)
    assert read_info(out).num_episodes == 5 and len(load_episodes(out)) == 5
    assert [p.name for p in tmp_path.iterdir()] == ["ds"]  # the replaced copy is gone


def test_failed_overwrite_keeps_the_old_dataset(tmp_path):
    out = tmp_path / "ds"
    write_dataset(_stream(3), out, observation_space=OBS, action_space=ACT)
    with pytest.raises(ValueError):
        write_dataset(_stream(6, broken_at=4), out, observation_space=OBS, action_space=ACT, overwrite=True)
    assert read_info(out).num_episodes == 3 and len(load_episodes(out)) == 3
    assert [p.name for p in tmp_path.iterdir()] == ["ds"]


def test_long_episodes_are_chunked_and_reassemble(tmp_path, ray_session):
    long_ep = make_episode(0, OBS, ACT, steps=25, truncated=True, t_start=100)
    long_ep.extras = {"action_logp": np.linspace(0, 1, 25, dtype=np.float32), "infos": [{"t": t} for t in range(25)]}
    short = make_episode(1, OBS, ACT, steps=3, terminated=True)
    short.extras = {"action_logp": np.zeros(3, np.float32), "infos": [{}] * 3}
    info = write_dataset([long_ep, short], tmp_path / "ds", observation_space=OBS, action_space=ACT,
                         max_steps_per_row=10)
    assert (info.num_episodes, info.num_rows, info.num_steps, info.max_steps_per_row) == (2, 4, 28, 10)

    chunks = [e for e in load_episodes(tmp_path / "ds", reassemble=False) if e.id == "ep-0"]
    assert [(c.chunk_index, c.t_start, len(c), c.terminated, c.truncated) for c in chunks] == [
        (0, 100, 10, False, False), (1, 110, 10, False, False), (2, 120, 5, False, True)]
    for a, b in zip(chunks, chunks[1:]):  # the last observation of a chunk is the first of the next
        assert batch_equal(_row(a.obs, len(a)), _row(b.obs, 0))

    whole = {e.id: e for e in load_episodes(tmp_path / "ds")}
    for want in (long_ep, short):
        got = whole[want.id]
        assert (got.chunk_index, got.t_start, got.terminated, got.truncated) == (
            0, want.t_start, want.terminated, want.truncated)
        assert batch_equal(got.obs, want.obs) and batch_equal(got.actions, want.actions)
        assert np.array_equal(got.rewards, want.rewards)
        assert np.array_equal(got.extras["action_logp"], want.extras["action_logp"])
        assert got.extras["infos"] == want.extras["infos"]
    assert validate_dataset(tmp_path / "ds").exit_code == 0


def _row(batch, i):
    from offlinerl.episodes import batch_slice

    return batch_slice(batch, i, i + 1)


def test_concat_refuses_a_gap():
    ep = make_episode(0, OBS, ACT, steps=6)
    a, b, c = ep.split(2)
    with pytest.raises(ValueError, match="chunk 2 starts at t=4, expected 2"):
        SingleAgentEpisode.concat([a, c])
    assert np.array_equal(SingleAgentEpisode.concat([c, a, b]).rewards, ep.rewards)


def test_dataset_json_records_the_module_ids_and_validate_checks_them(tmp_path, ray_session):
    """Both write paths (episodes, a Ray Dataset of rows) record the sorted modules (module_id, else agent_id,
    else default_policy) so a job reads them from dataset.json instead of every file; a wrong list is a counts
    error; a dataset.json from before the field (no key) still validates and OfflineData scans its rows."""
    import json

    import ray.data

    from offlinerl.algorithms.bc import BCConfig
    from offlinerl.data.offline_data import OfflineData
    from offlinerl.episodes import episodes_to_table

    single = write_dataset([make_episode(i, OBS, ACT, steps=3) for i in range(2)], tmp_path / "single",
                           observation_space=OBS, action_space=ACT)
    assert single.module_ids == ["default_policy"] == read_info(tmp_path / "single").module_ids
    eps = [make_episode(0, OBS, ACT, steps=3, agent_id="walker"), make_episode(1, OBS, ACT, steps=2, agent_id="a1",
                                                                               module_id="shared"),
           make_episode(2, OBS, ACT, steps=2, agent_id="a2", module_id="shared"), make_episode(3, OBS, ACT, steps=4)]
    multi = write_dataset(eps, tmp_path / "multi", observation_space=OBS, action_space=ACT)
    assert multi.module_ids == ["default_policy", "shared", "walker"]
    rows = ray.data.from_arrow(episodes_to_table(eps, OBS, ACT, {}))
    assert write_dataset(rows, tmp_path / "rows", observation_space=OBS, action_space=ACT).module_ids == multi.module_ids
    assert validate_dataset(tmp_path / "multi").exit_code == 0
    assert OfflineData(tmp_path / "multi", BCConfig()).module_ids == ["default_policy", "shared", "walker"]

    path = tmp_path / "multi" / "dataset.json"
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "module_ids": ["shared", "walker"]}))
    report = validate_dataset(tmp_path / "multi")
    assert report.exit_code == 1 and "module_ids: dataset.json says ['shared', 'walker']" in report.format()
    del data["module_ids"]  # written before the field existed
    path.write_text(json.dumps(data))
    assert read_info(tmp_path / "multi").module_ids is None and validate_dataset(tmp_path / "multi").exit_code == 0
    assert OfflineData(tmp_path / "multi", BCConfig()).module_ids == ["default_policy", "shared", "walker"]
