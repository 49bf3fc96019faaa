"""``offlinerl convert table`` on hostile and odd step tables: every input row is written or quarantined, once.

A byte that is not UTF-8 in the middle of a file, a spreadsheet's byte-order mark, ``1_000``, integers too long
to convert, JSON nested 100,000 deep and a parquet file of ~800 bytes that decodes to 2 GB are each converted
through the real CLI on a real local Ray. Each test checks the exit code, the quarantine record (file,
line/row, reason, message), that no traceback was printed, and that the rows written plus the rows quarantined
are the rows of the input. The last test checks the same byte in a SampleBatch recording.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from offlinerl.convert.limits import MAX_JSON_DEPTH, json_too_deep
from offlinerl.convert.quarantine import QUARANTINE_PATH
from offlinerl.episodes import load_episodes, read_info
from tests.convert.helpers import run_cli
from tests.convert.samplebatch_recordings import batch, sample_batch_line
from tests.reliability.hostile_inputs import MiB, TreePeak

BOX2 = {"type": "Box", "dtype": "float64", "shape": [2], "low": ["-inf"] * 2, "high": ["inf"] * 2}
DISCRETE2 = {"type": "Discrete", "dtype": "int64", "n": 2, "start": 0}
SPEC = {"episode_id": "episode", "step": "t", "observation": "obs", "action": "action", "reward": "reward",
        "terminated": {"column": "done"}, "truncated": {"rule": "none"},
        "observation_space": BOX2, "action_space": DISCRETE2}
HEADER = b"episode,t,obs,action,reward,done\n"
SAVE_AS_UTF8 = "(the file must be UTF-8: save or export it as UTF-8)"


def _csv_episode(name: str, n: int = 3) -> list[bytes]:
    """The CSV lines of one terminated episode of ``n`` steps (``n + 1`` rows: the last is the final observation)."""
    rows = [f'{name},{t},"[{t}, 0.5]",{t % 2},1.0,{"true" if t == n - 1 else "false"}\n'.encode() for t in range(n)]
    return [*rows, f'{name},{n},"[{n}, 0.5]",,,\n'.encode()]


def _jsonl_episode(name: str, n: int = 3) -> list[bytes]:
    """The JSON lines of one terminated episode of ``n`` steps."""
    rows = [{"episode": name, "t": t, "obs": [t, 0.5], "action": t % 2, "reward": 1.0, "done": t == n - 1}
            for t in range(n)]
    rows.append({"episode": name, "t": n, "obs": [n, 0.5]})
    return [json.dumps(r).encode() + b"\n" for r in rows]


def _convert(tmp_path: Path, capsys, files: dict[str, bytes | pa.Table], *argv: str, spec: dict = SPEC,
             folder: str = "in", out: str = "out") -> tuple[int, str, Path]:
    """Write ``files`` into ``tmp_path/folder`` and run ``offlinerl convert table`` on it: (exit code, what was
    printed, the output directory). Nothing printed is a traceback."""
    (tmp_path / folder).mkdir(exist_ok=True)
    for name, content in files.items():
        if isinstance(content, bytes):
            (tmp_path / folder / name).write_bytes(content)
        else:
            pq.write_table(content, tmp_path / folder / name)
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    code = run_cli(["convert", "table", str(tmp_path / folder), "--spec", str(tmp_path / "spec.yaml"),
                    "-o", str(tmp_path / out), *argv])
    printed = capsys.readouterr()
    assert "Traceback" not in printed.out + printed.err, printed.err
    return code, printed.out + printed.err, tmp_path / out


def _quarantine(out: Path) -> dict[tuple[str, int | None], dict]:
    """The quarantine records by (file name, line or row); each position appears once."""
    path = out / QUARANTINE_PATH
    records = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    by_position = {(Path(r["file"]).name, r.get("line", r.get("row"))): r for r in records}
    assert len(by_position) == len(records), "a row was quarantined twice"
    return by_position


def _rows_add_up(out: Path, input_rows: int) -> dict[str, object]:
    """Every input row of the readable files is in the dataset or in the quarantine file, exactly once: the
    episodes' rows (steps + the final observation) plus the rows quarantined are the input rows. The episodes."""
    rows = [r for r in _quarantine(out).values() if r["level"] != "file"]
    episodes = {e.id: e for e in load_episodes(out)}
    assert sum(len(e) + 1 for e in episodes.values()) + len(rows) == input_rows
    report = read_info(out).provenance["report"]
    assert report["records_read"] == input_rows and report["records_quarantined"] == len(rows)
    return episodes


