"""``offlinerl convert rllib-parquet`` on RLlib's own recordings (exact against
expected.json), on re-written and corrupted recordings, and on chunked msgpack episodes."""

from __future__ import annotations

import json
import pickle
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from offlinerl.convert.packing import unpack
from offlinerl.convert.rllib.msgpack import chunk_from_state, decode_state
from offlinerl.convert.quarantine import QUARANTINE_FILE
from offlinerl.convert.rllib import convert_rllib_parquet
from offlinerl.episodes import load_episodes, read_info
from offlinerl.episodes.validate import validate_dataset
from tests.convert.helpers import pack_state, raw_state, run_cli

pytestmark = pytest.mark.usefixtures("ray_session")


def _files(folder: Path) -> list[Path]:
    return sorted(folder.glob("**/*.parquet"))


def _check_expected(out: Path, expected: dict) -> list:
    report = validate_dataset(out)
    assert report.ok and report.exit_code == 0, report.format()
    episodes = load_episodes(out)
    by_id = {ep.id: ep for ep in episodes}
    assert len(episodes) == expected["num_episodes"] == len(by_id)
    assert sum(len(ep) for ep in episodes) == expected["num_steps"]
    for exp in expected["episodes"]:
        ep = by_id[exp["eps_id"]]
        assert len(ep) == exp["length"]
        assert np.float32(ep.episode_return) == np.float32(exp["return"])
        assert ep.terminated == exp["terminated"]
        # an episode cut by the end of the recording is stored as truncated
        assert ep.truncated == (exp["truncated"] or not exp["complete"])
    info = read_info(out)
    assert (info.num_episodes, info.num_steps) == (expected["num_episodes"], expected["num_steps"])
    return episodes


