"""Parquet decompression bombs meet every parquet reader: refused from the footer and dictionaries, one message.

A few kilobytes of parquet decode to gigabytes: a million rows of one 2 KB value are one dictionary entry and a
run of equal indices; a hundred thousand null ``fixed_size_list<uint8>[1000]`` are 700 bytes on disk and 100 MB
in Arrow. Each bomb here is built from dictionary arrays (never expanded) in well under a second. Through the
real CLI on a real local Ray: ``convert rllib-parquet`` quarantines the file (file, size, cap, the flag) and
converts the others; ``offlinerl validate`` and ``offlinerl train``'s preflight fail the ``files`` check naming
the file and the sizes; each within the memory of the same command on clean data, with no traceback. First, the
sizing itself (:mod:`offlinerl.episodes.parquet_size`): an upper bound of what pyarrow builds, close to it for
real datasets, and no shipped dataset near the dataset cap.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from offlinerl.cli import main
from offlinerl.convert.quarantine import QUARANTINE_PATH
from offlinerl.episodes import load_episodes, read_info
from offlinerl.episodes.parquet_size import (
    DATASET_FLOOR_BYTES, FileBudget, ParquetTooLargeError, check_parquet_size, decoded_sizes,
)
from tests.convert.helpers import run_cli
from tests.episodes.builders import make_episode, write_raw
from tests.reliability.hostile_inputs import MiB, TreePeak

REPO = Path(__file__).resolve().parents[2]
OBS = gym.spaces.Box(-np.inf, np.inf, (4,), np.float32)
ACT = gym.spaces.Discrete(2)
#: What a bomb may add to the peak memory (PSS of the process tree) of the same command on clean data.
SLACK = 300 * 10**6


def _same(value, rows: int, type_: pa.DataType | None = None) -> pa.DictionaryArray:
    """``rows`` copies of one value, as a dictionary array: one value and ``rows`` int32 indices in memory."""
    return pa.DictionaryArray.from_arrays(pa.array(np.zeros(rows, np.int32)), pa.array([value], type_))


def _write_bomb(table: pa.Table, path: Path, store_schema: bool = True) -> Path:
    """One row group, one page, zstd, no statistics: a run of equal indices is a few bytes. Without
    ``store_schema`` a dictionary column reads back as its plain type."""
    pq.write_table(table, path, compression="zstd", row_group_size=table.num_rows, write_statistics=False,
                   data_page_size=1 << 30, store_schema=store_schema)
    return path


def _episode_bomb(path: Path, rows: int = 100_000, id_chars: int = 20_000) -> Path:
    """A dataset part file of the episode schema (Box(4) observations, Discrete(2) actions): ``rows`` one-step
    episodes whose ``episode_id`` is the same ``id_chars`` characters, 2 GB of text in ~5 KB."""
    def lists(per_row: int, values: pa.Array) -> pa.ListArray:
        return pa.ListArray.from_arrays(pa.array(np.arange(0, per_row * rows + 1, per_row, dtype=np.int32)), values)

    table = pa.table({
        "episode_id": _same("e" * id_chars, rows), "chunk_index": pa.array(np.zeros(rows, np.int32)),
        "t_start": pa.array(np.zeros(rows, np.int64)), "agent_id": pa.nulls(rows, pa.string()),
        "module_id": pa.nulls(rows, pa.string()),
        "obs": lists(2, pa.FixedSizeListArray.from_arrays(pa.array(np.zeros(8 * rows, np.float32)), 4)),
        "actions": lists(1, pa.array(np.zeros(rows, np.int64))),
        "rewards": lists(1, pa.array(np.zeros(rows, np.float32))),
        "terminated": pa.array(np.ones(rows, bool)), "truncated": pa.array(np.zeros(rows, bool))})
    return _write_bomb(table, path, store_schema=False)  # episode_id reads back as text, as the validator wants


def _null_fixed_lists(path: Path, rows: int = 100_000, size: int = 1000) -> Path:
    """``rows`` null ``fixed_size_list<uint8>[size]``: each null is one slot on disk, ``size`` bytes in Arrow."""
    values = pa.array(np.zeros(rows * size, np.uint8))
    column = pa.FixedSizeListArray.from_arrays(values, size, mask=pa.array(np.ones(rows, bool)))
    return _write_bomb(pa.table({"a": column}), path)


def _dataset(tmp_path: Path, name: str = "ds") -> Path:
    """A valid dataset of six short episodes in two files."""
    episodes = [make_episode(i, OBS, ACT, steps=3 + i % 3, terminated=True) for i in range(6)]
    return write_raw(tmp_path / name, [episodes[:3], episodes[3:]], OBS, ACT, env_id="CartPole-v1")


def _no_traceback(capsys) -> str:
    printed = capsys.readouterr()
    assert "Traceback" not in printed.out + printed.err, printed.err
    return printed.out + printed.err


def _peak(what: str, clean: TreePeak, bomb: TreePeak) -> None:
    print(f"\n{what}: peak PSS of the process tree: clean {clean.peak / MiB:.0f} MiB, bomb {bomb.peak / MiB:.0f} MiB",
          file=sys.__stderr__)
    assert bomb.peak <= clean.peak + SLACK


# -- the sizing --------------------------------------------------------------------------------------------


def test_sizes_bound_what_pyarrow_builds_and_shipped_datasets_are_far_below_the_cap(tmp_path):
    shipped = sorted(REPO.glob("datasets/*/*.parquet")) + sorted(REPO.glob("tests/fixtures/**/*.parquet"))
    assert len(shipped) > 20
    for f in shipped:
        estimate, real = sum(n for _, n in decoded_sizes(f)), pq.read_table(f).nbytes
        # an upper bound but for validity bits, and a close one (small files: their pages' headers and levels)
        assert real * 0.85 <= estimate <= real * 2 + 64 * 1024, f
        assert estimate <= 16 * f.stat().st_size, f  # the cap is max(256 MiB, 16384x): far away
        check_parquet_size(f)  # no error
    # nested lists, maps, structs, nulls, small integers, decimals: what pyarrow builds, within its validity bits
    table = pa.table({
        "a": pa.array([[1, 2], [], None, [3]], pa.list_(pa.uint8())),
        "m": pa.array([[("k", 1)], [], None, [("x", 2), ("y", 3)]], pa.map_(pa.string(), pa.int16())),
        "s": pa.array([{"x": [1.0], "y": "q"}, None, {"x": None, "y": None}, {"x": [], "y": "r"}]),
        "f": pa.array([[[1, 2]], [None], None, []], pa.list_(pa.list_(pa.float32(), 2))),
        "d": pa.array([1, None, 3, 4], pa.decimal128(5, 2)),
    })
    pq.write_table(pa.concat_tables([table] * 5000), tmp_path / "nested.parquet")
    estimate = sum(n for _, n in decoded_sizes(tmp_path / "nested.parquet"))
    assert 0.85 * pq.read_table(tmp_path / "nested.parquet").nbytes <= estimate


def test_null_fixed_size_lists_are_counted_at_their_full_size(tmp_path):
    """700 bytes that pyarrow turns into 100 MB: the footer's one value per null is not what Arrow allocates."""
    bomb = _null_fixed_lists(tmp_path / "nulls.parquet")
    assert bomb.stat().st_size < 2048
    ((what, nbytes),) = decoded_sizes(bomb)
    assert nbytes >= 100_000 * 1000 and what == "row group 1 of 1 (100,000 of the file's 100,000 rows)"
    check_parquet_size(bomb, budget=FileBudget(bomb, floor_bytes=nbytes))  # exactly its size: no error
    with pytest.raises(ParquetTooLargeError) as refused:
        check_parquet_size(bomb, budget=FileBudget(bomb, floor_bytes=MiB))
    cap = 16384 * bomb.stat().st_size
    assert f"would decode to {nbytes:,} bytes; this file of {bomb.stat().st_size:,} bytes may decode to at most " \
           f"{cap:,} bytes in all (the larger of 1 MiB and 16384x its size), so it was not read" in str(refused.value)
    assert (refused.value.file, refused.value.decoded_bytes) == (str(bomb), nbytes)