def _reasons(out: Path) -> dict[tuple[str, int | None], tuple[str, str]]:
    return {k: (r["reason"], r["level"]) for k, r in _quarantine(out).items()}


def test_a_byte_that_is_not_utf8_quarantines_its_row_and_the_file_goes_on(ray_session, tmp_path, capsys):
    a, b, c = _csv_episode("a"), _csv_episode("b"), _csv_episode("c")
    b[1] = b[1].replace(b"0.5", b"0.\xff5")  # line 7 (header 1, a 2-5, b 6-9, c 10-13)
    j1, j2 = _jsonl_episode("j1"), _jsonl_episode("j2")
    j1[2] = j1[2].replace(b"}", b', "note": "caf\xe9 au lait"}')  # Latin-1, line 3
    code, printed, out = _convert(tmp_path, capsys, {"steps.csv": HEADER + b"".join(a + b + c),
                                                     "steps.jsonl": b"".join(j1 + j2)})
    assert code == 1
    episodes = _rows_add_up(out, 12 + 8)
    assert sorted(episodes) == ["a", "c", "j2"]
    for name in ("c", "j2"):  # after the bad byte: whole, and ended by their own flag, not cut
        assert len(episodes[name]) == 3 and episodes[name].terminated and not episodes[name].truncated
    records = _quarantine(out)
    assert records[("steps.csv", 7)]["message"] == f"column 'obs': byte 0xff is not UTF-8 {SAVE_AS_UTF8}"
    assert records[("steps.jsonl", 3)]["message"].startswith("byte 0xe9 (byte ")
    assert "\\xe9 au lait" in records[("steps.jsonl", 3)]["raw"]
    assert _reasons(out) == {
        ("steps.csv", 7): ("bad_encoding", "line"), ("steps.jsonl", 3): ("bad_encoding", "line"),
        **{("steps.csv", n): ("partly_unreadable", "episode") for n in (6, 8, 9)},
        **{("steps.jsonl", n): ("partly_unreadable", "episode") for n in (1, 2, 4)}}
    assert "step rows quarantined:  8 (bad_encoding: 2, partly_unreadable: 6)" in printed


def test_a_byte_order_mark_is_skipped_and_utf16_is_refused_by_name(ray_session, tmp_path, capsys):
    bom = b"\xef\xbb\xbf"  # what a spreadsheet's "CSV UTF-8" export writes first
    code, printed, out = _convert(tmp_path, capsys, {"sheet.csv": bom + HEADER + b"".join(_csv_episode("a")),
                                                     "log.jsonl": bom + b"".join(_jsonl_episode("j"))})
    assert code == 0, printed
    episodes = _rows_add_up(out, 8)
    assert sorted(episodes) == ["a", "j"] and not _quarantine(out)
    np.testing.assert_array_equal(episodes["a"].obs[:, 0], [0, 1, 2, 3])
    # "Unicode text" (UTF-16) is not read as garbage: the file is refused, saying what it is
    utf16 = (HEADER + b"".join(_csv_episode("u"))).decode().encode("utf-16")
    code, printed, out = _convert(tmp_path, capsys, {"sheet.csv": utf16}, folder="utf16", out="out16")
    assert code == 2  # the only file: no episode converted
    (record,) = _quarantine(out).values()
    assert (Path(record["file"]).name, record["level"], record["reason"]) == ("sheet.csv", "file", "bad_encoding")
    assert record["message"].startswith("the file is UTF-16 (it starts with a UTF-16 byte-order mark)")
    assert f"file not read: {tmp_path / 'utf16' / 'sheet.csv'}: bad_encoding: the file is UTF-16" in printed
    _rows_add_up(out, 0)


