"""Hostile inputs get bounded resources: a few bytes must not become gigabytes.

Every hostile input is generated here, cheaply: a packed value of ~100 bytes
declaring an 11 GB array, an LZ4 frame of 8 MB holding 2 GiB of zeros (built
by repeating one compressed 4 MiB block, never by compressing 2 GiB), a gzip
line far longer than the cap, msgpack/npy/zlib records that declare more than
they hold, and a YAML "billion laughs" job file. Each must be refused
before allocation, quarantined with its file, line/row and a reason naming the
cap and the flag that raises it, while the rest of the recording converts.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import subprocess
import sys
import time
import zlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from offlinerl.config_io import ConfigError, load_file
from offlinerl.convert.limits import DEFAULT_MAX_VALUE_BYTES, DecodeLimits, ValueTooLargeError, lz4_decompress
from offlinerl.convert.packing import PackedDecodeError, unpack
from offlinerl.convert.rllib.msgpack import EpisodeStateError, decode_state, space_from_rllib
from offlinerl.convert.samplebatch.lines import LineError, parse_line
from offlinerl.episodes import load_episodes, read_info
from tests.convert.helpers import pack_state, raw_state, run_cli
from tests.convert.samplebatch_recordings import batch, pack, sample_batch_line, write_lines
from tests.reliability.hostile_inputs import (
    BILLION_LAUGHS, RECONSTRUCT, TINY_HUGE_VALUES, MiB, Pickled, TreePeak, lz4_bomb, packed, packed_bomb, peak_traced,
)

REPO = Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------- unit level (no Ray)


@pytest.mark.parametrize("kind", sorted(TINY_HUGE_VALUES))
def test_tiny_packed_value_declaring_a_huge_array_is_refused_before_allocation(kind):
    value = TINY_HUGE_VALUES[kind]
    assert len(value) < 250
    peak, exc = peak_traced(lambda: unpack(value))
    assert isinstance(exc, ValueTooLargeError), exc
    assert "--max-value-bytes" in str(exc) and "268,435,456 bytes" in str(exc)
    assert peak < 1 * MiB
    line = json.loads(sample_batch_line(batch(1, 0, 3, end="terminated")))
    line["action_logp"] = value
    with pytest.raises(LineError) as err:
        parse_line(json.dumps(line))
    assert err.value.reason == "too_large" and "column 'action_logp'" in str(err.value)


@pytest.mark.parametrize("state, problem", [
    ((1, (-5,), np.dtype("f8"), False, b""), "negative dimension"),
    ((1, (2**40, 2**40, 2**40), np.dtype("u1"), False, b""), "over the cap"),  # the product overflows int64
    ((1, (4,), np.dtype("f8"), False, b"\x00" * 8), "does not match"),
])
def test_bad_declared_shapes_are_refused(state, problem):
    with pytest.raises((PackedDecodeError, ValueTooLargeError), match=problem):
        unpack(packed(Pickled(RECONSTRUCT, (np.ndarray, (0,), b"b"), state)))


def test_lz4_bomb_is_refused_before_decompressing():
    bomb = packed_bomb()  # 2 GiB of zeros in an 11 MB packed value, size declared as pack() does
    assert len(bomb) < 12 * MiB
    start = time.perf_counter()
    peak, exc = peak_traced(lambda: unpack(bomb))
    assert isinstance(exc, ValueTooLargeError) and "as its LZ4 frame declares" in str(exc)
    assert "2,147,483,648 bytes" in str(exc) and "--max-value-bytes" in str(exc)
    assert peak < 32 * MiB and time.perf_counter() - start < 5  # base64 decoding of the value only
    # a frame that declares no size is decompressed in chunks that stop one byte past the cap
    cap = 8 * MiB
    limits = DecodeLimits(max_value_bytes=cap)
    no_size = lz4_bomb(256 * MiB, declare_size=False)
    peak, exc = peak_traced(lambda: lz4_decompress(no_size, limits.budget(0)))
    assert isinstance(exc, ValueTooLargeError) and "decompressed so far" in str(exc)
    assert peak < 3 * cap
    # under the cap, both kinds decode exactly
    for declared in (True, False):
        assert lz4_decompress(lz4_bomb(4 * MiB, declared), limits.budget(0)) == bytes(4 * MiB)


def test_a_record_may_not_carry_many_bombs_each_under_the_cap():
    limits = DecodeLimits(max_value_bytes=8 * MiB)  # per value 8 MiB; a record of ~1 KiB: 8 MiB in all
    value = pack(np.zeros((2, 750_000), np.float32))  # 6 MB of zeros, packed into ~30 KB
    cols = batch(1, 0, 2, end="terminated")
    line = json.loads(sample_batch_line(cols))
    line.update({f"extra_{i}": value for i in range(3)})
    text = json.dumps(line)
    with pytest.raises(LineError) as err:
        parse_line(text, limits)
    assert err.value.reason == "too_large" and "this record" in str(err.value)
    line = json.loads(sample_batch_line(cols))
    line["extra_0"] = value
    assert parse_line(json.dumps(line), limits)  # one such value is fine


def test_msgpack_npy_and_zlib_declaring_more_than_they_hold_are_refused():
    import io

    import msgpack

    huge = {b"nd": True, b"type": "<f4", b"kind": b"", b"shape": [100_000, 100_000], b"data": b"\x00" * 16}
    with pytest.raises(ValueTooLargeError, match="--max-value-bytes"):
        decode_state(msgpack.packb({"observations": huge}, use_bin_type=True))
    fits = {**huge, b"shape": [4]}  # 16 bytes of data for 4 float32: fine; for 8: refused
    assert decode_state(msgpack.packb({"o": fits}, use_bin_type=True))["o"].shape == (4,)
    with pytest.raises(EpisodeStateError, match="holds 16 bytes"):
        decode_state(msgpack.packb({"o": {**huge, b"shape": [8]}}, use_bin_type=True))
    bin32_4gib = b"\x81\xa1o\xc6\xff\xff\xff\xff" + b"\x00" * 16  # {"o": <bin of 4 GiB - 1>} holding 16 bytes
    peak, exc = peak_traced(lambda: decode_state(bin32_4gib))
    assert isinstance(exc, EpisodeStateError) and peak < MiB

    def npy(shape) -> str:
        header = np.lib.format.header_data_from_array_1_0(np.zeros(1, np.float32))
        header["shape"] = shape
        stream = io.BytesIO()
        np.lib.format.write_array_header_1_0(stream, header)
        return base64.b64encode(zlib.compress(stream.getvalue() + b"\x00" * 8)).decode()

    box = {"space": "box", "shape": [2], "dtype": "float32", "low": npy((2,)), "high": npy((2,))}
    assert space_from_rllib(box).shape == (2,)
    with pytest.raises(ValueTooLargeError, match="one value of the recorded box space"):
        space_from_rllib(dict(box, shape=[100_000, 100_000]))
    with pytest.raises(ValueTooLargeError, match="space low"):
        space_from_rllib(dict(box, low=npy((100_000, 100_000))))
    with pytest.raises(EpisodeStateError, match="data is shorter"):
        space_from_rllib(dict(box, low=npy((1000,))))
    zeros = base64.b64encode(zlib.compress(bytes(64 * MiB), 9)).decode()  # zlib declares no size
    peak, exc = peak_traced(lambda: space_from_rllib(dict(box, low=zeros), DecodeLimits(max_value_bytes=MiB)))
    assert isinstance(exc, ValueTooLargeError) and "decompressed so far" in str(exc) and peak < 4 * MiB


def test_long_lines_are_read_in_chunks_and_reported_not_held(tmp_path):
    from offlinerl.convert.samplebatch.files import FileRange, LongLine, iter_range_lines, line_numbers

    path = tmp_path / "output-x_worker-0_0.json.gz"
    size = 32 * MiB
    path.write_bytes(gzip.compress(b"{}\n") + gzip.compress(b"x" * size) + gzip.compress(b"\n{}\n"))
    rng = FileRange(0, str(path), 0, -1)
    peak, lines = peak_traced(lambda: list(iter_range_lines(rng, max_line_bytes=MiB)))
    assert [(off, type(line).__name__) for off, line in lines] == [(0, "bytes"), (3, "LongLine"), (size + 4, "bytes")]
    long = lines[1][1]
    assert isinstance(long, LongLine) and long.length == size + 1 and len(long.head) == 1024
    assert peak < 8 * MiB  # the cap plus a chunk or two, never the whole line
    peak, numbers = peak_traced(lambda: line_numbers(str(path), [0, 3, size + 4]))
    assert numbers == {0: 1, 3: 2, size + 4: 3} and peak < 8 * MiB


def test_byte_sizes_and_limits_are_validated():
    from offlinerl.convert.limits import parse_byte_size

    assert parse_byte_size("268435456") == 256 * MiB == parse_byte_size("256MiB") == parse_byte_size("0.25g")
    for bad in ("lots", "0", "-1MiB", "1 parsec", "nan"):
        with pytest.raises(ValueError, match="not a byte size"):
            parse_byte_size(bad)
    with pytest.raises(ValueError, match="max_value_bytes must be a positive integer"):
        DecodeLimits(max_value_bytes=0)


# ---------------------------------------------------------------- YAML


def _offlinerl(*argv: str, timeout: float = 120) -> tuple[subprocess.CompletedProcess, float]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "offlinerl.cli", *argv], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=REPO)
    return proc, time.perf_counter() - start


def test_yaml_billion_laughs_exits_two_quickly(tmp_path):
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(BILLION_LAUGHS)
    assert len(BILLION_LAUGHS) < 600
    with pytest.raises(ConfigError, match="bomb.yaml: line 1: YAML anchors and aliases are not supported"):
        load_file(bomb)
    proc, seconds = _offlinerl("train", str(bomb))
    assert proc.returncode == 2, proc.stderr
    assert str(bomb) in proc.stderr and "anchors and aliases are not supported" in proc.stderr
    assert "Traceback" not in proc.stderr and seconds < 60  # the unguarded loader spun for minutes
    alias_only = tmp_path / "alias.yaml"  # an alias of an undefined anchor is refused the same way
    alias_only.write_text("algorithm: bc\nconfig: *x\n")
    with pytest.raises(ConfigError, match="line 2: .*found alias \\*x"):
        load_file(alias_only)
    big = tmp_path / "big.yaml"
    big.write_bytes(b"algorithm: bc\n" + b"#" * (2 * MiB) + b"\n")
    with pytest.raises(ConfigError, match="big.yaml: larger than 1,048,576 bytes"):
        load_file(big)
    assert load_file(REPO / "jobs" / "cartpole-bc.yaml")["algorithm"]  # plain files still load


# ---------------------------------------------------------------- convert samplebatch end to end (Ray)


RECORDING = "output-2026-01-01_00-00-00_worker-0_0.json"


def _recording(folder: Path, middle: list[str]) -> Path:
    """Two clean episodes (ids 1 and 9) around the ``middle`` lines, in ``folder/RECORDING``."""
    write_lines(folder / RECORDING, [
        sample_batch_line(batch(1, 0, 5, end="terminated"), packed=("obs", "new_obs")),
        *middle,
        sample_batch_line(batch(9, 0, 3, end="truncated")),
    ])
    return folder


def _hostile_line(eps_id: int, column: str, value: str) -> str:
    line = json.loads(sample_batch_line(batch(eps_id, 0, 3, end="terminated")))
    line[column] = value
    return json.dumps(line)


def _quarantine(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "_quarantine" / "records.jsonl").read_text().splitlines()]


def test_bombs_in_a_samplebatch_recording_are_quarantined_within_the_memory_envelope(ray_session, tmp_path, capsys):
    """The LZ4 bomb (2 GiB in 11 MB) and 100-byte 11 GB arrays: quarantined, the rest converted, and the
    process tree's peak memory stays within that of converting a clean recording of similar size."""
    rng = np.random.default_rng(1)
    filler = batch(5, 0, 3, end="terminated")  # the clean twin of the bomb line: ~11 MB, incompressible
    filler["vf_preds"] = rng.standard_normal((3, 700_000)).astype(np.float32)
    clean = _recording(tmp_path / "clean", [sample_batch_line(filler, packed=("vf_preds",))])
    hostile = _recording(tmp_path / "hostile", [
        _hostile_line(5, "obs", packed_bomb()),
        *(_hostile_line(6 + i, "action_logp", v) for i, v in enumerate(TINY_HUGE_VALUES.values())),
    ])
    sizes = [sum(f.stat().st_size for f in d.iterdir()) for d in (clean, hostile)]
    assert abs(sizes[0] - sizes[1]) < 2 * MiB

    start = time.perf_counter()
    with TreePeak() as clean_mem:
        assert run_cli(["convert", "samplebatch", str(clean), "-o", str(tmp_path / "clean-ds")]) == 0
    clean_seconds, start = time.perf_counter() - start, time.perf_counter()
    with TreePeak() as bomb_mem:
        code = run_cli(["convert", "samplebatch", str(hostile), "-o", str(tmp_path / "ds")])
    seconds = time.perf_counter() - start
    print(f"\npeak PSS of the process tree: clean {clean_mem.peak / MiB:.0f} MiB ({clean_seconds:.1f} s), "
          f"bombs {bomb_mem.peak / MiB:.0f} MiB ({seconds:.1f} s)", file=sys.__stderr__)
    assert bomb_mem.rise <= clean_mem.rise + 300 * 10**6

    assert code == 1  # something was quarantined; the dataset is written
    err = capsys.readouterr().err
    assert "record(s) quarantined" in err and "Traceback" not in err
    out = tmp_path / "ds"
    report = read_info(out).provenance["report"]
    assert report["records_read"] == 6 and report["record_reasons"] == {"too_large": 4}
    assert sorted(e.id for e in load_episodes(out)) == ["1", "9"]
    records = sorted(_quarantine(out), key=lambda r: r["line"])
    assert [(Path(r["file"]).name, r["line"], r["reason"]) for r in records] == [
        (RECORDING, line, "too_large") for line in (2, 3, 4, 5)]
    bomb = records[0]["message"]
    assert bomb.startswith("column 'obs': packed value (as its LZ4 frame declares) is 2,147,483,648 bytes")
    for r in records:
        assert "cap of 268,435,456 bytes (256 MiB) per value" in r["message"] and "--max-value-bytes" in r["message"]
        assert r["raw"]  # the line as it was, for whoever investigates