def test_load_episodes_refuses_a_bomb_before_reading_it(tmp_path):
    dataset = _dataset(tmp_path)
    bomb = _episode_bomb(dataset / "part-00002.parquet")
    with pytest.raises(ParquetTooLargeError) as refused:
        load_episodes(dataset)
    message = str(refused.value)
    assert message.startswith(f"{bomb}: the text values of row group 1 of 1 (100,000 of the file's 100,000 rows) "
                              f"would decode to 2,000,000,000 bytes; this file of {bomb.stat().st_size:,} bytes may "
                              f"decode to at most {DATASET_FLOOR_BYTES:,} bytes in all")


# -- through the CLI ---------------------------------------------------------------------------------------


def test_convert_rllib_parquet_quarantines_a_bomb_and_converts_the_other_files(ray_session, shared_fixtures, tmp_path,
                                                                               capsys):
    """An episode-layout recording with one more file: a million copies of a 2 KB ``item`` in about a kilobyte."""
    src = shared_fixtures / "rllib_newstack" / "cartpole_episodes"
    expected = json.loads((src / "expected.json").read_text())
    with TreePeak() as clean_mem:
        code = run_cli(["convert", "rllib-parquet", str(src), "-o", str(tmp_path / "clean"), "--env", "CartPole-v1"])
    assert code == 0, _no_traceback(capsys)
    _no_traceback(capsys)
    rec = tmp_path / "rec"
    shutil.copytree(src, rec)
    bomb = _write_bomb(pa.table({"item": _same(b"\x00" * 2048, 1_000_000, pa.binary())}), rec / "0-bomb.parquet",
                       store_schema=False)
    size = bomb.stat().st_size
    assert size < 4096
    with TreePeak() as bomb_mem:
        code = run_cli(["convert", "rllib-parquet", str(rec), "-o", str(tmp_path / "out"), "--env", "CartPole-v1"])
    printed = _no_traceback(capsys)
    _peak("convert rllib-parquet", clean_mem, bomb_mem)
    assert code == 1, printed  # records were quarantined
    (record,) = [json.loads(line) for line in (tmp_path / "out" / QUARANTINE_PATH).read_text().splitlines()]
    assert (record["file"], record["row"], record["level"], record["reason"]) == (str(bomb.resolve()), None, "file",
                                                                                 "too_large")
    assert record["message"] == (
        "the text values of row group 1 of 1 (1,000,000 of the file's 1,000,000 rows; columns item) would decode to "
        f"2,048,000,000 bytes; this file of {size:,} bytes may decode to at most 268,435,456 bytes in all (the larger "
        "of --max-value-bytes 256 MiB and 64x its size), 4,000,000 of them already counted, so it was not read. If "
        "the file is trusted, raise the cap with --max-value-bytes")
    assert f"file not read: {bomb.resolve()}: too_large: the text values of row group 1" in printed
    info = read_info(tmp_path / "out")
    assert (info.num_episodes, info.num_steps) == (expected["num_episodes"], expected["num_steps"])
    assert info.provenance["report"]["files_unreadable"] == 1