def test_digit_separators_are_not_numbers(ray_session, tmp_path, capsys):
    u1, u2, ok = _csv_episode("u1"), _csv_episode("u2"), _csv_episode("ok")
    u1[0] = u1[0].replace(b",1.0,", b",1_000,")  # line 2: the reward
    u2[1] = b'u2,1_0,"[1, 0.5]",1,1.0,false\n'  # line 7: the step
    ok[0], ok[1], ok[2] = (ok[0].replace(b",1.0,", b", 1 ,"), ok[1].replace(b",1.0,", b",1e3,"),
                           ok[2].replace(b",1.0,", b",+2,"))  # still numbers, as before
    j = _jsonl_episode("j")
    j[1] = j[1].replace(b"[1, 0.5]", b'["1_0", 0.5]')  # line 2: text in a JSON list
    code, printed, out = _convert(tmp_path, capsys, {"a.csv": HEADER + b"".join(u1 + u2 + ok),
                                                     "b.jsonl": b"".join(j)})
    assert code == 1
    episodes = _rows_add_up(out, 12 + 4)
    assert sorted(episodes) == ["ok"]
    np.testing.assert_array_equal(episodes["ok"].rewards, np.float32([1, 1000, 2]))
    records = _quarantine(out)
    assert records[("a.csv", 2)]["message"] == "column 'reward': '1_000' is not a number (no '_' in numbers)"
    assert records[("a.csv", 7)]["message"] == "column 't': '1_0' is not a step index (no '_' in numbers)"
    assert records[("b.jsonl", 2)]["message"] == "column 'obs': '1_0' is not a number (no '_' in numbers)"
    assert {k: v for k, v in _reasons(out).items() if v[1] == "line"} == {
        ("a.csv", 2): ("non_numeric", "line"), ("a.csv", 7): ("bad_step", "line"),
        ("b.jsonl", 2): ("non_numeric", "line")}


def test_integers_too_long_to_convert_and_steps_beyond_int64_are_quarantined(ray_session, tmp_path, capsys):
    digits = b"9" * 5000  # int() refuses more than 4,300 digits (ValueError); float() makes it inf
    long_reward, far, ok = _csv_episode("long"), _csv_episode("far"), _csv_episode("ok")
    long_reward[0] = long_reward[0].replace(b",1.0,", b"," + digits + b",")  # line 2
    far[2] = far[2].replace(b"far,2,", f"far,{2**63},".encode())  # line 8
    j = _jsonl_episode("j")
    j[1] = j[1].replace(b"[1, 0.5]", b"[1, " + digits + b"]")  # line 2: json.loads raised ValueError
    parquet = pa.table({"episode": ["p"] * 3 + ["q"] * 2, "t": pa.array([0, 1, 2**64 - 1, 0, 1], pa.uint64()),
                        "obs": [[0.0, 0.5]] * 5, "action": [0, 1, None, 1, None],
                        "reward": [1.0, 1.0, None, 1.0, None], "done": [False, True, None, True, None]})
    code, printed, out = _convert(tmp_path, capsys, {"a.csv": HEADER + b"".join(long_reward + far + ok),
                                                     "b.jsonl": b"".join(j), "c.parquet": parquet})
    assert code == 1
    episodes = _rows_add_up(out, 12 + 4 + 5)
    assert sorted(episodes) == ["ok", "q"]
    records = _quarantine(out)
    assert records[("a.csv", 2)]["message"] == ("column 'reward': an integer of 5,000 digits is beyond the range "
                                                "of a float64")
    assert records[("a.csv", 8)]["message"] == "column 't': step '9223372036854775808' is beyond the int64 range"
    assert records[("b.jsonl", 2)]["message"] == ("column 'obs': an integer of 5,000 digits (more than the 4,300 "
                                                  "Python converts)")
    assert records[("c.parquet", 3)]["message"] == ("column 't': step 18446744073709551615 is beyond the int64 "
                                                    "range")
    assert {k for k, v in _reasons(out).items() if v == ("number_out_of_range", "line")} == {
        ("a.csv", 2), ("a.csv", 8), ("b.jsonl", 2)}
    assert _reasons(out)[("c.parquet", 3)] == ("number_out_of_range", "row")
    assert all(len(r["message"]) < 300 for r in records.values())  # the cell is not repeated in the message


