"""Content fingerprints: the same rows give the same fingerprint however they are filed; any value changes it;
datasets written before fingerprints still load."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from offlinerl.episodes import DatasetInfoError, read_info, write_dataset
from offlinerl.episodes.fingerprint import dataset_fingerprint, table_digests
from offlinerl.episodes.episode import episodes_to_table
from offlinerl.episodes.validate import validate_dataset
from tests.conftest import DATASETS
from tests.data_ops.builders import ACT, OBS, base, episode, write
from tests.episodes.builders import SPACES, make_episode


def test_same_rows_in_any_number_of_files_and_any_order_give_one_fingerprint(tmp_path, ray_session):
    one = base(tmp_path / "one", rows_per_file=100)
    many = base(tmp_path / "many", rows_per_file=1)
    reversed_ = write(tmp_path / "rev", [episode(i) for i in reversed(range(10))], rows_per_file=4)
    fps = {read_info(p).fingerprint for p in (one, many, reversed_)}
    assert len(fps) == 1 and None not in fps
    # The Ray path (files hashed after writing) agrees with the streamed one (tables hashed while writing).
    assert dataset_fingerprint(many) == read_info(one).fingerprint
    assert validate_dataset(many).ok


@pytest.mark.parametrize("change", ["reward", "episode_id", "flag", "obs", "extra"])
def test_any_changed_value_changes_the_fingerprint(change):
    eps = [episode(i) for i in range(4)]
    before = table_digests(episodes_to_table(eps, OBS, ACT, None))
    e = eps[2]
    if change == "reward":
        rewards = e.rewards.copy()
        rewards[1] = np.nextafter(rewards[1], np.float32(1))
        eps[2] = replace(e, rewards=rewards)
    elif change == "episode_id":
        eps[2] = replace(e, id="e2x")
    elif change == "flag":
        eps[2] = replace(e, terminated=False, truncated=True)
    elif change == "obs":
        obs = e.obs.copy()
        obs[-1, 0] += 1
        eps[2] = replace(e, obs=obs)
    else:
        eps[2] = replace(e, extras={"behavior_level": e.extras["behavior_level"] + 1})
    after = table_digests(episodes_to_table(eps, OBS, ACT, None))
    assert after[1] == before[1] == 4 and after[0] != before[0]


@pytest.mark.parametrize("name", sorted(SPACES))
def test_every_space_kind_is_hashed_and_one_step_matters(tmp_path, name):
    space = SPACES[name]
    eps = [make_episode(i, space, ACT, steps=3) for i in range(3)]
    a = write_dataset(eps, tmp_path / "a", observation_space=space, action_space=ACT)
    b = write_dataset(eps[::-1], tmp_path / "b", observation_space=space, action_space=ACT, rows_per_file=1)
    c = write_dataset(eps[:2], tmp_path / "c", observation_space=space, action_space=ACT)
    assert a.fingerprint == b.fingerprint != c.fingerprint


def test_every_written_dataset_records_a_lineage_root(tmp_path):
    info = read_info(base(tmp_path / "d", provenance={"collector": "tests"}))
    assert [e["operation"] for e in info.lineage] == ["tests"]
    assert info.lineage[0]["fingerprint"] == info.fingerprint and info.lineage[0]["parents"] == []


def test_datasets_without_a_fingerprint_still_load():
    info = read_info(DATASETS / "cartpole-mixed")  # shipped before fingerprints (tests/test_shipped_datasets validates it)
    assert info.fingerprint is None and info.lineage == []


def test_a_malformed_fingerprint_is_one_clear_error(tmp_path):
    path = base(tmp_path / "d", n=2)
    meta = json.loads((path / "dataset.json").read_text())
    meta["fingerprint"] = "not-a-hash"
    (path / "dataset.json").write_text(json.dumps(meta))
    with pytest.raises(DatasetInfoError, match="fingerprint must be 64 hex digits"):
        read_info(path)
    meta["fingerprint"], meta["lineage"] = None, {"operation": "x"}
    (path / "dataset.json").write_text(json.dumps(meta))
    with pytest.raises(DatasetInfoError, match="lineage must be a list of objects"):
        read_info(path)


def test_the_validation_record_vouches_for_the_recorded_fingerprint(tmp_path, monkeypatch):
    from offlinerl.episodes import validated

    monkeypatch.setenv("OFFLINERL_CACHE_DIR", str(tmp_path / "cache"))
    path = base(tmp_path / "d", n=2)
    fp = read_info(path).fingerprint
    validated.record(path, {"ok": True}, validated.current(path))
    stored = json.loads(next((tmp_path / "cache" / "validated").glob("*.json")).read_text())
    assert stored["fingerprint"] == fp and validated.lookup(path) == {"ok": True}
    # A record of other content under the same key (a forged or stale record) is not used.
    record = next((tmp_path / "cache" / "validated").glob("*.json"))
    record.write_text(json.dumps({**stored, "fingerprint": "0" * 64}))
    assert validated.lookup(path) is None


def test_an_operation_names_rows_that_no_longer_match_their_fingerprint(tmp_path, ray_session, caplog):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from offlinerl.data_ops import FilterConfig, filter_dataset

    path = base(tmp_path / "d", n=4, rows_per_file=10)
    recorded = read_info(path).fingerprint
    part = path / "part-00000.parquet"
    table = pq.read_table(part)
    rewards = table.column("rewards").to_pylist()
    rewards[1][0] += 1.0
    pq.write_table(table.set_column(table.schema.get_field_index("rewards"), "rewards",
                                    pa.array(rewards, table.schema.field("rewards").type)), part)
    with caplog.at_level("WARNING", logger="offlinerl"):
        result = filter_dataset(path, tmp_path / "f", FilterConfig(min_return=0))
    assert "do not match the fingerprint dataset.json records" in caplog.text
    parent = result.info.lineage[-1]["parents"][0]
    assert parent != recorded and parent == dataset_fingerprint(path)