def test_max_value_bytes_flag_caps_lines_frames_and_values(ray_session, tmp_path):
    """With --max-value-bytes 1MiB: a gzip line of 4 MiB (never held whole), an LZ4 frame without a declared
    size, and an honest 1.2 MB array are quarantined, each naming the cap; the default cap takes the array."""
    rec = tmp_path / "rec"
    honest = batch(3, 0, 2, end="terminated")
    honest["vf_preds"] = np.zeros((2, 150_000), np.float32)
    _recording(rec, [
        _hostile_line(4, "obs", packed_bomb(64 * MiB, declare_size=False)),
        sample_batch_line(honest, packed=("vf_preds",)),
    ])
    gz = rec / "output-2026-01-01_00-00-00_worker-0_1.json.gz"
    member = gzip.compress(b" " * (4 * MiB))  # gzip members concatenate: a 4 MiB line from a few KB
    gz.write_bytes(gzip.compress(sample_batch_line(batch(7, 0, 2, end="terminated")).encode() + b"\n")
                   + gzip.compress(b'{"type": "SampleBatch", "obs": "') + member + gzip.compress(b'"}\n'))
    assert gz.stat().st_size < 64 * 1024

    out = tmp_path / "ds"
    assert run_cli(["convert", "samplebatch", str(rec), "-o", str(out), "--max-value-bytes", "1MiB"]) == 1
    records = {(Path(r["file"]).name, r["line"]): r for r in _quarantine(out)}
    assert set(records) == {(RECORDING, 2), (RECORDING, 3), (gz.name, 2)}
    for r in records.values():
        assert r["reason"] == "too_large" and "cap of 1,048,576 bytes (1 MiB) per value" in r["message"]
        assert "--max-value-bytes" in r["message"]
    assert "decompressed so far" in records[(RECORDING, 2)]["message"]
    assert "as its LZ4 frame declares" in records[(RECORDING, 3)]["message"]
    assert records[(gz.name, 2)]["message"].startswith("the line is 4,194,339 bytes")
    assert len(records[(gz.name, 2)]["raw"]) < 2048  # only the line's first bytes are kept
    assert sorted(e.id for e in load_episodes(out)) == ["1", "7", "9"]

    default = tmp_path / "default"  # the default cap (256 MiB) takes the honest array and the 64 MiB frame
    assert DEFAULT_MAX_VALUE_BYTES == 256 * MiB
    assert run_cli(["convert", "samplebatch", str(rec), "-o", str(default)]) == 1
    reasons = {(Path(r["file"]).name, r["line"]): r["reason"] for r in _quarantine(default)}
    assert reasons == {(RECORDING, 2): "bad_packed_value", (gz.name, 2): "missing_column"}  # zeros are no pickle
    assert sorted(e.id for e in load_episodes(default)) == ["1", "3", "7", "9"]
    proc, _ = _offlinerl("convert", "samplebatch", str(rec), "-o", str(tmp_path / "x"), "--max-value-bytes", "lots")
    assert proc.returncode == 2 and "not a byte size: 'lots'" in proc.stderr


