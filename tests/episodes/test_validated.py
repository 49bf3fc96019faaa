"""Records of validated datasets: a job does not read an unchanged valid dataset twice, and any change,
however small, means validating again."""

from __future__ import annotations

import json
import os

import pyarrow.parquet as pq
import pytest

from offlinerl.episodes import validated
from offlinerl.episodes.validate import InvalidDatasetError, require_valid, validate_dataset
from tests.episodes.test_validate import _craft


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("OFFLINERL_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / "validated"


def test_a_valid_dataset_is_recorded_and_not_read_again_until_a_file_changes(tmp_path, ray_session, cache):
    path = _craft(tmp_path)
    first = require_valid(path)
    assert not first.cached and first.ok
    (record,) = cache.glob("*.json")
    assert json.loads(record.read_text())["report"] == first.to_json()
    second = require_valid(path)
    assert second.cached and second.to_json() == first.to_json()

    # The same bytes written again: the change time moves, so the dataset is validated again.
    name = path / "part-00001.parquet"
    pq.write_table(pq.read_table(name), name)
    assert validated.lookup(path) is None
    assert not require_valid(path).cached

    # A row removed (dataset.json's counts no longer hold): refused, and the records do not help.
    assert require_valid(path).cached
    pq.write_table(pq.read_table(name).slice(1), name)
    with pytest.raises(InvalidDatasetError, match="counts"):
        require_valid(path)


def test_invalid_reports_and_files_changed_during_validation_are_not_recorded(tmp_path, ray_session, cache):
    def bad(ep):
        ep.actions[0] = 99  # outside Discrete(3, start=1)

    path = _craft(tmp_path, bad)
    assert not validate_dataset(path).ok
    assert not cache.exists() or not list(cache.glob("*.json"))
    good = _craft(tmp_path / "g")
    before = validated.current(good)
    os.utime(good / "part-00000.parquet", ns=(1, 1))  # "changed while it was read"
    validated.record(good, {"checks": []}, before)
    assert not cache.exists() or not list(cache.glob("*.json"))


def test_records_can_be_turned_off_and_a_broken_record_is_ignored(tmp_path, ray_session, cache, monkeypatch):
    path = _craft(tmp_path)
    require_valid(path)
    (record,) = cache.glob("*.json")
    record.write_text("{not json")
    assert validated.lookup(path) is None and not require_valid(path).cached  # and it is written again
    assert require_valid(path).cached
    monkeypatch.setenv("OFFLINERL_CACHE_DIR", "off")
    assert validated.cache_dir() is None and validated.lookup(path) is None
    assert not require_valid(path).cached

