"""``offlinerl validate`` on crafted broken datasets: one test per check, each asserting the exit code,
the check that fails and where (file, row within the file, episode id)."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from offlinerl.cli import main
from offlinerl.episodes import INFO_FILE
from tests.episodes.builders import make_episode, write_raw

OBS = gym.spaces.Box(np.array([-1.0, -np.inf], np.float32), np.array([1.0, np.inf], np.float32), dtype=np.float32)
ACT = gym.spaces.Discrete(3, start=1)
BAD = 4  # ep-4 is row 2 of part-00001.parquet


def _episodes(act_space=ACT, n=6):
    return [make_episode(i, OBS, act_space, steps=3 + i % 3, terminated=i % 2 == 0) for i in range(n)]


def _craft(tmp_path, mutate=None, act_space=ACT, **info):
    eps = _episodes(act_space)
    if mutate:
        mutate(eps[BAD])
    return write_raw(tmp_path / "ds", [eps[:3], eps[3:]], OBS, act_space, **info)


def _rewrite(path, fn, name="part-00001.parquet"):
    pq.write_table(fn(pq.read_table(path / name)), path / name)


def _truncate(table, column, row, keep):
    """Shorten the list in ``column`` at ``row`` to its first ``keep`` entries."""
    values = table.column(column).to_pylist()
    values[row] = values[row][:keep]
    i = table.schema.get_field_index(column)
    return table.set_column(i, table.schema.field(i), pa.array(values, type=table.schema.field(i).type))


def _validate(capsys, path, *args):
    code = main(["validate", str(path), *args])
    return code, capsys.readouterr().out


def _assert_flagged(out, check, where, tag="FAIL"):
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith(f"[{tag}] {check} "))
    examples = []
    for line in lines[start + 1:]:
        if not line.startswith("           "):
            break
        examples.append(line)
    assert any(where in e for e in examples), f"{where!r} not among the {check} examples:\n{out}"
    return examples


def test_valid_dataset_passes_every_check(tmp_path, ray_session, capsys):
    path = _craft(tmp_path)
    code, out = _validate(capsys, path)
    assert code == 0, out
    assert out.count("[ok  ]") == 11 and "VALID (exit code 0)" in out
    code, out = _validate(capsys, path, "--json")
    report = json.loads(out)
    assert code == 0 and report["valid"] and report["num_rows"] == 6 and report["num_files"] == 2
    assert {c["name"]: c["status"] for c in report["checks"]} == {c["name"]: "passed" for c in report["checks"]}


# 1. dataset.json ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("damage,message", [
    (lambda p: (p / INFO_FILE).unlink(), "missing"),
    (lambda p: (p / INFO_FILE).write_text("{not json"), "does not parse as JSON"),
    (lambda p: _edit_info(p, format_version=7), "unknown format_version 7"),
    (lambda p: _edit_info(p, action_space={"type": "Discrete"}), "invalid Discrete space"),
    (lambda p: _edit_info(p, observation_space={"type": "Sphere"}), "unknown space type 'Sphere'"),
])
def test_dataset_json(tmp_path, ray_session, capsys, damage, message):
    path = _craft(tmp_path)
    damage(path)
    code, out = _validate(capsys, path)
    assert code == 1, out
    _assert_flagged(out, "dataset_json", message)
    assert "[skip] schema" in out  # nothing else can be judged without the spaces


def _edit_info(path, **changes):
    data = json.loads((path / INFO_FILE).read_text())
    data.update(changes)
    (path / INFO_FILE).write_text(json.dumps(data))


# 2. schema ---------------------------------------------------------------------------------------------

def _cast_obs_to_double(t):
    i = t.schema.get_field_index("obs")
    return t.set_column(i, "obs", t.column("obs").cast(pa.list_(pa.list_(pa.float64(), 2))))


def _obs_size_3(t):
    i = t.schema.get_field_index("obs")
    wide = [[v + [0.0] for v in row] for row in t.column("obs").to_pylist()]
    return t.set_column(i, "obs", pa.array(wide, type=pa.list_(pa.list_(pa.float32(), 3))))


@pytest.mark.parametrize("change,message", [
    (_cast_obs_to_double, "column 'obs': expected list<fixed_size_list<float>[2]>, got list<fixed_size_list<double>[2]>"),
    (_obs_size_3, "got list<fixed_size_list<float>[3]>"),
    (lambda t: t.drop_columns(["truncated"]), "required column 'truncated' is missing"),
    (lambda t: t.append_column("score", pa.array([1.0] * t.num_rows)), "extra column 'score' is not a per-step list"),
    (lambda t: t.set_column(t.schema.get_field_index("actions"), "actions",
                            t.column("actions").cast(pa.list_(pa.int32()))), "column 'actions': expected list<int64>, got list<int32>"),
])
def test_schema(tmp_path, ray_session, capsys, change, message):
    path = _craft(tmp_path)
    _rewrite(path, change)
    code, out = _validate(capsys, path)
    assert code == 1, out
    examples = _assert_flagged(out, "schema", "part-00001.parquet")
    assert any(message in e for e in examples), out
    assert "part-00000.parquet" not in "".join(examples)


def test_schema_declared_extra_column_missing(tmp_path, ray_session, capsys):
    path = _craft(tmp_path)
    _edit_info(path, extra_columns={"action_logp": {"dtype": "float32", "shape": []}})
    code, out = _validate(capsys, path)
    assert code == 1
    _assert_flagged(out, "schema", "extra column declared in dataset.json 'action_logp' is missing")


# 3. lengths --------------------------------------------------------------------------------------------

def _empty_row(t):
    for column, keep in (("obs", 1), ("actions", 0), ("rewards", 0)):
        t = _truncate(t, column, 1, keep)
    return t


@pytest.mark.parametrize("change,message", [
    (lambda t: _truncate(t, "obs", 1, 7), "len(obs) = 7, expected T+1 = 8"),
    (lambda t: _truncate(t, "rewards", 1, 5), "len(rewards) = 5, expected T = 7"),
    (_empty_row, "no steps"),
    (lambda t: t.set_column(t.schema.get_field_index("obs"), "obs",
                            pa.array([r if i != 1 else None for i, r in enumerate(t.column("obs").to_pylist())],
                                     type=t.schema.field("obs").type)), "obs is null"),
])
def test_lengths(tmp_path, ray_session, capsys, change, message):
    path = _craft(tmp_path, mutate=lambda ep: _lengthen(ep, 7))
    _rewrite(path, change)
    code, out = _validate(capsys, path)
    assert code == 1, out
    examples = _assert_flagged(out, "lengths", "part-00001.parquet row 2 episode 'ep-4'")
    assert message in examples[0]


def _lengthen(ep, steps):
    fresh = make_episode(4, OBS, ACT, steps=steps, terminated=ep.terminated)
    ep.obs, ep.actions, ep.rewards = fresh.obs, fresh.actions, fresh.rewards


def test_lengths_extra_column(tmp_path, ray_session, capsys):
    eps = _episodes()
    for ep in eps:
        ep.extras = {"action_logp": np.zeros(len(ep), np.float32)}
    path = write_raw(tmp_path / "ds", [eps[:3], eps[3:]], OBS, ACT)
    _rewrite(path, lambda t: _truncate(t, "action_logp", 1, 1))
    code, out = _validate(capsys, path)
    assert code == 1
    examples = _assert_flagged(out, "lengths", "part-00001.parquet row 2 episode 'ep-4'")
    assert "len(action_logp) = 1, expected T = 4" in examples[0]


# 4. flags ----------------------------------------------------------------------------------------------

def test_flags(tmp_path, ray_session, capsys):
    def both(ep):
        ep.terminated = ep.truncated = True

    code, out = _validate(capsys, _craft(tmp_path, mutate=both))
    assert code == 1
    _assert_flagged(out, "flags", "part-00001.parquet row 2 episode 'ep-4': terminated and truncated are both true")


# 5. finite ---------------------------------------------------------------------------------------------

def _set(attr, index, value):
    def mutate(ep):
        getattr(ep, attr)[index] = value
    return mutate


@pytest.mark.parametrize("mutate,message", [
    (_set("rewards", 2, np.nan), "rewards[2] = nan"),
    (_set("rewards", 0, -np.inf), "rewards[0] = -inf"),
    (_set("obs", (3, 1), np.nan), "obs[3][1] = nan"),
    (_set("obs", (1, 0), np.inf), "obs[1][0] = inf"),  # dim 0 is bounded: inf is an error there
])
def test_finite(tmp_path, ray_session, capsys, mutate, message):
    code, out = _validate(capsys, _craft(tmp_path, mutate=mutate))
    assert code == 1, out
    examples = _assert_flagged(out, "finite", "part-00001.parquet row 2 episode 'ep-4'")
    assert message in examples[0]


def test_finite_allows_inf_where_the_bound_is_infinite(tmp_path, ray_session, capsys):
    code, out = _validate(capsys, _craft(tmp_path, mutate=_set("obs", (1, 1), -np.inf)))
    assert code == 0, out


# 6. actions (error) and observations (warning) inside their spaces ---------------------------------------

@pytest.mark.parametrize("space,value,message", [
    (gym.spaces.Discrete(3, start=1), 0, "actions[2] = 0, allowed 1..3 (Discrete n=3, start=1)"),
    (gym.spaces.Discrete(3, start=1), 4, "actions[2] = 4, allowed 1..3"),
    (gym.spaces.MultiDiscrete([3, 4], start=[0, 2]), [0, 6], "actions[2][1] = 6, allowed 2..5 (MultiDiscrete)"),
    (gym.spaces.MultiBinary(3), [0, 2, 1], "actions[2][1] = 2, allowed 0 or 1"),
    (gym.spaces.Box(-1.0, 1.0, (2, 2), np.float32), [[0, 0], [0, 1.5]], "actions[2][1, 1] = 1.5, allowed [-1.0, 1.0]"),
    (gym.spaces.Box(-1.0, 1.0, (2,), np.float32), [np.nan, 0], "actions[2][0] = nan"),
])
def test_actions_outside_space(tmp_path, ray_session, capsys, space, value, message):
    code, out = _validate(capsys, _craft(tmp_path, mutate=_set("actions", 2, value), act_space=space))
    assert code == 1, out
    examples = _assert_flagged(out, "actions", "part-00001.parquet row 2 episode 'ep-4'")
    assert message in examples[0]


def test_observations_outside_space_is_a_warning(tmp_path, ray_session, capsys):
    code, out = _validate(capsys, _craft(tmp_path, mutate=_set("obs", (2, 0), 1.25)))
    assert code == 0, out
    examples = _assert_flagged(out, "observations", "part-00001.parquet row 2 episode 'ep-4'", tag="WARN")
    assert "obs[2][0] = 1.25, allowed [-1.0, 1.0]" in examples[0]
    assert "VALID with 1 warning(s)" in out


def _nested_value(column, t, path, value):
    def mutate(ep):
        leaf = getattr(ep, column)
        for key in path[:-1]:
            leaf = leaf[key]
        leaf[path[-1]][t] = value
    return mutate


@pytest.mark.parametrize("obs_name,act_name,mutate,check,message", [
    ("dict_nested", "dict_nested", _nested_value("actions", 1, ("mode", 0), 0), "actions",
     "actions[1].mode.0 = 0, allowed 1..3"),
    ("tuple_nested", "multi_binary", _nested_value("obs", 2, (0,), np.nan), "finite", "obs[2].0[0] = nan"),
    ("image_u8", "multi_binary", lambda ep: None, None, None),
])
def test_nested_spaces_name_the_leaf(tmp_path, ray_session, capsys, obs_name, act_name, mutate, check, message):
    from tests.episodes.builders import SPACES

    obs_space, act_space = SPACES[obs_name], SPACES[act_name]
    eps = [make_episode(i, obs_space, act_space, steps=4) for i in range(6)]
    mutate(eps[BAD])
    path = write_raw(tmp_path / "ds", [eps[:3], eps[3:]], obs_space, act_space)
    code, out = _validate(capsys, path)
    if check is None:
        assert code == 0, out
        return
    assert code == 1, out
    examples = _assert_flagged(out, check, "part-00001.parquet row 2 episode 'ep-4'")
    assert message in examples[0]


# 7. episode ids and chunks -----------------------------------------------------------------------------

def test_episode_ids_unique(tmp_path, ray_session, capsys):
    def rename(ep):
        ep.id = "ep-1"

    code, out = _validate(capsys, _craft(tmp_path, mutate=rename, num_episodes=5))
    assert code == 1
    examples = _assert_flagged(out, "episode_ids", "part-00001.parquet row 2 episode 'ep-1'")
    assert "also at part-00000.parquet row 2" in examples[0]


@pytest.mark.parametrize("module_id,message", [
    ("pol.c", "module_id 'pol.c': a module id cannot contain '.', got 'pol.c'"),
    ("", "module_id '': a module id must be a non-empty string, got ''"),
])
def test_module_ids_name_valid_modules(tmp_path, ray_session, capsys, module_id, message):
    """A dotted module id validated, then failed in training (torch refuses the module name): named here."""
    def rename(ep):
        ep.agent_id, ep.module_id = "a", module_id

    code, out = _validate(capsys, _craft(tmp_path, mutate=rename))
    assert code == 1, out
    examples = _assert_flagged(out, "episode_ids", "part-00001.parquet row 2 episode 'ep-4'")
    assert examples == [f"           part-00001.parquet row 2 episode 'ep-4': {message} (training would fail on it)"]
    assert "[FAIL] episode_ids   1 offending row " in out and "INVALID: episode_ids failed" in out


def test_a_dotted_agent_id_is_valid_data_and_training_without_a_mapping_names_it(tmp_path, ray_session, capsys):
    """An agent id is no module id until a job maps it: the data is valid; a job without a policy_mapping that
    would train the module 'team.0' is refused in one line (a KeyError from torch's module build before)."""
    from offlinerl.algorithms.registry import get_algorithm
    from offlinerl.config_io import ConfigError
    from offlinerl.data import OfflineData

    def rename(ep):
        ep.agent_id = "team.0"

    path = _craft(tmp_path, mutate=rename)
    code, out = _validate(capsys, path)
    assert code == 0, out
    with pytest.raises(ConfigError, match=r"rows train the module 'team.0' \(their module_id, else agent_id\), and a "
                                          r"module id cannot contain '.', got 'team.0'; map the agents"):
        OfflineData(path, get_algorithm("bc").config_cls(), use_ray=False)


def _chunked_dataset(tmp_path, change):
    long_ep = make_episode(9, OBS, ACT, steps=10, terminated=True)
    chunks = long_ep.split(4)  # chunk_index 0, 1, 2 at t_start 0, 4, 8
    chunks = change(chunks)
    return write_raw(tmp_path / "ds", [_episodes()[:3], chunks], OBS, ACT)


def _with(chunk, **kw):
    from dataclasses import replace
    return replace(chunk, **kw)


@pytest.mark.parametrize("change,where,message", [
    (lambda c: [c[0], c[2]], "row 2 episode 'ep-9'", "chunk_index 2, expected 1 (chunks present: [0, 2])"),
    (lambda c: [c[1], c[2]], "row 1 episode 'ep-9'", "chunk_index 1, expected 0"),
    (lambda c: [c[0], c[1], _with(c[2], t_start=9)], "row 3 episode 'ep-9'", "t_start 9, expected 8"),
    (lambda c: [_with(c[0], truncated=True), c[1], c[2]], "row 1 episode 'ep-9'",
     "chunk 0 is truncated but chunk 2 follows"),
])
def test_chunks_contiguous(tmp_path, ray_session, capsys, change, where, message):
    code, out = _validate(capsys, _chunked_dataset(tmp_path, change))
    assert code == 1, out
    examples = _assert_flagged(out, "chunks", f"part-00001.parquet {where}")
    assert message in examples[0]


# 8. counts ---------------------------------------------------------------------------------------------

def test_counts(tmp_path, ray_session, capsys):
    code, out = _validate(capsys, _craft(tmp_path, num_steps=999, num_episodes=7))
    assert code == 1
    examples = _assert_flagged(out, "counts", "dataset.json: num_episodes: dataset.json says 7, the data has 6")
    assert any("num_steps: dataset.json says 999" in e for e in examples)
    assert "2 offending fields" in out
    assert "[FAIL] counts        2 offending fields" in out


# unreadable input: exit 2, named, no traceback ---------------------------------------------------------

@pytest.mark.parametrize("damage", ["truncated", "garbage", "pages"])
def test_corrupt_parquet_is_named(tmp_path, ray_session, capsys, damage):
    path = _craft(tmp_path)
    f = path / "part-00001.parquet"
    data = f.read_bytes()
    if damage == "truncated":
        f.write_bytes(data[: len(data) // 2])
    elif damage == "garbage":
        (path / "part-00002.parquet").write_bytes(b"this is not parquet at all " * 20)
        f = path / "part-00002.parquet"
    else:  # footer intact, data pages overwritten: only the read task finds out
        f.write_bytes(data[:4] + bytes(range(256)) * 3 + data[4 + 768:])
    code, out = _validate(capsys, path)
    assert code == 2, out
    examples = _assert_flagged(out, "files", f.name)
    assert "cannot be read as parquet" in examples[0]
    assert "NOT READABLE" in out and "Traceback" not in out
    assert "part-00000.parquet" not in "".join(examples)


def test_not_a_directory(tmp_path, ray_session, capsys):
    code, out = _validate(capsys, tmp_path / "nope")
    assert code == 2
    _assert_flagged(out, "dataset_json", "does not exist")
    (tmp_path / "file").write_text("x")
    code, out = _validate(capsys, tmp_path / "file")
    assert code == 2
    _assert_flagged(out, "dataset_json", "not a directory")


def test_a_dataset_of_no_episodes_is_not_valid(tmp_path, ray_session, capsys):
    """An empty parquet file and counts of 0 agree with each other, but there is nothing to train on."""
    path = write_raw(tmp_path / "ds", [[]], OBS, ACT)
    code, out = _validate(capsys, path)
    assert code == 1, out
    _assert_flagged(out, "counts", "the dataset holds no episodes (0 rows)")


# row identification, JSON form, example limit ----------------------------------------------------------

@pytest.mark.parametrize("row_group_size", [8, 100])  # many row groups; one row group read in several batches
def test_row_index_within_file(tmp_path, ray_session, capsys, row_group_size):
    eps = [make_episode(i, OBS, ACT, steps=1) for i in range(70)]
    eps[66].rewards[0] = np.nan
    path = write_raw(tmp_path / "ds", [eps[:2], eps[2:]], OBS, ACT, row_group_size=row_group_size)
    code, out = _validate(capsys, path)
    assert code == 1
    _assert_flagged(out, "finite", "part-00001.parquet row 65 episode 'ep-66': rewards[0] = nan")


def test_json_report_and_max_examples(tmp_path, ray_session, capsys):
    eps = _episodes()
    for ep in eps[1:4]:
        ep.rewards[0] = np.inf
    path = write_raw(tmp_path / "ds", [eps[:3], eps[3:]], OBS, ACT)
    code, out = _validate(capsys, path, "--json", "--max-examples", "2")
    report = json.loads(out)
    finite = next(c for c in report["checks"] if c["name"] == "finite")
    assert code == 1 and report["exit_code"] == 1 and not report["valid"]
    assert finite["status"] == "failed" and finite["count"] == 3
    assert finite["examples"] == [
        {"file": "part-00000.parquet", "row": 2, "episode_id": "ep-1", "detail": "rewards[0] = inf", "value": "inf"},
        {"file": "part-00000.parquet", "row": 3, "episode_id": "ep-2", "detail": "rewards[0] = inf", "value": "inf"},
    ]
    code, out = _validate(capsys, path, "--max-examples", "1")
    assert "... and 2 more" in out


def test_usage_error_exit_code(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["validate"])
    assert exc.value.code == 2