def test_validate_names_a_bomb_in_the_files_check(ray_session, tmp_path, capsys):
    dataset = _dataset(tmp_path)
    with TreePeak() as clean_mem:
        assert main(["validate", str(dataset)]) == 0
    _no_traceback(capsys)
    bomb = _episode_bomb(dataset / "part-00002.parquet")
    footer = next(decoded_sizes(bomb))[1]  # the numbers, from the footer: counted first
    with TreePeak() as bomb_mem:
        code = main(["validate", str(dataset)])
    printed = _no_traceback(capsys)
    _peak("validate", clean_mem, bomb_mem)
    assert code == 2, printed  # not readable: that file was not read
    assert "  [FAIL] files         1 offending file " in printed
    assert (f"part-00002.parquet: the text values of row group 1 of 1 (100,000 of the file's 100,000 rows) would "
            f"decode to 2,000,000,000 bytes; this file of {bomb.stat().st_size:,} bytes may decode to at most "
            f"268,435,456 bytes in all (the larger of 256 MiB and 16384x its size), {footer:,} of them already "
            "counted, so it was not read: a decompression bomb") in printed
    assert "[ok  ] lengths" in printed and "[skip] counts" in printed  # the other files were checked
    assert printed.rstrip().endswith("NOT READABLE (exit code 2)")


