"""Training refuses data that ``offlinerl validate`` rejects, and a job that goes wrong says so.

Every corruption below used to train (exit 0, a checkpoint, NaN losses) or to end in a
traceback. Each is crafted on a small Pendulum-shaped dataset and run through
``offlinerl train``: exit code 1, the validator's report naming the problem, no run
directory. Then: ``--skip-validation`` still trains on valid data; a NaN loss stops the
job without checkpointing that iteration; metrics.jsonl is strict JSON; finetune refuses
invalid offline data too.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import replace
from pathlib import Path
from typing import Callable

import gymnasium as gym
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from offlinerl.algorithms.bc import BCConfig
from offlinerl.cli import main
from offlinerl.episodes import INFO_FILE, space_to_json
from offlinerl.episodes.validate import InvalidDatasetError
from offlinerl.jobs.guards import NonFiniteLossError, check_losses, metrics_json
from offlinerl.training.algorithm import Algorithm
from tests.episodes.builders import make_episode, write_raw

OBS = gym.spaces.Box(np.array([-1.0, -1.0, -8.0], np.float32), np.array([1.0, 1.0, 8.0], np.float32), dtype=np.float32)
ACT = gym.spaces.Box(-2.0, 2.0, (1,), np.float32)
ENV = "Pendulum-v1"
PART = "part-00001.parquet"  # ep-4 is its row 2


def _episodes(n: int = 6, steps: int | None = None) -> list:
    return [make_episode(i, OBS, ACT, steps=steps or 3 + i % 3, terminated=False, truncated=True) for i in range(n)]


def _write(tmp_path: Path, episodes_per_file: list[list], **info) -> Path:
    return write_raw(tmp_path / "ds", episodes_per_file, OBS, ACT, env_id=ENV, **info)


def _craft(mutate: Callable[[list], None] | None = None, **info) -> Callable[[Path], Path]:
    """A builder: six episodes in two files, ``mutate`` applied to the episode list first."""
    def build(tmp_path: Path) -> Path:
        eps = _episodes()
        if mutate:
            mutate(eps)
        return _write(tmp_path, [eps[:3], eps[3:]], **info)
    return build


def _then(build: Callable[[Path], Path], damage: Callable[[Path], None]) -> Callable[[Path], Path]:
    """A builder: a valid dataset, then ``damage`` applied to its directory."""
    def run(tmp_path: Path) -> Path:
        path = build(tmp_path)
        damage(path)
        return path
    return run


def _rewrite(fn: Callable[[pa.Table], pa.Table]) -> Callable[[Path], None]:
    def damage(path: Path) -> None:
        pq.write_table(fn(pq.read_table(path / PART)), path / PART)
    return damage


def _set_step(attr: str, index, value) -> Callable[[list], None]:
    def mutate(eps: list) -> None:
        getattr(eps[4], attr)[index] = value
    return mutate


def _column(table: pa.Table, name: str, values: list, type_: pa.DataType | None = None) -> pa.Table:
    i = table.schema.get_field_index(name)
    type_ = type_ or table.schema.field(i).type
    return table.set_column(i, pa.field(name, type_), pa.array(values, type=type_))


def _shorten(name: str, keep: int) -> Callable[[pa.Table], pa.Table]:
    """Row 1's ``name`` list cut to its first ``keep`` entries."""
    def fn(table: pa.Table) -> pa.Table:
        values = table.column(name).to_pylist()
        values[1] = values[1][:keep]
        return _column(table, name, values)
    return fn


def _empty_row(table: pa.Table) -> pa.Table:
    for name, keep in (("obs", 1), ("actions", 0), ("rewards", 0)):
        table = _shorten(name, keep)(table)
    return table


def _null_id(table: pa.Table) -> pa.Table:
    ids = table.column("episode_id").to_pylist()
    ids[1] = None
    return _column(table, "episode_id", ids)


def _cast(name: str, type_: pa.DataType) -> Callable[[pa.Table], pa.Table]:
    def fn(table: pa.Table) -> pa.Table:
        return _column(table, name, table.column(name).to_pylist(), type_)
    return fn


def _both_flags(eps: list) -> None:
    eps[4].terminated = eps[4].truncated = True


def _duplicate_row(eps: list) -> None:
    eps.insert(4, replace(eps[1]))  # ep-1 again, as row 2 of part-00001