# ---------------------------------------------------------------- RLlib new stack (Ray)


def _new_stack_quarantine(out: Path) -> dict[int, dict]:
    lines = (out / "_quarantine" / "records.jsonl").read_text().splitlines()
    return {r["row"]: r for r in map(json.loads, lines)}


def test_new_stack_step_rows_with_bombs_are_quarantined(ray_session, tmp_path):
    """Per-step layout: packed obs bombs, an extension shape of 40 GB per step, and one of 200 MB per step over
    2 values (each unreadable step would get a placeholder of that shape) are bounded the same way."""
    obs = np.arange(12, dtype=np.float32).reshape(6, 2)
    rows = []
    for eps, n in (("good", 3), ("bomb", 2), ("tiny", 2), ("after", 2)):
        for t in range(n):
            rows.append({"eps_id": eps, "obs": pack(obs[t]), "new_obs": pack(obs[t + 1]), "actions": t % 2,
                         "rewards": 1.0, "terminateds": t == n - 1, "truncateds": False,
                         "logits": [0.5, 0.5], "dist": [0.5, 0.5]})
    rows[3]["obs"] = packed_bomb()
    rows[6]["new_obs"] = TINY_HUGE_VALUES["setstate shape"]
    table = pa.Table.from_pylist(rows)
    for name, shape in (("logits", [100_000, 100_000]), ("dist", [50_000_000])):
        meta = {b"ARROW:extension:metadata": json.dumps({"shape": shape}).encode()}
        table = table.set_column(table.schema.get_field_index(name),
                                 pa.field(name, pa.list_(pa.float32()), metadata=meta),
                                 table.column(name).cast(pa.list_(pa.float32())))
    rec = tmp_path / "rec"
    rec.mkdir()
    pq.write_table(table, rec / "part-0.parquet")

    out = tmp_path / "out"
    assert run_cli(["convert", "rllib-parquet", str(rec), "-o", str(out)]) == 1
    assert sorted(e.id for e in load_episodes(out)) == ["after", "good"]
    report = read_info(out).provenance["report"]
    assert any("'logits' is not kept" in n and "--max-value-bytes" in n for n in report["notes"])
    assert any("'dist' is not kept: its metadata declares a per-step shape (50000000,), its first value has 2 "
               "entries" in n for n in report["notes"])
    records = _new_stack_quarantine(out)
    assert set(records) == {4, 5, 6, 7}  # 1-based rows
    assert records[4]["message"].startswith("obs: packed value (as its LZ4 frame declares) is 2,147,483,648 bytes")
    assert "new_obs: pickled array of shape (1375000000,)" in records[7]["message"]
    for row in (4, 7):
        assert "--max-value-bytes" in records[row]["message"] and records[row]["file"].endswith("part-0.parquet")
        assert records[row]["reason"] == "too_large" and records[row]["level"] == "row"