def test_train_preflight_refuses_a_bomb_before_anything_runs(ray_session, tmp_path, capsys):
    def job(dataset: Path) -> Path:
        spec = {"algorithm": "bc", "dataset": str(dataset), "stop": {"iterations": 1},
                "config": {"updates_per_iteration": 2, "train_batch_size": 8, "model": {"hidden": [8]}}}
        path = tmp_path / f"{dataset.name}.yaml"
        path.write_text(yaml.safe_dump(spec))
        return path

    garbage = _dataset(tmp_path, "garbage")  # the same preflight failing on a file that is not parquet
    (garbage / "part-00002.parquet").write_bytes(b"not parquet at all " * 20)
    with TreePeak() as clean_mem:
        code = main(["train", str(job(garbage)), "--output", str(tmp_path / "run0"), "--no-progress"])
    assert code == 1 and "cannot be read as parquet" in _no_traceback(capsys)
    dataset = _dataset(tmp_path)
    _episode_bomb(dataset / "part-00002.parquet")
    with TreePeak() as bomb_mem:
        code = main(["train", str(job(dataset)), "--output", str(tmp_path / "run"), "--no-progress"])
    printed = _no_traceback(capsys)
    _peak("train preflight", clean_mem, bomb_mem)
    assert code == 1, printed
    assert f"{dataset} failed validation; the validator's report:" in printed
    assert "part-00002.parquet: the text values of row group 1 of 1 (100,000 of the file's 100,000 rows) would " \
           "decode to 2,000,000,000 bytes" in printed
    assert not (tmp_path / "run").exists()  # refused before the run directory was made


def test_skip_validation_still_refuses_a_bomb(ray_session, tmp_path, capsys):
    def job(dataset: Path) -> Path:
        path = tmp_path / f"{dataset.name}.yaml"
        path.write_text(yaml.safe_dump({"algorithm": "bc", "dataset": str(dataset), "stop": {"iterations": 1},
                                        "config": {"updates_per_iteration": 2, "train_batch_size": 8,
                                                   "model": {"hidden": [8]}, "evaluation": {"interval": 0}}}))
        return path

    clean = _dataset(tmp_path, "clean")
    with TreePeak() as clean_mem:  # the same job on clean data: what training itself takes
        assert main(["train", str(job(clean)), "--output", str(tmp_path / "run0"), "--no-progress",
                     "--skip-validation"]) == 0
    capsys.readouterr()
    dataset = _dataset(tmp_path)
    _episode_bomb(dataset / "part-00002.parquet")
    with TreePeak() as bomb_mem:
        code = main(["train", str(job(dataset)), "--output", str(tmp_path / "run"), "--no-progress", "--skip-validation"])
    printed = _no_traceback(capsys)
    _peak("train --skip-validation", clean_mem, bomb_mem)
    assert code == 1 and "part-00002.parquet" in printed and "would decode to 2,000,000,000 bytes" in printed
    assert bomb_mem.peak < clean_mem.peak + 300 * MiB and not (tmp_path / "run").exists()