def _chunked(change: Callable[[list], list]) -> Callable[[Path], Path]:
    def build(tmp_path: Path) -> Path:
        chunks = make_episode(9, OBS, ACT, steps=10, terminated=True).split(4)  # chunk_index 0, 1, 2
        return _write(tmp_path, [_episodes()[:3], change(chunks)])
    return build


def _edit_info(**changes) -> Callable[[Path], None]:
    def damage(path: Path) -> None:
        data = json.loads((path / INFO_FILE).read_text())
        data.update(changes)
        (path / INFO_FILE).write_text(json.dumps(data))
    return damage


def _write_file(name: str, data: bytes | pa.Table) -> Callable[[Path], None]:
    def damage(path: Path) -> None:
        if isinstance(data, pa.Table):
            pq.write_table(data, path / name)
        else:
            (path / name).write_bytes(data)
    return damage


#: ``id: (builder, the check that fails, a piece of its message)``. The first 16 used to train (exit 0),
#: the last 8 used to end in a traceback.
CORRUPTIONS: dict[str, tuple[Callable[[Path], Path], str, str]] = {
    "nan-reward": (_craft(_set_step("rewards", 2, np.nan)), "finite", f"{PART} row 2 episode 'ep-4': rewards[2] = nan"),
    "posinf-reward": (_craft(_set_step("rewards", 0, np.inf)), "finite", "rewards[0] = inf"),
    "neginf-reward": (_craft(_set_step("rewards", 1, -np.inf)), "finite", "rewards[1] = -inf"),
    "nan-observation": (_craft(_set_step("obs", (3, 1), np.nan)), "finite", "obs[3][1] = nan"),
    "duplicated-row": (_craft(_duplicate_row), "episode_ids", f"{PART} row 2 episode 'ep-1'"),
    "obs-dtype": (_then(_craft(), _rewrite(_cast("obs", pa.list_(pa.list_(pa.float64(), 3))))), "schema",
                  "column 'obs': expected list<fixed_size_list<float>[3]>, got list<fixed_size_list<double>[3]>"),
    "reward-dtype": (_then(_craft(), _rewrite(_cast("rewards", pa.list_(pa.float64())))), "schema",
                     "column 'rewards': expected list<float>, got list<double>"),
    "both-flags": (_craft(_both_flags), "flags", "terminated and truncated are both true"),
    "num-episodes": (_craft(num_episodes=7), "counts", "num_episodes: dataset.json says 7, the data has 6"),
    "num-steps": (_craft(num_steps=999), "counts", "num_steps: dataset.json says 999"),
    "num-rows": (_craft(num_rows=99), "counts", "num_rows: dataset.json says 99, the data has 6"),
    "null-episode-id": (_then(_craft(), _rewrite(_null_id)), "lengths", "episode_id is null"),
    "empty-row": (_then(_craft(), _rewrite(_empty_row)), "lengths", "the row has no steps"),
    "action-outside-space": (_craft(_set_step("actions", 2, [5.0])), "actions", "actions[2][0] = 5.0"),
    "chunk-gap": (_chunked(lambda c: [c[0], c[2]]), "chunks", "chunk_index 2, expected 1"),
    "chunk-ends-early": (_chunked(lambda c: [replace(c[0], truncated=True), c[1], c[2]]), "chunks",
                         "chunk 0 is truncated but chunk 2 follows"),
    "obs-length": (_then(_craft(), _rewrite(_shorten("obs", 3))), "lengths", "len(obs) = 3, expected T+1 = 5"),
    "actions-length": (_then(_craft(), _rewrite(_shorten("actions", 2))), "lengths", "len(obs) = 5, expected T+1 = 3"),
    "rewards-length": (_then(_craft(), _rewrite(_shorten("rewards", 1))), "lengths", "len(rewards) = 1, expected T = 4"),
    "obs-space-shape": (_then(_craft(), _edit_info(observation_space=space_to_json(gym.spaces.Box(-1, 1, (4,), np.float32)))),
                        "schema", "column 'obs': expected list<fixed_size_list<float>[4]>"),
    "action-space": (_then(_craft(), _edit_info(action_space=space_to_json(gym.spaces.Discrete(3)))),
                     "schema", "column 'actions': expected list<int64>"),
    "rewards-missing": (_then(_craft(), _rewrite(lambda t: t.drop(["rewards"]))), "schema",
                        f"{PART}: required column 'rewards' is missing"),
    "foreign-part-file": (_then(_craft(), _write_file("part-00002.parquet", pa.table({"x": [1, 2], "y": ["a", "b"]}))),
                          "schema", "required column 'episode_id' is missing"),
    "garbage-part-file": (_then(_craft(), _write_file("part-00002.parquet", b"not parquet at all " * 20)),
                          "files", "part-00002.parquet: cannot be read as parquet"),
    "dataset-json-unparseable": (_then(_craft(), _write_file(INFO_FILE, b"{not json")), "dataset_json",
                                 "does not parse as JSON"),
}