def test_columns_fixture_exact(shared_fixtures, tmp_path):
    src = shared_fixtures / "rllib_newstack" / "cartpole_columns"
    expected = json.loads((src / "expected.json").read_text())
    out = tmp_path / "out"
    # rows of at most 16 steps: long episodes are split into chunks (and joined again on load)
    assert run_cli(["convert", "rllib-parquet", str(src), "-o", str(out), "--env", "CartPole-v1",
                    "--max-steps-per-row", "16"]) == 0
    episodes = _check_expected(out, expected)
    info = read_info(out)
    report = info.provenance["report"]
    assert info.max_steps_per_row == 16 and info.num_rows == sum(-(-n // 16) for n in expected["episode_lengths"])
    assert report["records_read"] == 2000 and report["records_quarantined"] == 0
    assert report["truncated_by_recording"] == expected["num_incomplete"] == 1
    assert report["duplicate_records"] == 0
    assert info.env_id == "CartPole-v1" and info.observation_space.shape == (4,)
    assert info.extra_columns == {
        "action_dist_inputs": {"dtype": "float32", "shape": [2]},
        "action_logp": {"dtype": "float32", "shape": []},
        "weights_seq_no": {"dtype": "int64", "shape": []},
    }
    # every value of the rows, in (file, row) order, lands where it belongs (also across file boundaries)
    raw = pa.concat_tables([pq.read_table(f) for f in _files(src)]).to_pylist()
    by_id = {ep.id: ep for ep in episodes}
    position: dict[str, int] = {}
    for row in raw:
        ep = by_id[row["eps_id"]]
        t = position.get(row["eps_id"], 0)
        position[row["eps_id"]] = t + 1
        np.testing.assert_array_equal(ep.obs[t], unpack(row["obs"]))
        np.testing.assert_array_equal(ep.obs[t + 1], unpack(row["new_obs"]))
        assert ep.actions[t] == row["actions"] and ep.rewards[t] == np.float32(row["rewards"])
        np.testing.assert_array_equal(ep.extras["action_dist_inputs"][t], np.float32(row["action_dist_inputs"]))
        assert ep.extras["action_logp"][t] == np.float32(row["action_logp"])
        assert ep.extras["weights_seq_no"][t] == row["weights_seq_no"]
    assert {ep.id: len(ep) for ep in episodes} == position


def test_episodes_fixture_exact(shared_fixtures, tmp_path):
    src = shared_fixtures / "rllib_newstack" / "cartpole_episodes"
    expected = json.loads((src / "expected.json").read_text())
    report = convert_rllib_parquet(src, tmp_path / "out")
    assert report.details["layout"] == "episodes" and report.records_read == 90 and not report.quarantined
    assert report.observation_space_from.startswith("recording")
    episodes = _check_expected(tmp_path / "out", expected)
    starts = {ep.id: ep.t_start for ep in episodes}
    assert all(starts[e["eps_id"]] == e["t_started_first_chunk"] for e in expected["episodes"])
    info = read_info(tmp_path / "out")
    assert info.observation_space.shape == (4,) and info.action_space.n == 2
    assert np.isinf(info.observation_space.high[1]) and info.observation_space.high[0] == np.float32(4.8)
    # spot-check every value of the first and the last record against a direct decode
    by_id = {ep.id: ep for ep in episodes}
    files = _files(src)
    for f, i in ((files[0], 0), (files[-1], -1)):
        chunk = chunk_from_state(decode_state(pq.read_table(f).column("item")[i].as_py()))
        ep = by_id[chunk.id]
        np.testing.assert_array_equal(ep.obs, chunk.obs)
        np.testing.assert_array_equal(ep.actions, chunk.actions)
        np.testing.assert_array_equal(ep.rewards, chunk.rewards.astype(np.float32))
        for name in ("action_dist_inputs", "action_logp", "weights_seq_no"):
            np.testing.assert_array_equal(ep.extras[name], chunk.extras[name])


def test_rewrites_deduped_overlaps_and_corruption_quarantined(shared_fixtures, tmp_path):
    first = _files(shared_fixtures / "rllib_newstack" / "cartpole_columns")[0]
    table = pq.read_table(first)
    rec = tmp_path / "rec" / "run"
    rec.mkdir(parents=True)
    shutil.copy(first, rec / "000.parquet")
    # RLlib re-flush: the first 60 rows written again; one re-written row of the first episode differs
    again = table.slice(0, 60).to_pylist()
    again[5]["actions"] = 1 - again[5]["actions"]
    pq.write_table(pa.Table.from_pylist(again, schema=table.schema), rec / "001.parquet")
    bad = table.slice(100, 1).to_pylist()
    bad[0].update(eps_id="deadbeef", obs="not base64 at all!")
    pq.write_table(pa.Table.from_pylist(bad, schema=table.schema), rec / "002.parquet")
    (rec / "003.parquet").write_bytes(b"this is not parquet")

    ids = table.column("eps_id").to_pylist()
    order = list(dict.fromkeys(ids))
    lengths = {e: ids.count(e) for e in order}
    rewritten = list(dict.fromkeys(ids[:60]))
    out = tmp_path / "out"
    assert run_cli(["convert", "rllib-parquet", str(tmp_path / "rec"), "-o", str(out)]) == 1

    episodes = {ep.id: ep for ep in load_episodes(out)}
    assert set(episodes) == set(order) - {order[0]}
    for e in order[1:]:
        assert len(episodes[e]) == lengths[e]
    assert episodes[order[-1]].truncated and not episodes[order[-1]].terminated  # cut by the end of file 000
    report = read_info(out).provenance["report"]
    dup_rows = sum(min(60, ids.index(e) + lengths[e]) - ids.index(e) for e in rewritten[1:])
    assert report["duplicate_records"] == dup_rows
    assert report["episodes_with_duplicates"] == len(rewritten) - 1
    assert report["episodes_quarantined"] == 2 and report["files_unreadable"] == 1
    assert report["truncated_by_recording"] == 1
    records = [json.loads(line) for line in (out / "_quarantine" / QUARANTINE_FILE).read_text().splitlines()]
    assert report["records_quarantined"] == 2 * lengths[order[0]] + 1
    by_file = {}
    for r in records:
        by_file.setdefault(Path(r["file"]).name, []).append(r)
    assert len(by_file["000.parquet"]) == len(by_file["001.parquet"]) == lengths[order[0]]
    assert all(r["reason"] == "overlap" and "differs" in r["message"] for r in by_file["001.parquet"])
    assert by_file["002.parquet"][0]["row"] == 1 and "obs" in by_file["002.parquet"][0]["message"]
    unreadable = by_file["003.parquet"][0]
    assert unreadable["row"] is None and unreadable["level"] == "file" and unreadable["reason"] == "unreadable_file"
    assert "unreadable file" in unreadable["message"]
    assert all({"file", "row", "level", "reason", "message"} <= set(r) for r in records)

    # the same input converts with exit code 0 when quarantine is accepted; an existing output is refused
    assert run_cli(["convert", "rllib-parquet", str(tmp_path / "rec"), "-o", str(out)]) == 2
    assert run_cli(["convert", "rllib-parquet", str(tmp_path / "rec"), "-o", str(out), "--overwrite",
                    "--allow-quarantine", "--env", "CartPole-v1"]) == 0


class _Evil:
    def __reduce__(self):
        import os

        return (os.system, (f"touch {_Evil.marker}",))


def test_chunked_episode_lookback_duplicates_and_refused_pickle(shared_fixtures, tmp_path):
    src = _files(shared_fixtures / "rllib_newstack" / "cartpole_episodes")[0]
    items = pq.read_table(src).column("item").to_pylist()
    full = raw_state(items[0])
    T = full["t"]
    assert T == 20 and full["observations"]["lookback"] == 0

    def cut(state: dict, start: int, stop: int, lookback: int) -> dict:
        T = state["t"]
        part = dict(state, t_started=start, t=stop)
        for name in ("observations", "infos"):
            part[name] = dict(state[name], data=state[name]["data"][start - lookback: stop + 1], lookback=lookback)
        for name in ("actions", "rewards"):
            part[name] = dict(state[name], data=state[name]["data"][start - lookback: stop], lookback=lookback)
        part["extra_model_outputs"] = {
            k: dict(b, data=b["data"][start - lookback: stop], lookback=lookback)
            for k, b in state["extra_model_outputs"].items()
        }
        last = stop == T
        part["is_terminated"] = state["is_terminated"] if last else np.bool_(False)
        return part

    first_half, second_half = cut(full, 0, 8, 0), cut(full, 8, T, 3)
    evil = raw_state(items[2])
    _Evil.marker = tmp_path / "pwned"
    evil["observations"]["data"][1] = {b"nd": True, b"type": "|O", b"kind": b"", b"shape": [1],
                                       b"data": pickle.dumps(np.array([_Evil()], dtype=object))}
    rec = tmp_path / "rec"
    rec.mkdir()
    gappy = raw_state(items[3])  # its middle chunk is missing: quarantined, not glued together
    gap_chunks = [pack_state(cut(gappy, 0, 4, 0)), pack_state(cut(gappy, 7, gappy["t"], 2))]
    pq.write_table(pa.table({"item": pa.array([pack_state(second_half), items[1], *gap_chunks], pa.binary())}),
                   rec / "a.parquet")
    pq.write_table(pa.table({"item": pa.array([pack_state(first_half), items[1], pack_state(evil), b"\xc1junk"],
                                              pa.binary())}), rec / "b.parquet")
    report = convert_rllib_parquet(rec, tmp_path / "out")

    assert not _Evil.marker.exists()
    assert report.records_read == 8 and report.records_quarantined == 4 and report.episodes_quarantined == 3
    assert report.duplicate_records == 1 and report.episodes == 2
    episodes = {ep.id: ep for ep in load_episodes(tmp_path / "out")}
    original = chunk_from_state(decode_state(items[0]))
    joined = episodes[original.id]
    assert joined.t_start == 0 and joined.terminated and not joined.truncated and len(joined) == T
    np.testing.assert_array_equal(joined.obs, original.obs)
    np.testing.assert_array_equal(joined.actions, original.actions)
    np.testing.assert_array_equal(joined.rewards, original.rewards.astype(np.float32))
    for name, values in original.extras.items():
        np.testing.assert_array_equal(joined.extras[name], values)
    records = [json.loads(line) for line in (tmp_path / "out" / "_quarantine" / QUARANTINE_FILE).read_text().splitlines()]
    messages = {(Path(r["file"]).name, r["row"]): r["message"] for r in records}  # rows are 1-based
    assert "object array" in messages[("b.parquet", 3)] and ("b.parquet", 4) in messages
    assert "missing or overlapping chunk" in messages[("a.parquet", 3)] == messages[("a.parquet", 4)]
    reasons = {(Path(r["file"]).name, r["row"]): r["reason"] for r in records}
    assert reasons[("b.parquet", 3)] == "refused_pickle" and reasons[("a.parquet", 3)] == "gap"


def test_multi_agent_unpacked_columns_across_files(tmp_path):
    """Plain (not packed) list columns, two agents sharing an eps_id, Box actions, steps spread over files."""
    rng = np.random.default_rng(3)
    plan = {("e1", "a0"): (3, "truncated"), ("e1", "a1"): (2, "terminated"), ("e2", "a0"): (2, None)}
    truth, rows = {}, []
    for (eps, agent), (T, end) in plan.items():
        obs = rng.normal(size=(T + 1, 3)).astype(np.float32)
        act = rng.normal(size=(T, 2)).astype(np.float32)
        rew = rng.normal(size=T)
        truth[(eps, agent)] = (obs, act, rew, end)
        for t in range(T):
            last = t == T - 1
            rows.append({"eps_id": eps, "agent_id": agent, "module_id": f"pol_{agent}", "t": t,
                         "obs": obs[t].tolist(), "actions": act[t].tolist(), "rewards": float(rew[t]),
                         "new_obs": obs[t + 1].tolist(), "terminateds": last and end == "terminated",
                         "truncateds": last and end == "truncated", "vf_preds": float(rew[t]) * 2,
                         "infos": json.dumps({"t": t})})
    rows.sort(key=lambda r: (r["t"], r["eps_id"], r["agent_id"]))  # agents interleaved, as a vector env writes
    schema = pa.schema([("eps_id", pa.string()), ("agent_id", pa.string()), ("module_id", pa.string()),
                        ("t", pa.int64()), ("obs", pa.list_(pa.float32(), 3)), ("actions", pa.list_(pa.float32())),
                        ("rewards", pa.float64()), ("new_obs", pa.list_(pa.float32(), 3)),
                        ("terminateds", pa.bool_()), ("truncateds", pa.bool_()), ("vf_preds", pa.float64()),
                        ("infos", pa.string())])
    rec = tmp_path / "rec"
    (rec / "run-2").mkdir(parents=True)
    (rec / "run-1").mkdir()
    pq.write_table(pa.Table.from_pylist(rows[:3], schema=schema), rec / "run-1" / "x.parquet")
    pq.write_table(pa.Table.from_pylist(rows[3:], schema=schema), rec / "run-2" / "a.parquet")

    report = convert_rllib_parquet(rec, tmp_path / "out")
    assert report.episodes == 3 and report.steps == 7 and not report.quarantined
    assert report.truncated_by_recording == 1 and report.terminated == 1 and report.truncated == 2
    info = read_info(tmp_path / "out")
    assert info.action_space.shape == (2,) and info.observation_space.shape == (3,)
    assert set(info.extra_columns) == {"vf_preds", "infos"}  # `t` is bookkeeping, dropped
    got = {(ep.id, ep.agent_id): ep for ep in load_episodes(tmp_path / "out")}
    assert set(got) == set(plan)
    for key, (obs, act, rew, end) in truth.items():
        ep = got[key]
        assert ep.module_id == f"pol_{key[1]}"
        np.testing.assert_array_equal(ep.obs, obs)
        np.testing.assert_array_equal(ep.actions, act)
        np.testing.assert_array_equal(ep.rewards, rew.astype(np.float32))
        np.testing.assert_array_equal(ep.extras["vf_preds"], rew * 2)
        assert [json.loads(i) if isinstance(i, str) else i for i in ep.extras["infos"]] == [{"t": t} for t in range(len(rew))]
        assert (ep.terminated, ep.truncated) == (end == "terminated", end != "terminated")

    # spaces given on the command line (inline JSON and a JSON file) win over inference
    obs_json = json.dumps({"type": "Box", "dtype": "float32", "shape": [3], "low": -10, "high": 10})
    (tmp_path / "act.json").write_text(json.dumps({"type": "Box", "dtype": "float32", "shape": [2], "low": -5, "high": 5}))
    assert run_cli(["convert", "rllib-parquet", str(rec), "-o", str(tmp_path / "given"), "--observation-space",
                    obs_json, "--action-space", str(tmp_path / "act.json")]) == 0
    given = read_info(tmp_path / "given")
    assert given.observation_space.high.tolist() == [10, 10, 10] and given.action_space.low.tolist() == [-5, -5]
    assert given.provenance["report"]["observation_space_from"] == "given"


def test_packed_dict_observations_with_given_spaces(tmp_path):
    """A Dict observation packed by pack() (a pickled dict of arrays) decodes with the numpy-only unpickler."""
    import base64

    import gymnasium as gym
    import lz4.frame

    def pack(value) -> str:
        return base64.b64encode(lz4.frame.compress(pickle.dumps(value))).decode("ascii")

    obs = [{"pos": np.arange(3, dtype=np.float32) + t, "key": np.int64(t % 2)} for t in range(4)]
    rows = [{"eps_id": "d", "obs": pack(obs[t]), "new_obs": pack(obs[t + 1]), "actions": t % 2, "rewards": 0.5,
             "terminateds": t == 2, "truncateds": False} for t in range(3)]
    rec = tmp_path / "rec"
    rec.mkdir()
    pq.write_table(pa.Table.from_pylist(rows), rec / "a.parquet")
    obs_space = gym.spaces.Dict({"pos": gym.spaces.Box(-10, 10, (3,), np.float32), "key": gym.spaces.Discrete(2)})
    report = convert_rllib_parquet(rec, tmp_path / "out", observation_space=obs_space,
                                   action_space=gym.spaces.Discrete(2))
    assert report.episodes == 1 and not report.quarantined and report.observation_space_from == "given"
    (ep,) = load_episodes(tmp_path / "out")
    np.testing.assert_array_equal(ep.obs["pos"], np.stack([o["pos"] for o in obs]))
    np.testing.assert_array_equal(ep.obs["key"], [0, 1, 0, 1])
    assert ep.terminated and ep.episode_return == 1.5