def test_json_nested_deeper_than_the_cap_is_quarantined_not_a_recursion_error(ray_session, tmp_path, capsys):
    deep = "[" * 100_000  # Python's JSON parser recursed once per level: RecursionError
    assert json_too_deep(deep) and not json_too_deep("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH)
    assert not json_too_deep('["' + "[" * 1000 + '"]')  # brackets inside strings do not count
    d, ok = _csv_episode("d"), _csv_episode("ok")
    d[1] = f'd,1,"{deep}",1,1.0,false\n'.encode()  # line 3
    j, k = _jsonl_episode("j"), _jsonl_episode("k")
    j[1] = b'{"episode": "j", "t": 1, "obs": ' + deep.encode() + b"\n"  # line 2: its episode cannot be read
    code, printed, out = _convert(tmp_path, capsys, {"a.csv": HEADER + b"".join(d + ok), "b.jsonl": b"".join(j + k)})
    assert code == 1
    episodes = _rows_add_up(out, 8 + 8)
    assert sorted(episodes) == ["k", "ok"] and len(episodes["k"]) == 3
    records = _quarantine(out)
    assert records[("a.csv", 3)]["message"] == f"column 'obs': JSON nested more than {MAX_JSON_DEPTH} levels deep"
    assert records[("b.jsonl", 2)]["message"] == f"JSON nested more than {MAX_JSON_DEPTH} levels deep"
    assert len(records[("b.jsonl", 2)]["raw"]) <= 64 * 1024  # the line, cut
    reasons = _reasons(out)
    assert reasons[("a.csv", 3)] == reasons[("b.jsonl", 2)] == ("too_deep", "line")
    assert reasons[("b.jsonl", 1)] == ("gap", "episode")  # the rest of j: step 1 is missing


def _parquet_bomb(path: Path, cell_chars: int, rows: int = 1_000_000) -> Path:
    """A step table of ``rows`` identical rows whose ``obs`` cell is JSON text of ``cell_chars`` characters:
    dictionary-encoded (one value) and run-length encoded indices, zstd: under a kilobyte on disk. Built from
    dictionary arrays: the rows are never expanded here either."""
    cell = "[" + ", ".join(["0"] * ((cell_chars - 2) // 3 + 1)) + "]"

    def same(value, type_=None) -> pa.DictionaryArray:
        return pa.DictionaryArray.from_arrays(pa.array(np.zeros(rows, np.int32)), pa.array([value], type_))

    table = pa.table({"episode": same("bomb"), "t": same(0, pa.int64()), "obs": same(cell),
                      "action": same(0, pa.int64()), "reward": same(0.0)})
    table = table.cast(pa.schema([pa.field(f.name, f.type, nullable=False) for f in table.schema]))
    pq.write_table(table, path, compression="zstd", row_group_size=rows, write_statistics=False,
                   data_page_size=1 << 30, max_rows_per_page=rows, store_schema=False)
    return path


def test_a_parquet_decompression_bomb_is_refused_before_it_is_read(ray_session, tmp_path, capsys):
    """~800 bytes that decode to 2 GB of text (and more as parsed rows): the file is refused from its footer
    and its dictionaries, within the memory of converting a clean table; the other files convert."""
    spec = {**SPEC, "terminated": {"rule": "last_step"}}
    clean = HEADER + b"".join(_csv_episode("a"))
    with TreePeak() as clean_mem:
        assert _convert(tmp_path, capsys, {"good.csv": clean}, spec=spec, folder="clean", out="clean-out")[0] == 0
    bomb = _parquet_bomb(tmp_path / "in-bomb.parquet", cell_chars=2048)
    assert bomb.stat().st_size < 2048
    (tmp_path / "in").mkdir()
    bomb.rename(tmp_path / "in" / "bomb.parquet")
    with TreePeak() as bomb_mem:
        code, printed, out = _convert(tmp_path, capsys, {"good.csv": clean}, spec=spec)
    print(f"\npeak PSS of the process tree: clean {clean_mem.peak / MiB:.0f} MiB, bomb {bomb_mem.peak / MiB:.0f} MiB",
          file=sys.__stderr__)
    assert bomb_mem.rise <= clean_mem.rise + 300 * 10**6
    assert code == 1
    assert sorted(_rows_add_up(out, 4)) == ["a"]
    (record,) = [r for r in _quarantine(out).values() if r["level"] == "file"]
    assert (Path(record["file"]).name, record["row"], record["reason"]) == ("bomb.parquet", None, "too_large")
    message = record["message"]
    size = (tmp_path / "in" / "bomb.parquet").stat().st_size
    assert message.startswith("the text values of row group 1 of 1 (1,000,000 of the file's 1,000,000 rows; "
                              "columns episode, t, obs, action, reward) would decode to 2,053,000,000 bytes; this "
                              f"file of {size:,} bytes may decode to at most 268,435,456 bytes in all")
    assert message.endswith("raise the cap with --max-value-bytes")
    assert f"file not read: {tmp_path / 'in' / 'bomb.parquet'}: too_large: the text values" in printed
    assert "files read:             2 (1 unreadable)" in printed

    # numbers (8 bytes each, run-length encoded) are sized from the footer alone; the cap is the flag's
    (tmp_path / "small").mkdir()
    small = _parquet_bomb(tmp_path / "small" / "zeros.parquet", cell_chars=8)
    code, printed, out = _convert(tmp_path, capsys, {}, "--max-value-bytes", "1MiB", spec=spec, folder="small",
                                  out="small-out")
    assert code == 2 and small.stat().st_size < 2048  # the only file: no episode converted
    (record,) = _quarantine(out).values()
    assert record["message"].startswith("row group 1 of 1 (1,000,000 of the file's 1,000,000 rows; columns episode, "
                                        "t, obs, action, reward) would decode to 32,000,000 bytes; this file of ")
    assert "may decode to at most 1,048,576 bytes in all (the larger of --max-value-bytes 1 MiB and 64x its size)" \
        in record["message"]


def test_a_byte_that_is_not_utf8_in_a_samplebatch_recording_costs_only_its_line(ray_session, tmp_path, capsys):
    name = "output-2026-01-01_00-00-00_worker-0_0.json"
    lines = [sample_batch_line(batch(i, 0, 3, end="terminated")).encode() for i in (1, 5, 9)]
    lines[1] = lines[1].replace(b'"SampleBatch"', b'"Sample\xffBatch"')  # line 2
    path = tmp_path / "rec" / name
    path.parent.mkdir()
    path.write_bytes(b"\n".join(lines) + b"\n")
    code = run_cli(["convert", "samplebatch", str(tmp_path / "rec"), "-o", str(tmp_path / "out")])
    printed = capsys.readouterr()
    assert code == 1 and "Traceback" not in printed.err
    out = tmp_path / "out"
    assert sorted(e.id for e in load_episodes(out)) == ["1", "9"]  # the line after it was read
    (record,) = _quarantine(out).values()
    assert (record["file"], record["line"], record["reason"], record["level"]) == (
        str(path.resolve()), 2, "bad_encoding", "line")
    assert record["message"].startswith("byte 0xff (byte ") and "is not UTF-8" in record["message"]
    assert read_info(out).provenance["report"]["records_read"] == 3