def _job(tmp_path: Path, dataset: Path, algorithm: str = "bc", **extra) -> Path:
    """A tiny job file: a few small updates, one short evaluation episode."""
    spec = {"algorithm": algorithm, "dataset": str(dataset),
            "config": {"updates_per_iteration": 5, "train_batch_size": 8, "model": {"hidden": [8]},
                       "evaluation": {"episodes": 1, "interval": 0, "env_kwargs": {"max_episode_steps": 10}}},
            "stop": {"iterations": 2}, "output": str(tmp_path / "runs"), **extra}
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def _train(capsys, job: Path, run: Path, *args: str) -> tuple[int, str]:
    code = main(["train", str(job), "--output", str(run), "--no-progress", *args])
    return code, capsys.readouterr().err


#: One per way the data layer meets malformed rows: a connector's check and numpy inside a Ray task, the
#: module-id scan, a parquet footer, dataset.json.
SKIP_KINDS = ["obs-length", "action-space", "foreign-part-file", "garbage-part-file", "dataset-json-unparseable",
              "rewards-missing"]


@pytest.mark.parametrize("kind", list(CORRUPTIONS))
def test_train_refuses_invalid_data(ray_session, tmp_path, capsys, kind):
    build, check, message = CORRUPTIONS[kind]
    run = tmp_path / "run"
    code, err = _train(capsys, _job(tmp_path, build(tmp_path)), run)
    assert code == 1, err
    assert "failed validation; the validator's report:" in err and "Traceback" not in err
    failed = next(line for line in err.splitlines() if line.strip().startswith(f"[FAIL] {check} "))
    assert message in err.split(failed, 1)[1], err
    assert not run.exists()  # validated before the run directory was created: no config, no checkpoint


@pytest.mark.parametrize("mode", ["in_memory", "streaming"])
@pytest.mark.parametrize("kind", SKIP_KINDS)
def test_skip_validation_on_malformed_data_is_a_message(ray_session, tmp_path, capsys, kind, mode):
    dataset = CORRUPTIONS[kind][0](tmp_path)
    code, err = _train(capsys, _job(tmp_path, dataset), tmp_path / "run", "--skip-validation",
                       "--set", f"config.data.mode={mode}")
    assert code == 1, err
    assert str(dataset) in err and "Traceback" not in err
    assert not list(tmp_path.glob("run/checkpoints/*"))


def test_skip_validation_trains_on_valid_data(ray_session, tmp_path, capsys):
    run = tmp_path / "run"
    code, err = _train(capsys, _job(tmp_path, _craft()(tmp_path)), run, "--skip-validation")
    assert code == 0, err
    assert (run / "checkpoints" / "final" / "algorithm.json").is_file()
    assert [json.loads(line)["learner/updates"] for line in (run / "metrics.jsonl").read_text().splitlines()][:2] == [5, 10]


def _strict_json(line: str) -> dict:
    def refuse(token: str):
        raise ValueError(f"not JSON: {token}")
    return json.loads(line, parse_constant=refuse)


