"""filter, sample and split: exact episodes kept, the outputs valid, the lineage chained."""

from __future__ import annotations

import pytest

from offlinerl.data.holdout import dataset_episode_ids, holdout_episode_ids
from offlinerl.data_ops import (DataOpError, FilterConfig, SampleConfig, SplitConfig, filter_dataset, sample_dataset,
                                split_dataset)
from offlinerl.episodes import load_episodes, read_info
from offlinerl.episodes.atomic import OutputExistsError
from offlinerl.episodes.fingerprint import dataset_fingerprint
from offlinerl.episodes.validate import validate_dataset
from tests.data_ops.builders import base, lengths


def _ids(path) -> list[str]:
    return sorted(e.id for e in load_episodes(path))


@pytest.fixture(scope="module")
def data(tmp_path_factory, ray_session):
    return base(tmp_path_factory.mktemp("select") / "base")


def test_top_share_keeps_the_best_episodes_whole(data, tmp_path):
    result = filter_dataset(data, tmp_path / "top", FilterConfig(top="30%"))
    assert _ids(result.path) == ["e7", "e8", "e9"]
    assert result.info.num_episodes == 3 and result.info.num_steps == lengths([7, 8, 9]) == 9
    assert result.report == {"episodes_in": 10, "episodes_out": 3, "steps_in": lengths(range(10)), "steps_out": 9,
                             "return_mean_in": 4.5, "return_mean_out": 8.0}
    assert validate_dataset(result.path).ok


@pytest.mark.parametrize("config, kept", [
    (FilterConfig(min_return=5, max_length=3), [6, 7, 9]),            # lengths 2 + i % 3
    (FilterConfig(where="return >= 4 and first(behavior_level) == 1"), [5, 7, 9]),
    (FilterConfig(where="terminated and max(rewards) < 3 or episode_id == 'e9'"), [0, 2, 9]),
    (FilterConfig(bottom="2", rank_by="length"), [0, 3]),             # length 2: e0, e3, e6, e9; ties by id
    (FilterConfig(episodes=("e1", "e4", "nope"), exclude=("e4",)), [1]),
    (FilterConfig(top="2", rank_by="length * 10 - return"), [2, 5]),   # scores 38 and 35 lead
])
def test_predicates_ranks_and_id_lists(data, tmp_path, config, kept):
    result = filter_dataset(data, tmp_path / "out", config)
    assert _ids(result.path) == sorted(f"e{i}" for i in kept)


def test_lineage_chains_filter_then_sample(data, tmp_path):
    first = filter_dataset(data, tmp_path / "f", FilterConfig(min_return=2))
    second = sample_dataset(first.path, tmp_path / "s", SampleConfig(episodes=3, seed=4))
    lineage = read_info(second.path).lineage
    assert [e["operation"] for e in lineage] == ["write_dataset", "filter", "sample"]
    assert lineage[1]["parents"] == [read_info(data).fingerprint] == [lineage[0]["fingerprint"]]
    assert lineage[2]["parents"] == [lineage[1]["fingerprint"]] == [first.info.fingerprint]
    assert lineage[1]["parameters"] == {"min_return": 2}
    assert lineage[2]["parameters"] == {"episodes": 3, "seed": 4, "bins": 20}
    assert lineage[2]["fingerprint"] == second.info.fingerprint == dataset_fingerprint(second.path)
    assert lineage[2]["tool"].startswith("offlinerl ")


def test_sample_is_seeded(data, tmp_path):
    a = _ids(sample_dataset(data, tmp_path / "a", SampleConfig(episodes=4, seed=1)).path)
    b = _ids(sample_dataset(data, tmp_path / "b", SampleConfig(episodes=4, seed=1)).path)
    c = _ids(sample_dataset(data, tmp_path / "c", SampleConfig(fraction=0.4, seed=2)).path)
    assert a == b and len(a) == len(c) == 4 and a != c


def test_sample_follows_a_target_return_distribution(data, tmp_path):
    target = filter_dataset(data, tmp_path / "t", FilterConfig(min_return=7)).path  # returns 7, 8, 9
    result = sample_dataset(data, tmp_path / "m", SampleConfig(episodes=3, match_returns=str(target), bins=10))
    assert _ids(result.path) == ["e7", "e8", "e9"] and result.report["shortfall"] == 0


def test_split_holdout_is_the_jobs_holdout(data, tmp_path):
    parts = split_dataset(data, tmp_path / "split", SplitConfig(holdout=0.3, seed=5))
    held = holdout_episode_ids(dataset_episode_ids(data), 0.3, 5).tolist()
    assert _ids(parts["holdout"].path) == sorted(held) and len(held) == 3
    assert _ids(parts["train"].path) == sorted(set(f"e{i}" for i in range(10)) - set(held))


def test_split_by_named_fractions(data, tmp_path):
    parts = split_dataset(data, tmp_path / "split", SplitConfig(fractions=(("a", 0.5), ("b", 0.3), ("c", 0.2))))
    ids = {name: _ids(r.path) for name, r in parts.items()}
    assert [len(v) for v in ids.values()] == [5, 3, 2]
    assert sorted(sum(ids.values(), [])) == sorted(f"e{i}" for i in range(10))


def test_split_writes_its_parts_into_an_existing_directory_and_leaves_the_rest(data, tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    parts = split_dataset(data, out, SplitConfig(holdout=0.3, seed=5))
    assert sorted(p.name for p in out.iterdir()) == ["holdout", "notes.txt", "train"]
    assert (out / "notes.txt").read_text() == "keep me" and parts["train"].path == out / "train"
    before = dataset_fingerprint(out / "train")
    with pytest.raises(OutputExistsError, match="train"):  # a part of the same name: replaced with --overwrite only
        split_dataset(data, out, SplitConfig(holdout=0.5, seed=1))
    assert dataset_fingerprint(out / "train") == before


@pytest.mark.parametrize("make, message", [
    (lambda: FilterConfig(), "nothing to filter by"),
    (lambda: FilterConfig(top="10%", bottom="2"), "not both"),
    (lambda: SampleConfig(), "exactly one of --episodes N and --fraction F"),
    (lambda: SplitConfig(fractions=(("a", 0.5), ("b", 0.2))), "sum to 1"),
    (lambda: SplitConfig(fractions=(("../x", 1.0),)), "distinct plain names"),
])
def test_bad_configs_are_refused_by_name(make, message):
    with pytest.raises(DataOpError, match=message):
        make()


@pytest.mark.parametrize("config, message", [
    (FilterConfig(top="ten"), "--top: expected a count"),
    (FilterConfig(min_return=100), "no episode of .* is kept; nothing was written"),
    (FilterConfig(where="__import__('os').system('x')"), "Call is not allowed|only abs"),
    (FilterConfig(where="mean(nope) > 1"), "unknown column 'nope'"),
    (FilterConfig(where="retrun > 1"), "unknown name 'retrun'"),
    (FilterConfig(where="length > 'a'"), "--where: cannot compute .* mixes values of types"),
])
def test_refusals_write_nothing(data, tmp_path, config, message):
    with pytest.raises(ValueError, match=message):
        filter_dataset(data, tmp_path / "out", config)
    assert not (tmp_path / "out").exists() and list(tmp_path.iterdir()) == []