def test_new_stack_episode_records_declaring_huge_arrays_are_quarantined(ray_session, shared_fixtures, tmp_path):
    """Episode (msgpack) layout: a record whose array declares 40 GB, a record whose bin declares 4 GiB, and a
    first record whose recorded space declares a 40 GB Box (spaces then come from the next record)."""
    src = sorted((shared_fixtures / "rllib_newstack" / "cartpole_episodes").glob("**/*.parquet"))[0]
    items = pq.read_table(src).column("item").to_pylist()[:4]
    huge_space = raw_state(items[0])
    huge_space["_observation_space"] = dict(huge_space["_observation_space"], shape=[100_000, 100_000])
    huge_array = raw_state(items[1])
    huge_array["observations"]["data"][1] = {b"nd": True, b"type": "<f4", b"kind": b"",
                                             b"shape": [100_000, 100_000], b"data": b"\x00" * 16}
    rec = tmp_path / "rec"
    rec.mkdir()
    pq.write_table(pa.table({"item": pa.array([pack_state(huge_space), pack_state(huge_array),
                                               b"\x81\xa1o\xc6\xff\xff\xff\xff" + b"\x00" * 16, items[2], items[3]],
                                              pa.binary())}), rec / "a.parquet")
    out = tmp_path / "out"
    assert run_cli(["convert", "rllib-parquet", str(rec), "-o", str(out)]) == 1
    info = read_info(out)
    assert info.observation_space.shape == (4,) and info.num_episodes == 3
    quarantined = _new_stack_quarantine(out)
    records = {row: r["message"] for row, r in quarantined.items()}
    assert set(records) == {2, 3}  # 1-based rows
    assert "ValueTooLargeError: msgpack array of shape (100000, 100000)" in records[2]
    assert "--max-value-bytes" in records[2] and "not a valid msgpack record" in records[3]
    assert quarantined[2]["reason"] == "too_large"