@pytest.mark.parametrize("nan_steps,first_bad", [(1, "later"), (None, 1)])
def test_nan_loss_stops_the_job_and_keeps_the_last_good_checkpoint(ray_session, tmp_path, capsys, nan_steps, first_bad):
    """CQL on NaN rewards (validation skipped): the critic loss turns NaN in the first iteration that samples one.

    One NaN among 200 transitions is first drawn in a later iteration (deterministic: seeded sampling);
    an episode of NaN rewards is drawn in the first one."""
    eps = _episodes(n=4, steps=50)
    eps[2].rewards[slice(10, 10 + nan_steps) if nan_steps else slice(None)] = np.nan
    job = _job(tmp_path, _write(tmp_path, [eps]), algorithm="cql", checkpoint_interval=1, stop={"iterations": 40})
    run = tmp_path / "run"
    code, err = _train(capsys, job, run, "--skip-validation")
    assert code == 1, err
    found = re.search(r"offlinerl train: losse?s? (.*) became nan at iteration (\d+) \(updates (\d+)-(\d+)\); (.*)", err)
    assert found and "'critic'" in found.group(1), err
    k = int(found.group(2))
    assert (int(found.group(3)), int(found.group(4))) == (5 * k - 4, 5 * k)
    kept = sorted(p.name for p in (run / "checkpoints").glob("*")) if (run / "checkpoints").exists() else []
    assert kept == [f"iter-{i:06d}" for i in range(1, k)]  # every good iteration, not the NaN one, no final
    if first_bad == 1:
        assert k == 1 and found.group(5) == "no checkpoint was written before it"
    else:
        assert k >= 2 and found.group(5) == f"the last good checkpoint is {run / 'checkpoints' / f'iter-{k - 1:06d}'}"
    assert not (run / "result.json").exists() and "Traceback" not in err
    lines = [_strict_json(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert len(lines) == k and lines[-1]["losses/critic"] is None
    assert all(math.isfinite(x["losses/critic"]) for x in lines[:-1])


def test_metrics_json_writes_null_for_non_finite_values():
    line = metrics_json({"losses/critic": math.nan, "a": math.inf, "b": [-math.inf, 1.5], "c": {"d": math.nan}, "n": 3})
    assert _strict_json(line) == {"losses/critic": None, "a": None, "b": [None, 1.5], "c": {"d": None}, "n": 3}


def test_non_finite_loss_names_the_module_term():
    metrics = {"iteration": 4.0, "learner/updates": 40.0, "p0/losses/actor": 0.5, "p1/losses/critic": math.inf}
    with pytest.raises(NonFiniteLossError, match=r"loss 'critic' of module 'p1' became inf at iteration 4 "
                                                 r"\(updates 31-40\); the last good checkpoint is ck"):
        check_losses(metrics, updates_before=30, last_checkpoint="ck")
    check_losses({**metrics, "p1/losses/critic": 1.0}, updates_before=30, last_checkpoint=None)
    with pytest.raises(NonFiniteLossError, match=r"^losses 'actor' \(nan\) and 'critic' \(-inf\) became non-finite at "
                                                 r"iteration 4 \(updates 31-40\); no checkpoint was written before it$"):
        check_losses({"iteration": 4.0, "learner/updates": 40.0, "losses/actor": math.nan, "losses/critic": -math.inf},
                     updates_before=30, last_checkpoint=None)


def test_algorithm_validates_its_dataset(ray_session, tmp_path):
    config = BCConfig.from_dict({"train_batch_size": 8, "model": {"hidden": [8]}})
    with pytest.raises(InvalidDatasetError, match=r"rewards\[2\] = nan") as exc:
        Algorithm("bc", config, CORRUPTIONS["nan-reward"][0](tmp_path))
    assert exc.value.report.exit_code == 1 and [c.name for c in exc.value.report.failed] == ["finite"]


def test_finetune_refuses_invalid_offline_data(ray_session, tmp_path, capsys):
    dataset = _craft()(tmp_path)
    algo = Algorithm("bc", BCConfig.from_dict({"train_batch_size": 8, "model": {"hidden": [8]}}), dataset)
    algo.save_checkpoint(tmp_path / "ckpt")
    algo.stop()
    _write_file("part-00002.parquet", b"not parquet")(dataset)  # the checkpoint's dataset breaks afterwards
    job = tmp_path / "ft.yaml"
    job.write_text("online: {env_steps_per_iteration: 10}\nstop: {iterations: 1}\n")
    run = tmp_path / "run"
    code = main(["finetune", str(job), "--from", str(tmp_path / "ckpt"), "-o", str(run), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 1, err
    assert "failed validation" in err and "part-00002.parquet: cannot be read as parquet" in err
    assert "Traceback" not in err and not run.exists()
